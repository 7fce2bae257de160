"""Structured output in every mode: how the final answer is asked for, and how it is read.

The agent keeps its tools and its loop; only the final answer must match ``output:``. An
``OutputPlan`` says how, by one of three strategies (``docs/structured-output.md`` has the
measurements behind the choice):

- ``response_format`` (native mode, a provider that takes ``tools`` and a ``response_format``
  ``json_schema`` in one request: OpenAI, Azure, OpenAI-compatible servers): every request carries
  both; the model calls tools or answers with the JSON, which arrives as the reply's text. Strict
  when the schema allows it (every object closed, every property required).
- ``tool`` (native mode, providers that cannot combine them, or after a refusal): a final-answer tool
  whose parameters are the schema; the model calls it to finish. The call is answered in the history
  but never sent back to the model when the answer validates: no extra request.
- ``text`` (``inline`` and ``prompt`` modes, and the last fallback): the system prompt asks for the
  answer as JSON; it is found in the reply (the whole text, a fenced block, or the span from the
  first bracket to the last) and repaired with json-repair.

Whatever the strategy, a reply is read leniently: JSON in the text counts (a model that ignores
``response_format``, a cassette recorded under another strategy), and so does a final-answer call.
Schemas go out cleaned like tool schemas (``runner.tools.schema``); answers are checked against the
schema as written. A schema whose root is not an object is wrapped as ``{"value": ...}`` where the
wire needs an object, and unwrapped on reading.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from runner.agentfile.output_schema import OutputSchema
from runner.agentfile.schema_budget import check_off_loop, schema_nodes
from runner.models.base import Model, Reply, ToolCall
from runner.modes.jsontext import FENCE, TOO_DEEP, load_json
from runner.text import counted
from runner.tools.schema import clean_schema, inline_refs

__all__ = [
    "FINAL_TOOL",
    "MAX_ANSWER_CHARS",
    "STRATEGIES",
    "OutputPlan",
    "Strategy",
    "Verdict",
    "find_json",
    "plan_output",
    "prepare_wire",
    "refuses_schema",
]

Strategy = Literal["response_format", "tool", "text"]
#: The strategies in fallback order: a provider that refuses one gets the next.
STRATEGIES: tuple[Strategy, ...] = ("response_format", "tool", "text")
FINAL_TOOL = "final_answer"
#: A longer answer is refused without parsing it (a model stuck in a loop writes megabytes).
MAX_ANSWER_CHARS = 1_000_000
#: json-repair is slow on long text; a longer candidate must already be valid JSON.
REPAIR_LIMIT = 200_000
#: How much of the schema a repair message or a system prompt quotes.
SCHEMA_QUOTE_CHARS = 8000
_JSON_INFO = frozenset({"", "json", "jsonc", "json5", "javascript", "js"})
#: What a provider's refusal of a schema or of structured output says (a 400 or 422).
_REFUSAL = re.compile(
    r"response[_ ]?format|response.?mime|response.?schema|json[_ ]?schema|json[_ ]?mode|structured"
    r"|schema|strict|parameters|function",
    re.IGNORECASE,
)


def refuses_schema(status: int | None, message: str) -> bool:
    """Whether a model error looks like the provider refusing a schema or structured output."""
    return status in (400, 422) and bool(_REFUSAL.search(message))


@dataclass(frozen=True)
class Verdict:
    """A final answer read: its value, or why it is not acceptable; ``call`` is the final-answer call."""

    value: Any = None
    problems: tuple[str, ...] = ()
    call: ToolCall | None = None

    @property
    def ok(self) -> bool:
        return not self.problems


def _is_object_schema(schema: Mapping[str, Any]) -> bool:
    kind = schema.get("type")
    return kind == "object" or (kind is None and "properties" in schema and not _has_combinator(schema))


def _has_combinator(schema: Mapping[str, Any]) -> bool:
    return any(key in schema for key in ("anyOf", "oneOf", "allOf"))


def _closed(node: Any) -> bool:
    """Whether every object in ``node`` lists all its properties as required and allows no others
    (what strict structured output needs); a property named ``enum`` is a schema too."""
    for _, item in schema_nodes(node):
        if item.get("type") == "object":
            properties = item.get("properties") or {}
            if item.get("additionalProperties") is not False or set(item.get("required") or ()) != set(
                properties
            ):
                return False
    return True


def prepare_wire(output: OutputSchema) -> dict[str, Any]:
    """The wire schema of ``output`` (references inlined, cleaned, an object at the root), made once
    and kept in ``output.derived``; ``runner serve`` makes a client's in a worker thread."""
    derived = output.derived
    if "wire" not in derived:
        root = inline_refs(output.schema)
        if not _is_object_schema(output.schema):
            root = {
                "type": "object",
                "properties": {"value": root},
                "required": ["value"],
                "additionalProperties": False,
            }
        derived["wire"] = clean_schema(root)
        derived["closed"] = _closed(derived["wire"])
    wire: dict[str, Any] = derived["wire"]
    return wire


