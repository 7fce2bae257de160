"""Function-calling modes (SPEC section 8) as strategies the step uses without knowing which it runs.

A mode decides what the request carries (tool specs, or a system-prompt section), how a reply's
text becomes tool calls (``wrap_stream`` / ``finish``), what the assistant message in the history
looks like, and how results go back (``role: tool`` messages, or one user message of
``<tool_response>`` blocks). ``<think>`` text is taken out of every reply in every mode: it is shown
as reasoning and kept in the transcript, never sent back. The ``prompt`` mode's selector runs before
the steps of a turn (``runner.loop.selection``); its steps then carry no tools at all.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from runner.agentfile.config import AgentConfig
from runner.models.base import Completed, Model, ReasoningDelta, Reply, StreamEvent, TextDelta, ToolCallReady
from runner.models.inline import InlineCall, InlineError, InlineParser, strip_for_history, tool_instructions
from runner.models.inline import tool_responses as render_tool_responses
from runner.models.thinking import ThinkingFilter, split_thinking
from runner.tools.base import ToolResult

ModeKind = Literal["native", "inline", "prompt"]


def _without_thinking(reply: Reply, streamed_thinking: str) -> Reply:
    """``reply`` with ``<think>`` text out of its content and into its reasoning (once)."""
    visible, thinking = split_thinking(reply.content or "")
    thinking = streamed_thinking or thinking
    reasoning = "\n".join(t for t in (reply.reasoning, thinking) if t) or None
    content = visible if reply.content is not None else None
    return dataclasses.replace(reply, content=content, reasoning=reasoning)


@dataclass
class Mode:
    """Native tool calls (``tools`` in the request, ``role: tool`` results); the base of the others."""

    kind: ModeKind
    why: str

    def system_section(self, specs: Sequence[dict[str, Any]]) -> str | None:
        """Text appended to the system prompt (inline mode's tool descriptions)."""
        return None

    def request_tools(self, specs: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
        """The ``tools`` of the request."""
        return specs if self.kind == "native" else None

    async def wrap_stream(self, events: AsyncIterator[StreamEvent]) -> AsyncIterator[StreamEvent]:
        """The model's events with ``<think>`` text turned into reasoning (and inline calls found)."""
        thinking = ThinkingFilter()
        thought: list[str] = []
        self._begin()
        async for event in events:
            if isinstance(event, TextDelta):
                visible, hidden = thinking.feed(event.text)
                if hidden:
                    thought.append(hidden)
                    yield ReasoningDelta(hidden)
                if visible:
                    yield TextDelta(visible)
                for ready in self._text(event.text):
                    yield ready
            elif isinstance(event, Completed):
                visible, hidden = thinking.finish()
                if hidden:
                    thought.append(hidden)
                    yield ReasoningDelta(hidden)
                if visible:
                    yield TextDelta(visible)
                yield Completed(self._complete(event.reply, "".join(thought)))
                return
            else:
                yield event
        raise RuntimeError("the model's stream ended without a Completed event")

    def _begin(self) -> None:
        """A streamed reply begins."""

    def _text(self, delta: str) -> list[ToolCallReady]:
        """Calls that a piece of streamed text completed."""
        return []

    def _complete(self, reply: Reply, thinking: str) -> Reply:
        return _without_thinking(reply, thinking)

    def finish(self, reply: Reply) -> Reply:
        """A reply that was not streamed, as the loop uses it (thinking moved out; inline calls parsed)."""
        self._begin()
        self._text(reply.content or "")
        return self._complete(reply, "")

    def assistant_message(self, reply: Reply) -> dict[str, Any]:
        """The assistant message appended to the history."""
        return reply.message()

    def result_messages(self, results: Sequence[ToolResult]) -> list[dict[str, Any]]:
        """The messages that give ``results`` back to the model, in call order."""
        return [{"role": "tool", "tool_call_id": r.call_id, "content": r.content} for r in results]

    def pending_errors(self) -> bool:
        """Whether the last reply had tool blocks that could not be read (inline)."""
        return False


@dataclass
class InlineMode(Mode):
    """Tool blocks written in the reply's text (gptme / Hermes), parsed as soon as each block closes."""

    fmt: Literal["xml", "markdown"] = "xml"
    tool_names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        self._errors: list[InlineError] = []
        self._raw = ""

    def system_section(self, specs: Sequence[dict[str, Any]]) -> str | None:
        return tool_instructions(specs, self.fmt) or None

    def _begin(self) -> None:
        self._parser = InlineParser(self.fmt, self.tool_names)
        self._chunks: list[str] = []
        self._calls: list[InlineCall] = []
        self._errors = []

    def _text(self, delta: str) -> list[ToolCallReady]:
        self._chunks.append(delta)
        return self._collect(self._parser.feed(delta))

    def _collect(self, blocks: list[InlineCall | InlineError]) -> list[ToolCallReady]:
        ready = []
        for block in blocks:
            if isinstance(block, InlineCall):
                self._calls.append(block)
                ready.append(ToolCallReady(len(self._calls) - 1, block.call))
            else:
                self._errors.append(block)
        return ready

    def _complete(self, reply: Reply, thinking: str) -> Reply:
        self._collect(self._parser.finish())
        self._raw = "".join(self._chunks) or reply.content or ""
        cleaned = _without_thinking(reply, thinking)
        return dataclasses.replace(cleaned, tool_calls=tuple(c.call for c in self._calls))

    def assistant_message(self, reply: Reply) -> dict[str, Any]:
        return {"role": "assistant", "content": strip_for_history(self._raw or reply.content or "")}

    def result_messages(self, results: Sequence[ToolResult]) -> list[dict[str, Any]]:
        items = [(r.name, r.content, r.is_error) for r in results] + [e.result() for e in self._errors]
        self._errors = []
        if not items:
            return []
        return [{"role": "user", "content": render_tool_responses(items)}]

    def pending_errors(self) -> bool:
        return bool(self._errors)


def choose_mode(spec: AgentConfig, model: Model, specs: list[dict[str, Any]] | None) -> Mode:
    """The mode an agent runs in, and why (``auto``: native when the model is known to call tools)."""
    setting = spec.function_calling
    names = tuple(s["function"]["name"] for s in specs or ())
    if setting == "native":
        return Mode("native", "function_calling: native")
    if setting == "inline":
        return InlineMode(
            "inline", f"function_calling: inline ({spec.tool_format} blocks)", spec.tool_format, names
        )
    if setting == "prompt":
        return Mode("prompt", "function_calling: prompt (a selector picks tools before each turn)")
    supports = model.supports_tools
    if supports is None:
        return Mode(
            "native",
            "auto: the endpoint decides (OpenAI-compatible server, or a model litellm does not list)",
        )
    if supports:
        return Mode("native", f"auto: litellm lists {model.name} as supporting function calling")
    return InlineMode(
        "inline",
        f"auto: litellm lists {model.name} without function calling, so tools are {spec.tool_format} blocks",
        spec.tool_format,
        names,
    )
