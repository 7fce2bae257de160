"""``function_calling: inline`` (SPEC section 8): tool calls written as text blocks in the reply.

``InlineMode`` is the strategy (the system prompt describes the tools and the block format; requests
carry no ``tools``; results go back as one user message of ``<tool_response>`` blocks); the rest of
this module is the parsing and formatting it uses. Two block formats (``tool_format``):

- ``xml`` (Hermes/Qwen convention): ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``.
  ``"parameters"`` is accepted for ``"arguments"``, arguments given as a JSON string are decoded, a
  JSON list of call objects in one block gives several calls, and a code fence around the JSON is
  removed. A block that is not closed before the next ``<tool_call>`` is an error. The block ends at
  the first ``</tool_call>``.
- ``markdown`` (gptme style): a fenced block whose info string's first word is a tool name and whose
  body is the JSON object of arguments (an empty body is ``{}``). A fence whose info string is not a
  known tool name (```python, ...) is ordinary text. Inside a tool block a fence with an info string
  opens a nested block that a bare fence closes (a ```json wrapper is removed from the body), and
  fence lines inside an unterminated JSON string are content. A block closes at the end of its closing
  fence line (the newline, or the end of the reply).

API:

- ``tool_instructions(tools, fmt) -> str``: the system-prompt section (deterministic text).
- ``InlineParser(fmt, tool_names)``: ``feed(delta) -> list[InlineBlock]`` reports each block on the
  delta that closes it; ``finish()`` at the end (an unclosed block is an ``InlineError``). Blocks inside
  ``<think>...</think>`` are ignored. Once the model starts writing a ``<tool_response`` itself
  (a made-up result), ``stopped`` is True and later blocks are ignored. ``tool_names`` decides which
  fences are calls (markdown); xml blocks are calls whatever the name. ``parse_blocks`` is one-shot.
- ``InlineBlock = InlineCall | InlineError``: a call (``ToolCall`` with a fresh id; arguments as JSON
  text) or an error the model can read (``message()``; ``result()`` for ``tool_responses``). An xml
  call to an unknown tool name is still a call: the executor answers it with the list of tools.
- ``tool_responses(results) -> str``: the one user message carrying ``<tool_response>`` blocks.
- ``strip_for_history(text) -> str``: the assistant text as it goes back to the model (thinking and
  any made-up ``<tool_response>`` removed, tool blocks kept).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from html import escape
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from runner.agentfile.config import AgentConfig
from runner.models.accumulate import new_call_id
from runner.models.base import Reply, ToolCall, ToolCallReady
from runner.modes.base import Mode, ReplyReader, ResultMessage, without_thinking
from runner.modes.jsontext import FENCE, load_json, tool_function, unwrap_fence
from runner.modes.templates import prompt_environment
from runner.modes.thinking import ThinkingFilter, partial_suffix, split_thinking
from runner.tools.base import ToolResult

if TYPE_CHECKING:
    from runner.modes import ModeContext

__all__ = [
    "InlineBlock",
    "InlineCall",
    "InlineError",
    "InlineMode",
    "InlineParser",
    "ToolFormat",
    "parse_blocks",
    "strip_for_history",
    "tool_instructions",
    "tool_responses",
]

ToolFormat = Literal["xml", "markdown"]
_OPEN, _CLOSE, _RESPONSE = "<tool_call>", "</tool_call>", "<tool_response"
_RAW_LIMIT = 2000
_CALL_KEYS = {"name", "arguments", "parameters"}
_HINT = {
    "xml": 'Write each call as <tool_call>{"name": "TOOL", "arguments": {...}}</tool_call>.',
    "markdown": "Write each call as a fenced block: ```TOOL on the first line, the JSON arguments, then ```.",
}


def _shorten(raw: str) -> str:
    more = len(raw) - _RAW_LIMIT
    return raw if more <= 0 else raw[:_RAW_LIMIT] + f"\n[... {more} more characters]"


# --- instructions ---------------------------------------------------------------------------------


def _placeholder(schema: Any) -> Any:
    if not isinstance(schema, Mapping):
        return "..."
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) and kind else kind
    return {"integer": 1, "number": 1, "boolean": True, "array": [], "object": {}}.get(str(kind), "...")


def _example_arguments(parameters: Mapping[str, Any]) -> dict[str, Any]:
    properties = parameters.get("properties")
    if not isinstance(properties, Mapping) or not properties:
        return {}
    required = [name for name in parameters.get("required") or () if name in properties]
    names = required or [next(iter(properties))]
    return {name: _placeholder(properties[name]) for name in names}


def tool_instructions(tools: Sequence[Mapping[str, Any]], fmt: ToolFormat) -> str:
    """The system-prompt section describing the tools and the block format ("" without tools)."""
    if not tools:
        return ""
    functions = [tool_function(spec) for spec in tools]
    rows = [
        {
            **function,
            "spec_json": json.dumps({"type": "function", "function": function}, ensure_ascii=False),
            "parameters_json": json.dumps(function["parameters"], ensure_ascii=False),
        }
        for function in functions
    ]
    first = functions[0]
    arguments = _example_arguments(first["parameters"])
    if fmt == "xml":
        example = json.dumps({"name": first["name"], "arguments": arguments}, ensure_ascii=False)
    else:
        example = f"```{first['name']}\n{json.dumps(arguments, ensure_ascii=False)}\n```"
    template = prompt_environment().get_template(f"inline_{fmt}.md.j2")
    return template.render(tools=rows, example=example).strip()


# --- blocks ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class InlineCall:
    """A tool call written in the reply; ``raw`` is the block as written."""

    call: ToolCall
    raw: str


@dataclass(frozen=True, slots=True)
class InlineError:
    """A block that could not be read as a call; ``name`` is the tool's name when known, else ""."""

    name: str
    error: str
    raw: str

    def message(self) -> str:
        """What the model is told: the problem, the block as written."""
        return f"{self.error}\nThe block was:\n{_shorten(self.raw)}"

    def result(self) -> tuple[str, str, bool]:
        """The error as a ``tool_responses`` item."""
        return (self.name or "tool_call", self.message(), True)


