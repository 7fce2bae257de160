"""``function_calling: prompt`` (SPEC section 8; Open WebUI's non-native mode): a selector picks tools.

``PromptMode`` is the strategy: before the steps of a turn, a selector request (``selector.model``,
else the agent's model) gets the tool definitions as JSON, the last ``selector.history`` messages
and the input, and answers ``{"tool_calls": [{"name", "parameters"}]}``. The calls run in parallel
through the same checks as any call (permissions, hooks, validation); their outputs go to the main
model as one context message, and the main model answers without tools. With ``selector.rounds > 1``
the selector runs again with the new outputs until it picks nothing or the rounds are spent. Its
usage counts. The rest of this module is the parsing and formatting it uses:

- ``selector_messages(tools, history, input, *, template_text=None, variables=None)``: the selector
  request. The system message is ``runner/modes/prompts/tool_selection.md.j2`` (or the agent's
  ``prompts.tool_selection`` text) rendered in a sandbox with ``StrictUndefined``; it sees ``tools``
  (each ``{name, description, parameters}``), ``tools_json`` (that list as pretty JSON), ``history``
  (each ``{role, content}``), ``input``, and any ``variables`` given (e.g. ``vars``, ``agent``,
  ``now``). As in Open WebUI, the user message carries the history (already cut by the caller) and
  the query: ``History:`` lines ``ROLE: \"\"\"text\"\"\"`` then ``Query: input``.
  ``selection_context`` gives the template variables alone, for rendering with another engine.
- ``extract_selection(text, tools_by_name) -> Selection``: the JSON is searched for in the answer
  (thinking removed): the whole text, code fences, the first object in the prose that looks like an
  answer, then the first ``{`` to the last ``}`` (or ``[`` to ``]``); broken JSON is repaired
  (trailing commas, single quotes) unless it is cut short. Accepted shapes: ``{"tool_calls": [...]}``,
  a bare call object, a list of calls; ``"arguments"`` is a synonym of ``"parameters"`` and an
  OpenAI-style ``{"function": {...}}`` item is unwrapped. Unknown tools go to ``unknown`` (not
  called); parameters outside the tool's ``properties`` are dropped (kept when the schema declares no
  properties or allows ``additionalProperties``) and reported in ``dropped``; missing required
  parameters are reported in ``problems`` but the call is kept (the executor's validation answers it).
- ``context_message(executed, notes=())``: the one message that gives the main model each tool's
  arguments and output (Open WebUI's "context"), in ``<tool_result>`` blocks.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from html import escape
from typing import TYPE_CHECKING, Any, ClassVar

import jinja2

from runner.agentfile.config import AgentConfig, SelectorConfig, TemplateSource
from runner.models.accumulate import new_call_id
from runner.models.base import Model, Request, ToolCall
from runner.modes.base import Mode, TurnAccess
from runner.modes.jsontext import load_json, tool_function
from runner.modes.templates import prompt_environment
from runner.modes.thinking import split_thinking
from runner.tools.executor import parse_arguments

if TYPE_CHECKING:
    from runner.modes import ModeContext

__all__ = [
    "DEFAULT_TEMPLATE",
    "PromptMode",
    "Selection",
    "context_message",
    "extract_selection",
    "render_selector_prompt",
    "selection_context",
    "selector_messages",
    "selector_query",
]

DEFAULT_TEMPLATE = "tool_selection.md.j2"
_FENCED = re.compile(
    r"^ {0,3}(?:`{3,}|~{3,})[^\n]*\n(.*?)^ {0,3}(?:`{3,}|~{3,})[ \t]*$", re.DOTALL | re.MULTILINE
)
_MAX_STARTS = 200  # object starts tried in prose (keeps a pathological answer linear enough)


@dataclass(frozen=True, slots=True)
class Selection:
    """What the selector chose: calls to run (name, arguments) and what was wrong with its answer."""

    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    dropped: dict[str, list[str]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def tool_calls(self) -> list[ToolCall]:
        """The calls as ``ToolCall``s with fresh ids, ready for the executor."""
        return [
            ToolCall(id=new_call_id(), name=name, arguments=json.dumps(arguments, ensure_ascii=False))
            for name, arguments in self.calls
        ]

    def notes(self) -> list[str]:
        """One readable line per unknown tool, dropped parameters and problem (for the context message)."""
        lines = [
            f"The selector asked for an unknown tool {name!r}; it was not called." for name in self.unknown
        ]
        for name, params in self.dropped.items():
            lines.append(f"Parameters not in the schema of {name} were ignored: {', '.join(params)}.")
        return lines + list(self.problems)


# --- the request ----------------------------------------------------------------------------------


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: keep the text ones
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return "" if content is None else str(content)


def _history(history: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    rows = []
    for message in history:
        role = str(message.get("role", "user"))
        content = _text(message.get("content"))
        if role == "assistant":
            content = split_thinking(content)[0]
            names = [
                str((call.get("function") or {}).get("name", "")) for call in message.get("tool_calls") or ()
            ]
            if names and not content.strip():
                content = f"(called {', '.join(names)})"
        if content.strip():
            rows.append({"role": role, "content": content.strip()})
    return rows


def selection_context(
    tools: Sequence[Mapping[str, Any]], history: Sequence[Mapping[str, Any]], input: str
) -> dict[str, Any]:
    """The selector template's variables: ``tools``, ``tools_json``, ``history`` and ``input``."""
    functions = [tool_function(spec) for spec in tools]
    return {
        "tools": functions,
        "tools_json": json.dumps(functions, indent=2, ensure_ascii=False),
        "history": _history(history),
        "input": input,
    }