def _fences(text: str) -> list[str]:
    """The bodies of the fenced code blocks in ``text`` whose info string says JSON (or nothing)."""
    bodies: list[str] = []
    lines = text.split("\n")
    index = 0
    while index < len(lines):
        opened = FENCE.match(lines[index])
        if opened is None:
            index += 1
            continue
        marks, info = opened[1], opened[2].strip().split(" ")[0].lower()
        end = index + 1
        while end < len(lines):
            closing = FENCE.match(lines[end])
            if (
                closing
                and closing[1][0] == marks[0]
                and len(closing[1]) >= len(marks)
                and not closing[2].strip()
            ):
                break
            end += 1
        if info in _JSON_INFO:
            bodies.append("\n".join(lines[index + 1 : end]))
        index = end + 1
    return bodies


def _span(text: str) -> str | None:
    """From the first ``{`` or ``[`` to the last ``}`` or ``]``."""
    starts = [i for i in (text.find("{"), text.find("[")) if i >= 0]
    end = max(text.rfind("}"), text.rfind("]"))
    if not starts or end <= min(starts):
        return None
    return text[min(starts) : end + 1]


def find_json(text: str) -> tuple[Any, str | None]:
    """The JSON value a model's answer holds: the whole text, a fenced block (the last), or the span
    between the first bracket and the last; (value, None) or (None, why)."""
    if len(text) > MAX_ANSWER_CHARS:
        return (
            None,
            f"the answer is {len(text):,} characters long; an answer may have at most {MAX_ANSWER_CHARS:,}",
        )
    stripped = text.strip()
    if not stripped:
        return None, "the answer is empty"
    candidates = [stripped, *reversed(_fences(stripped))]
    span = _span(stripped)
    if span is not None:
        candidates.append(span)
    first_why: str | None = None
    for candidate in dict.fromkeys(candidates):
        if len(candidate) > REPAIR_LIMIT:
            try:
                return json.loads(candidate), None
            except RecursionError:
                first_why = first_why or TOO_DEEP
                continue
            except ValueError as exc:
                first_why = first_why or f"not valid JSON ({exc})"
                continue
        value, why = load_json(candidate)
        if why is None:
            return value, None
        first_why = first_why or why
    if span is None:
        return None, "the answer holds no JSON object or array"
    return None, f"the answer's JSON cannot be read: {first_why}"


def _arguments(call: ToolCall) -> tuple[Any, str | None]:
    text = call.arguments or "{}"
    if len(text) > MAX_ANSWER_CHARS:
        return (
            None,
            f"the answer is {len(text):,} characters long; an answer may have at most {MAX_ANSWER_CHARS:,}",
        )
    return load_json(text)