InlineBlock = InlineCall | InlineError


def _call(name: str, arguments: Mapping[str, Any], raw: str) -> InlineCall:
    text = json.dumps(dict(arguments), ensure_ascii=False)
    return InlineCall(ToolCall(id=new_call_id(), name=name, arguments=text), raw)


def _arguments(value: Any) -> tuple[dict[str, Any] | None, str | None]:
    if value is None:
        return {}, None
    if isinstance(value, str):
        value, problem = load_json(value) if value.strip() else ({}, None)
        if problem:
            return None, f"its arguments are a string that is {problem}"
    if not isinstance(value, dict):
        return None, "its arguments are not a JSON object"
    return value, None


def _xml_blocks(body: str, raw: str) -> list[InlineBlock]:
    hint = _HINT["xml"]
    value, problem = load_json(unwrap_fence(body))
    if problem:
        return [InlineError("", f"Invalid tool call: the block's JSON is {problem}. {hint}", raw)]
    items = value if isinstance(value, list) else [value]
    blocks: list[InlineBlock] = []
    for item in items:
        if isinstance(item, dict) and isinstance(item.get("function"), dict):
            item = item["function"]  # an OpenAI-style {"type": "function", "function": {...}}
        name = item.get("name") if isinstance(item, dict) else None
        if not isinstance(name, str) or not name.strip():
            blocks.append(InlineError("", f'Invalid tool call: the JSON has no "name". {hint}', raw))
            continue
        arguments, problem = _arguments(item.get("arguments", item.get("parameters")))
        if arguments is None:
            blocks.append(InlineError(name, f"Invalid call of {name}: {problem}. {hint}", raw))
        else:
            blocks.append(_call(name.strip(), arguments, raw))
    return blocks