@lru_cache(maxsize=16)
def _template(text: str | None) -> jinja2.Template:
    env = prompt_environment()
    return env.get_template(DEFAULT_TEMPLATE) if text is None else env.from_string(text)


def render_selector_prompt(
    tools: Sequence[Mapping[str, Any]],
    history: Sequence[Mapping[str, Any]],
    input: str,
    *,
    template_text: str | None = None,
    variables: Mapping[str, Any] | None = None,
) -> str:
    """The selector's system prompt (jinja2 errors propagate: the caller locates them)."""
    context = {**(variables or {}), **selection_context(tools, history, input)}
    return _template(template_text).render(context).strip()


def selector_query(history: Sequence[Mapping[str, Any]], input: str) -> str:
    """The selector's user message: the recent history, then the query."""
    rows = _history(history)
    if not rows:
        return f"Query: {input}"
    lines = [f'{row["role"].upper()}: """{row["content"]}"""' for row in rows]
    return "History:\n" + "\n".join(lines) + f"\nQuery: {input}"


def selector_messages(
    tools: Sequence[Mapping[str, Any]],
    history: Sequence[Mapping[str, Any]],
    input: str,
    *,
    template_text: str | None = None,
    variables: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """The selector request's messages: the rendered system prompt and the history + query."""
    system = render_selector_prompt(tools, history, input, template_text=template_text, variables=variables)
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": selector_query(history, input)},
    ]


# --- the answer -----------------------------------------------------------------------------------


def _looks_like_answer(value: Any) -> bool:
    if isinstance(value, dict):
        return "tool_calls" in value or "name" in value or "function" in value
    return isinstance(value, list) and all(isinstance(item, dict) for item in value)


def _first_answer_in_prose(text: str) -> Any:
    decoder = json.JSONDecoder()
    starts = [index for index, char in enumerate(text) if char in "{["][:_MAX_STARTS]
    for start in starts:
        try:
            value, _ = decoder.raw_decode(text, start)
        except ValueError:
            continue
        if _looks_like_answer(value):
            return value
    return None