@dataclass(frozen=True, eq=False)
class OutputPlan:
    """How one session asks for its structured answer and reads it (one ``Strategy``)."""

    output: OutputSchema
    strategy: Strategy
    tool_name: str = FINAL_TOOL

    @functools.cached_property
    def wrapped(self) -> bool:
        """Whether the wire schema wraps the answer as ``{"value": ...}`` (its root is not an object)."""
        return not _is_object_schema(self.output.schema)

    @property
    def wire_schema(self) -> dict[str, Any]:
        """The schema as requests carry it: references inlined, cleaned, an object at the root
        (made once per ``OutputSchema``: every session of a runtime shares it)."""
        return prepare_wire(self.output)

    async def read_checked(self, reply: Reply) -> Verdict | None:
        """``read(reply)`` without holding the event loop: a long answer, or one whose check takes
        more than a few thousand steps, is read and checked in a worker thread, within the budget of
        ``agentfile/schema_budget.py`` (past it, the answer is refused with a message saying so)."""
        size = len(reply.content or "") + sum(len(call.arguments or "") for call in reply.tool_calls)
        return await check_off_loop(
            lambda: self.read(reply), size=size, late=lambda why: Verdict(problems=(why,))
        )

    @functools.cached_property
    def strict(self) -> bool:
        """Whether the provider is asked for strict adherence (it refuses strict for open schemas)."""
        if self.output.strict is not None:
            return self.output.strict
        self.wire_schema  # noqa: B018  (computes "closed" with it)
        return bool(self.output.derived["closed"])

    def params(self) -> dict[str, Any]:
        """What a request adds to its parameters (``response_format``), or nothing."""
        if self.strategy != "response_format":
            return {}
        spec = {"name": self.output.name, "schema": self.wire_schema, "strict": self.strict}
        return {"response_format": {"type": "json_schema", "json_schema": spec}}

    def tools(self, tools: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
        """A request's tools, with the final-answer tool last under the ``tool`` strategy."""
        if self.strategy != "tool":
            return tools
        return [*(tools or ()), self.final_tool]

    @functools.cached_property
    def final_tool(self) -> dict[str, Any]:
        """The final-answer tool's definition."""
        what = "the answer as its one argument `value`" if self.wrapped else "the answer as its arguments"
        description = (
            f"Give your final answer: call this once, when you are done, with {what}. "
            "Do not write the answer as text."
        )
        return {
            "type": "function",
            "function": {"name": self.tool_name, "description": description, "parameters": self.wire_schema},
        }

    def section(self) -> str | None:
        """What the system prompt adds: how to give the answer (nothing under ``response_format``)."""
        if self.strategy == "tool":
            return (
                "## Final answer\n"
                f"When you have the final answer, call the `{self.tool_name}` tool with it; do not write "
                "it as text. You may call the other tools first, as usual."
            )
        if self.strategy == "text":
            return (
                "## Final answer\n"
                "You may call tools first, as usual. When you have the final answer, reply with only a JSON "
                "value that matches this JSON Schema (no other text):\n"
                f"```json\n{self.quoted_schema(indent=2)}\n```"
            )
        return None

    def quoted_schema(self, *, indent: int | None = None) -> str:
        """The schema as written, for a prompt (cut past ``SCHEMA_QUOTE_CHARS``)."""
        text = json.dumps(self.output.schema, ensure_ascii=False, indent=indent)
        return text if len(text) <= SCHEMA_QUOTE_CHARS else text[:SCHEMA_QUOTE_CHARS] + " ...(cut)"

    # ----------------------------------------------------------------- reading

    def read(self, reply: Reply) -> Verdict | None:
        """The verdict on ``reply`` as a final answer; None when it is not one (it calls other tools)."""
        final = (
            [call for call in reply.tool_calls if call.name == self.tool_name]
            if self.strategy == "tool"
            else []
        )
        if final:
            call = final[-1]
            value, why = _arguments(call)
            if why is not None:
                return Verdict(
                    problems=(f"the arguments of {self.tool_name} are not JSON: {why}",), call=call
                )
            return self.check(self._unwrap(value), call)
        if reply.tool_calls:
            return None
        text = reply.content or ""
        value, why = find_json(text)
        if why is not None:
            if self.output.schema.get("type") == "string" and text.strip() and len(text) <= MAX_ANSWER_CHARS:
                return self.check(text.strip())  # a string answer may be written as plain text
            return Verdict(problems=(why,))
        return self.check(self._unwrap(value))

    def _unwrap(self, value: Any) -> Any:
        if self.wrapped and isinstance(value, dict) and set(value) == {"value"}:
            return value["value"]
        return value

    def check(self, value: Any, call: ToolCall | None = None) -> Verdict:
        """``value`` against the schema."""
        return Verdict(value=value, problems=tuple(self.output.problems(value)), call=call)

    def repair(self, verdict: Verdict, tries_left: int) -> str:
        """What the model is told about an answer that is not acceptable, and what to do."""
        problems = "\n".join(f"- {problem}" for problem in verdict.problems)
        left = f"({counted(tries_left, 'more try', 'more tries')})"
        if self.strategy == "tool":
            how = f"Call {self.tool_name} again with a corrected answer {left}."
            if verdict.call is None:
                how = f"Give the final answer by calling the {self.tool_name} tool {left}."
        else:
            how = f"Answer again with only the corrected JSON {left}."
        unreadable = verdict.value is None and verdict.call is None
        schema = f"\nThe JSON Schema it must match:\n{self.quoted_schema()}" if unreadable else ""
        return f"Your final answer does not match the required output schema:\n{problems}\n{how}{schema}"

    def fallback(self) -> OutputPlan | None:
        """The plan with the next strategy, for a provider that refused this one (None after ``text``)."""
        position = STRATEGIES.index(self.strategy)
        if position + 1 >= len(STRATEGIES):
            return None
        return dataclasses.replace(self, strategy=STRATEGIES[position + 1])

    def describe(self) -> str:
        """One line for notes and ``runner render``."""
        return {
            "response_format": f"response_format json_schema '{self.output.name}'"
            + (" (strict)" if self.strict else ""),
            "tool": f"a final-answer tool, {self.tool_name}",
            "text": "JSON in the reply, as the system prompt asks",
        }[self.strategy]


def _free_name(taken: Collection[str]) -> str:
    name, number = FINAL_TOOL, 1
    while name in taken:
        number += 1
        name = f"{FINAL_TOOL}_{number}"
    return name


def plan_output(
    output: OutputSchema,
    *,
    mode: str,
    model: Model,
    tool_names: Sequence[str] = (),
    learned: str | None = None,
) -> OutputPlan:
    """The plan for ``output`` in ``mode`` with ``model``: ``text`` outside native mode; in native mode,
    what the runtime learned from a refusal, else what the model says it supports (``structured_output``,
    ``response_format`` when it does not say)."""
    strategy: Strategy
    if mode != "native":
        strategy = "text"
    elif learned in STRATEGIES:
        strategy = learned
    else:
        hint = getattr(model, "structured_output", None)
        strategy = hint if hint in STRATEGIES else "response_format"
    return OutputPlan(output, strategy, _free_name(tool_names))