def _markdown_block(name: str, body: str, raw: str) -> InlineBlock:
    body = unwrap_fence(body)
    value, problem = load_json(body) if body.strip() else ({}, None)
    if isinstance(value, dict) and value.get("name") == name and set(value) <= _CALL_KEYS:
        value = value.get("arguments", value.get("parameters")) or {}  # a call object instead of arguments
    if problem or not isinstance(value, dict):
        why = f"is {problem}" if problem else "is not a JSON object"
        return InlineError(name, f"Invalid call of {name}: the block's body {why}. {_HINT['markdown']}", raw)
    return _call(name, value, raw)


@dataclass(slots=True)
class _Fenced:
    """A markdown tool block being read."""

    name: str
    stack: list[tuple[str, int]]
    raw: list[str]
    body: list[str] = field(default_factory=list)
    json_body: bool | None = None  # whether the body is JSON (decided by its first character)
    in_string: bool = False

    def track(self, line: str) -> None:
        if self.json_body is None and line.strip():
            self.json_body = line.lstrip()[0] in "{["
        if not self.json_body:
            return
        escaped = False
        for char in line:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = self.in_string
            elif char == '"':
                self.in_string = not self.in_string


def _fence(line: str) -> tuple[str, int, str] | None:
    match = FENCE.match(line)
    if match is None:
        return None
    marks, info = match[1], match[2].strip()
    if marks[0] == "`" and "`" in info:
        return None
    return marks[0], len(marks), info