def _find_json(text: str) -> tuple[Any, str | None]:
    """The JSON value in the selector's answer, or (None, why)."""
    text = split_thinking(text)[0].strip()
    if not text:
        return None, "the selector's answer is empty; no tool was called"
    with contextlib.suppress(ValueError):
        return json.loads(text), None
    for body in _FENCED.findall(text):
        value, _ = load_json(body)
        if isinstance(value, dict | list):
            return value, None
    value = _first_answer_in_prose(text)
    if value is not None:
        return value, None
    reasons = []
    for opener, closer in (("{", "}"), ("[", "]")):
        start, end = text.find(opener), text.rfind(closer)
        if start >= 0:
            value, why = load_json(text[start : end + 1] if end > start else text[start:])
            if why is None:
                return value, None
            reasons.append(why)
    if not reasons:
        return None, "the selector answered in prose, without a JSON object; no tool was called"
    return None, f"the selector's answer is not valid JSON ({reasons[0]}); no tool was called"


def _items(value: Any) -> tuple[list[Any], str | None]:
    if isinstance(value, list):
        return value, None
    if not isinstance(value, dict):
        return [], "the selector's JSON is not an object; no tool was called"
    if "tool_calls" in value:
        calls = value["tool_calls"]
        if calls is None or isinstance(calls, list):
            return calls or [], None
        if isinstance(calls, dict):
            return [calls], None
        return [], 'the selector\'s "tool_calls" is not a list; no tool was called'
    if "name" in value or "function" in value:
        return [value], None
    return [], 'the selector\'s JSON has no "tool_calls"; no tool was called'


def _allowed(parameters: Mapping[str, Any]) -> set[str] | None:
    """The parameter names a schema accepts; None when it accepts any."""
    extra = parameters.get("additionalProperties")
    properties = parameters.get("properties")
    if extra not in (None, False) or (extra is None and not isinstance(properties, Mapping)):
        return None
    return set(properties) if isinstance(properties, Mapping) else set()


def extract_selection(text: str, tools_by_name: Mapping[str, Mapping[str, Any]]) -> Selection:
    """The calls in the selector's answer, with unknown tools, dropped parameters and problems."""
    selection = Selection()
    value, why = _find_json(text)
    items, problem = _items(value) if why is None else ([], why)
    if problem:
        selection.problems.append(problem)
    for number, item in enumerate(items, 1):
        if isinstance(item, dict) and isinstance(item.get("function"), dict):
            item = item["function"]
        name = item.get("name") if isinstance(item, dict) else None
        if not isinstance(name, str) or not name.strip():
            selection.problems.append(f"call {number} of the selector has no tool name; it was not called")
            continue
        name = name.strip()
        if name not in tools_by_name:
            selection.unknown.append(name)
            continue
        arguments = item.get("parameters", item.get("arguments"))
        if isinstance(arguments, str):
            arguments, _ = load_json(arguments) if arguments.strip() else ({}, None)
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            selection.problems.append(f"the parameters of {name} are not a JSON object; it was not called")
            continue
        parameters = tool_function(tools_by_name[name])["parameters"]
        allowed = _allowed(parameters)
        if allowed is not None:
            extra = [key for key in arguments if key not in allowed]
            if extra:
                known = selection.dropped.setdefault(name, [])
                known.extend(key for key in extra if key not in known)
                arguments = {key: arg for key, arg in arguments.items() if key in allowed}
        missing = [key for key in parameters.get("required") or () if key not in arguments]
        if missing:
            selection.problems.append(f"{name} is missing required parameters: {', '.join(missing)}")
        selection.calls.append((name, arguments))
    return selection


# --- the context ----------------------------------------------------------------------------------