class InlineParser:
    """Finds tool blocks in a streamed reply; each is reported by the ``feed`` that closes it."""

    def __init__(self, fmt: ToolFormat, tool_names: Iterable[str]) -> None:
        if fmt not in _HINT:
            raise ValueError(f"unknown tool format {fmt!r} (expected xml or markdown)")
        self.fmt: ToolFormat = fmt
        self.tool_names = frozenset(tool_names)
        self._thinking = ThinkingFilter()
        self._stopped = False
        self._pending = ""  # xml: a possible partial tag
        self._line: list[str] = []  # markdown: the pieces of the current unfinished line
        self._body: list[str] | None = None  # xml: the open block's text so far
        self._fenced: _Fenced | None = None  # markdown: the open tool block
        self._other: list[tuple[str, int]] = []  # markdown: the open ordinary fences
        self._visible: list[str] = []  # the reply's text outside tool blocks, not yet taken
        self._shown = 0  # markdown: characters of the unfinished line already made visible

    def take_visible(self) -> str:
        """The text outside tool blocks fed since the last call: what a reader shows of the reply."""
        text = "".join(self._visible)
        self._visible.clear()
        return text

    @property
    def stopped(self) -> bool:
        """True once the model started writing a ``<tool_response`` itself; later blocks are ignored."""
        return self._stopped

    def feed(self, delta: str) -> list[InlineBlock]:
        """Add a piece of the reply; return the blocks it closes."""
        visible, _ = self._thinking.feed(delta)
        return self._scan(visible, final=False)

    def finish(self) -> list[InlineBlock]:
        """The reply ended: return the blocks closed by its end (an unclosed block is an error)."""
        visible, _ = self._thinking.finish()
        blocks = self._scan(visible, final=True)
        if self.fmt == "xml" and self._body is None and not self._stopped:
            self._visible.append(self._pending)  # the start of a tag that never came
        if self._body is not None and not self._stopped:
            raw = _OPEN + "".join(self._body) + self._pending
            message = f"Invalid tool call: the block was not closed with {_CLOSE}. {_HINT['xml']}"
            blocks.append(InlineError("", message, raw))
        if self._fenced is not None and not self._stopped:
            name = self._fenced.name
            message = f"Invalid call of {name}: the block was not closed with a fence. {_HINT['markdown']}"
            blocks.append(InlineError(name, message, "\n".join(self._fenced.raw)))
        self._body = self._fenced = None
        self._pending = ""
        return blocks

    def _scan(self, text: str, final: bool) -> list[InlineBlock]:
        if self._stopped:
            return []
        if self.fmt == "xml":
            return self._scan_xml(text)
        blocks: list[InlineBlock] = []
        if "\n" in text or final:
            lines = ("".join(self._line) + text).split("\n")
            self._line = [] if final else [lines.pop()]
            last = len(lines) - 1
            for number, line in enumerate(lines):
                if self._markdown_line(line, blocks) and not self._stopped:
                    self._visible.append(line[self._shown :] + ("" if final and number == last else "\n"))
                self._shown = 0
            if self._line:
                self._show_partial_line()
        else:
            self._line.append(text)
            self._show_partial_line()
        return blocks

    def _show_partial_line(self) -> None:
        """Show an unfinished line at once when it cannot open a tool block (nor be one's body)."""
        line = "".join(self._line)
        lead = line.lstrip()
        if self._fenced is not None or not lead or lead[0] in "`~":
            return
        cut = line.find("<")  # perhaps a "<tool_response": wait for the whole line
        end = len(line) if cut < 0 else cut
        if end > self._shown:
            self._visible.append(line[self._shown : end])
            self._shown = end

    def _scan_xml(self, text: str) -> list[InlineBlock]:
        blocks: list[InlineBlock] = []
        pending = self._pending + text
        while pending and not self._stopped:
            body = self._body
            if body is None:
                at, response = pending.find(_OPEN), pending.find(_RESPONSE)
                if response >= 0 and (at < 0 or response < at):
                    self._visible.append(pending[:response])
                    self._stopped = True
                elif at < 0:
                    keep = max(partial_suffix(pending, _OPEN), partial_suffix(pending, _RESPONSE))
                    self._visible.append(pending[: len(pending) - keep])
                    pending = pending[len(pending) - keep :]
                    break
                else:
                    self._visible.append(pending[:at])
                    self._body, pending = [], pending[at + len(_OPEN) :]
                continue
            close, again, hint = pending.find(_CLOSE), pending.find(_OPEN), _HINT["xml"]
            if again >= 0 and (close < 0 or again < close):
                message = f"Invalid tool call: the block was not closed before the next {_OPEN}. {hint}"
                blocks.append(InlineError("", message, _OPEN + "".join(body) + pending[:again]))
                self._body, pending = None, pending[again:]
            elif close < 0:
                keep = max(partial_suffix(pending, _CLOSE), partial_suffix(pending, _OPEN))
                body.append(pending[: len(pending) - keep])
                pending = pending[len(pending) - keep :]
                break
            else:
                text = "".join(body) + pending[:close]
                blocks.extend(_xml_blocks(text, _OPEN + text + _CLOSE))
                self._body, pending = None, pending[close + len(_CLOSE) :]
        self._pending = "" if self._stopped else pending
        return blocks

    def _markdown_line(self, line: str, blocks: list[InlineBlock]) -> bool:
        """Read one whole line; whether it is visible (outside tool blocks, before a made-up response)."""
        if self._stopped:
            return False
        outside = self._fenced is None
        self._read_markdown_line(line, blocks)
        return outside and self._fenced is None and not self._stopped

    def _read_markdown_line(self, line: str, blocks: list[InlineBlock]) -> None:
        fence = _fence(line)
        block = self._fenced
        if block is None and not self._other:
            if fence is None:
                self._stopped = _RESPONSE in line
                return
            name = fence[2].split()[0] if fence[2] else ""
            if name in self.tool_names:
                self._fenced = _Fenced(name, [fence[:2]], [line])
            else:
                self._other = [fence[:2]]
            return
        stack = self._other if block is None else block.stack
        if block is not None:
            block.raw.append(line)
            if block.in_string:
                fence = None
        if fence is not None and fence[2]:
            stack.append(fence[:2])
        elif fence is not None and fence[0] == stack[-1][0] and fence[1] >= stack[-1][1]:
            stack.pop()
            if block is not None and not stack:
                blocks.append(_markdown_block(block.name, "\n".join(block.body), "\n".join(block.raw)))
                self._fenced = None
                return
        if block is not None:
            block.body.append(line)
            if fence is None:
                block.track(line)


def parse_blocks(text: str, fmt: ToolFormat, tool_names: Iterable[str]) -> list[InlineBlock]:
    """Every block of a whole reply, in order."""
    parser = InlineParser(fmt, tool_names)
    return parser.feed(text) + parser.finish()


# --- results and history --------------------------------------------------------------------------


def tool_responses(results: Sequence[tuple[str, str, bool]]) -> str:
    """One user message with a ``<tool_response>`` block per (name, content, is_error), in call order."""
    parts = []
    for name, content, is_error in results:
        error = ' error="true"' if is_error else ""
        body = content.rstrip("\n")
        parts.append(f'<tool_response name="{escape(name)}"{error}>\n{body}\n</tool_response>')
    return "\n".join(parts)


def strip_for_history(text: str) -> str:
    """The assistant text as the model sees it again: no thinking, no made-up ``<tool_response``."""
    visible, _ = split_thinking(text)
    cut = visible.find(_RESPONSE)
    return visible if cut < 0 else visible[:cut].rstrip()


# --- the strategy ---------------------------------------------------------------------------------


class InlineMode(Mode):
    """Tool blocks written in the reply's text (gptme / Hermes), parsed as soon as each block closes."""

    kind: ClassVar[str] = "inline"

    def __init__(self, why: str, *, fmt: ToolFormat = "xml", tool_names: Sequence[str] = ()) -> None:
        super().__init__(why)
        self.fmt: ToolFormat = fmt
        self.tool_names = tuple(tool_names)

    @classmethod
    def for_agent(cls, config: AgentConfig, why: str | None, context: ModeContext) -> InlineMode:
        """Blocks in the file's ``tool_format``; only the agent's tool names open markdown blocks."""
        why = why or f"function_calling: inline ({config.tool_format} blocks)"
        return cls(why, fmt=config.tool_format, tool_names=context.tool_names)

    def system_section(self, tools: Sequence[dict[str, Any]]) -> str | None:
        """The tools and the block format, described for the model."""
        return tool_instructions(tools, self.fmt) or None

    def reader(self) -> InlineReader:
        """A parser for the next reply's blocks."""
        return InlineReader(self.fmt, self.tool_names)


class InlineReader(ReplyReader):
    """One reply's tool blocks: calls as they close, blocks that could not be read, the raw text."""

    def __init__(self, fmt: ToolFormat, tool_names: Sequence[str]) -> None:
        self._parser = InlineParser(fmt, tool_names)
        self._chunks: list[str] = []
        self._calls: list[InlineCall] = []
        self._errors: list[InlineError] = []
        self._raw = ""

    def text(self, delta: str) -> list[ToolCallReady]:
        self._chunks.append(delta)
        return self._collect(self._parser.feed(delta))

    def shown(self, visible: str) -> str:
        return self._parser.take_visible()  # the text outside tool blocks (and before a made-up response)

    def _collect(self, blocks: list[InlineBlock]) -> list[ToolCallReady]:
        ready = []
        for block in blocks:
            if isinstance(block, InlineCall):
                self._calls.append(block)
                ready.append(ToolCallReady(len(self._calls) - 1, block.call))
            else:
                self._errors.append(block)
        return ready

    def complete(self, reply: Reply, thinking: str) -> Reply:
        self._collect(self._parser.finish())
        self._raw = "".join(self._chunks) or reply.content or ""
        cleaned = without_thinking(reply, thinking)
        return dataclasses.replace(cleaned, tool_calls=tuple(c.call for c in self._calls))

    def assistant_message(self, reply: Reply) -> dict[str, Any]:
        return {"role": "assistant", "content": strip_for_history(self._raw or reply.content or "")}

    def result_messages(self, results: Sequence[ToolResult]) -> list[ResultMessage]:
        items = [(r.name, r.content, r.is_error) for r in results] + [e.result() for e in self._errors]
        self._errors = []
        if not items:
            return []
        return [ResultMessage({"role": "user", "content": tool_responses(items)})]

    def unreadable(self) -> bool:
        return bool(self._errors)