def context_message(
    executed: Sequence[tuple[str, Mapping[str, Any] | str, str, bool]], notes: Sequence[str] = ()
) -> str:
    """The message giving the main model each tool's arguments and output ("" when there is nothing)."""
    if not executed and not notes:
        return ""
    parts = ["Tools were run for the user's latest message. Use their results to answer:"]
    for name, arguments, output, is_error in executed:
        if not isinstance(arguments, str):
            arguments = json.dumps(dict(arguments), ensure_ascii=False)
        error = ' error="true"' if is_error else ""
        body = output.rstrip("\n")
        parts.append(
            f'<tool_result name="{escape(name)}"{error}>\n<arguments>{arguments}</arguments>\n'
            f"<output>\n{body}\n</output>\n</tool_result>"
        )
    if notes:
        parts.append("Notes:\n" + "\n".join(f"- {note}" for note in notes))
    return "\n\n".join(parts)


# --- the strategy ---------------------------------------------------------------------------------


class PromptMode(Mode):
    """A selector request picks and runs tools before each turn's steps; the steps carry no tools."""

    kind: ClassVar[str] = "prompt"

    def __init__(
        self,
        why: str,
        *,
        selector: SelectorConfig,
        template: TemplateSource | None = None,
        selector_model: Model | None = None,
    ) -> None:
        super().__init__(why)
        self.selector = selector
        self.template = template
        self.selector_model = selector_model

    @classmethod
    def for_agent(cls, config: AgentConfig, why: str | None, context: ModeContext) -> PromptMode:
        """The file's ``selector:``; a ``selector.model`` of its own is built through ``context``."""
        selector_model = None
        if config.selector.model and context.make_model is not None:
            selector_model = context.make_model(config.selector.model)
        return cls(
            why or "function_calling: prompt (a selector picks tools before each turn)",
            selector=config.selector,
            template=config.prompts.tool_selection,
            selector_model=selector_model,
        )

    async def aclose(self) -> None:
        """Close the selector's own model, if it has one."""
        if self.selector_model is not None:
            await self.selector_model.aclose()

    async def before_steps(self, turn: TurnAccess, text: str) -> None:
        """Run the selector rounds of one turn; add the context message when tools ran."""
        specs = turn.tool_definitions
        if not specs:
            return
        by_name = {s["function"]["name"]: s["function"] for s in specs}
        model = self.selector_model or turn.model
        executed: list[tuple[str, Any, str, bool]] = []
        notes: list[str] = []
        for _ in range(self.selector.rounds):
            history = list(turn.history[-self.selector.history :]) if self.selector.history else []
            seen = [*history, *_results_as_messages(executed)]
            messages = [
                {"role": "system", "content": self._system(turn, seen, text)},
                {"role": "user", "content": selector_query(seen, text)},
            ]
            reply = await model.complete(Request(model=model.name, messages=messages, tools=None, params={}))
            turn.count_usage(reply.usage)
            selection = extract_selection(reply.content or "", by_name)
            round_notes = selection.notes()
            turn.record(
                "selector",
                calls=[name for name, _ in selection.calls],
                unknown=selection.unknown,
                dropped=selection.dropped,
                problems=selection.problems,
            )
            for note in round_notes:
                turn.note(f"selector: {note}", "warning")
            notes.extend(round_notes)
            calls = selection.tool_calls()
            if not calls:
                break
            for call, result in zip(calls, await turn.execute(calls), strict=True):
                arguments, _ = parse_arguments(call.arguments)
                executed.append((result.name, arguments or {}, result.content, result.is_error))
            if turn.ended:
                break
        content = context_message(executed, notes)
        if content:
            turn.add_context(content)

    def _system(self, turn: TurnAccess, history: list[dict[str, Any]], text: str) -> str:
        """The selector's system prompt: the packaged template, or the agent's ``prompts.tool_selection``."""
        specs = turn.tool_definitions
        if self.template is None:
            return render_selector_prompt(specs, history, text)
        return turn.render(self.template, selection_context(specs, history, text))


def _results_as_messages(executed: list[tuple[str, Any, str, bool]]) -> list[dict[str, Any]]:
    """Earlier rounds' outputs, as the next round's selector sees them."""
    if not executed:
        return []
    return [{"role": "user", "content": context_message(executed)}]
