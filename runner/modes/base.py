"""What every function-calling mode is: a ``Mode`` (per runtime) and a ``ReplyReader`` (per reply).

A mode decides what a request carries (tool definitions, or a system-prompt section), how a reply
becomes tool calls, what the assistant message in the history looks like, how results go back, and
whether something runs before a turn's steps (the ``prompt`` mode's selector). The session calls
these without knowing which mode it runs.

``<think>`` text is taken out of every reply in every mode (``ReplyReader``): it is shown as
reasoning and kept in the transcript, never sent back.

A mode that needs the session during a turn (the selector runs tools) gets a ``TurnAccess``: the
narrow part of a turn a mode may use, never the session itself.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

from runner.agentfile.config import AgentConfig, TemplateSource
from runner.models.base import (
    Completed,
    Model,
    ReasoningDelta,
    Reply,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallReady,
    Usage,
)
from runner.modes.thinking import ThinkingFilter, split_thinking
from runner.tools.base import ToolResult

if TYPE_CHECKING:
    from runner.modes import ModeContext

__all__ = ["Mode", "ReplyReader", "ResultMessage", "TurnAccess"]


@dataclass(frozen=True, slots=True)
class ResultMessage:
    """A message that gives results back; ``result`` when it carries exactly one (``role: tool``)."""

    message: dict[str, Any]
    result: ToolResult | None = None


class TurnAccess(Protocol):
    """What a mode may use of the turn under way (the ``prompt`` mode's selector)."""

    @property
    def tool_definitions(self) -> list[dict[str, Any]]:
        """The agent's tool definitions."""
        ...

    @property
    def history(self) -> Sequence[dict[str, Any]]:
        """The conversation so far (read only)."""
        ...

    @property
    def model(self) -> Model:
        """The model the session talks to."""
        ...

    @property
    def ended(self) -> bool:
        """Whether a decision (a limit, a declined call, a hook) has ended the turn."""
        ...

    async def execute(self, calls: Sequence[ToolCall]) -> list[ToolResult]:
        """Run calls through every check a call passes; their results in call order, reported."""
        ...

    def count_usage(self, usage: Usage) -> None:
        """Add a model call's usage to the session's budget."""
        ...

    def note(self, text: str, level: Literal["info", "warning", "error"] = "info") -> None:
        """Tell the user something."""
        ...

    def record(self, name: str, **data: Any) -> None:
        """Write an event to the transcript."""
        ...

    def add_context(self, content: str) -> None:
        """Append a user message the model reads before it answers."""
        ...

    def render(self, source: TemplateSource, extra: dict[str, Any]) -> str:
        """Render one of the agent's templates with the session's variables and ``extra``."""
        ...


def without_thinking(reply: Reply, streamed_thinking: str) -> Reply:
    """``reply`` with ``<think>`` text out of its content and into its reasoning (once)."""
    text = reply.content or ""
    if not streamed_thinking and "<think>" not in text and "</think>" not in text:
        return reply  # the common case: no think block, nothing to move
    visible, thinking = split_thinking(text)
    thinking = streamed_thinking or thinking
    reasoning = "\n".join(t for t in (reply.reasoning, thinking) if t) or None
    content = visible if reply.content is not None else None
    return dataclasses.replace(reply, content=content, reasoning=reasoning)


def _tool_message(result: ToolResult) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": result.call_id, "content": result.content}


class ReplyReader:
    """Reads one reply: native tool calls pass through; ``<think>`` text becomes reasoning."""

    async def wrap_stream(self, events: AsyncIterator[StreamEvent]) -> AsyncIterator[StreamEvent]:
        """The model's events with ``<think>`` text turned into reasoning (and text calls found)."""
        thinking = ThinkingFilter()
        thought: list[str] = []
        async for event in events:
            if isinstance(event, TextDelta):
                visible, hidden = thinking.feed(event.text)
                if hidden:
                    thought.append(hidden)
                    yield ReasoningDelta(hidden)
                ready = self.text(event.text)
                visible = self.shown(visible)
                if visible:
                    yield TextDelta(visible)
                for call in ready:
                    yield call
            elif isinstance(event, Completed):
                visible, hidden = thinking.finish()
                if hidden:
                    thought.append(hidden)
                    yield ReasoningDelta(hidden)
                reply = self.complete(event.reply, "".join(thought))
                visible = self.shown(visible)
                if visible:
                    yield TextDelta(visible)
                yield Completed(reply)
                return
            else:
                yield event
        raise RuntimeError("the model's stream ended without a Completed event")

    def text(self, delta: str) -> list[ToolCallReady]:
        """Calls that a piece of the reply's text completed (none: native calls are not text)."""
        return []

    def shown(self, visible: str) -> str:
        """What to show of ``visible`` (the reply's text so far, ``<think>`` taken out): all of it,
        unless the mode writes tool calls into the text (they show as progress, not as the answer)."""
        return visible

    def complete(self, reply: Reply, thinking: str) -> Reply:
        """The whole reply, as the loop uses it."""
        return without_thinking(reply, thinking)

    def finish(self, reply: Reply) -> Reply:
        """A reply that was not streamed, as the loop uses it."""
        self.text(reply.content or "")
        return self.complete(reply, "")

    def assistant_message(self, reply: Reply) -> dict[str, Any]:
        """The assistant message appended to the history."""
        return reply.message()

    def result_messages(self, results: Sequence[ToolResult]) -> list[ResultMessage]:
        """The messages that give ``results`` back to the model, in call order."""
        return [
            ResultMessage({"role": "tool", "tool_call_id": r.call_id, "content": r.content}, r)
            for r in results
        ]

    def unreadable(self) -> bool:
        """Whether the reply had tool blocks that could not be read (the model is told and retries)."""
        return False


class Mode:
    """A function-calling mode: one per runtime, immutable; ``reader()`` makes the per-reply state."""

    kind: ClassVar[str] = ""

    def __init__(self, why: str) -> None:
        self.why = why

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.why!r})"

    @classmethod
    def for_agent(cls, config: AgentConfig, why: str | None, context: ModeContext) -> Mode:
        """This mode for ``config``; ``why`` says why it was picked (None: the file asked for it)."""
        return cls(why or f"function_calling: {cls.kind}")

    def system_section(self, tools: Sequence[dict[str, Any]]) -> str | None:
        """Text appended to the system prompt (the inline mode's tool descriptions)."""
        return None

    def request_tools(self, tools: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
        """The ``tools`` of a step's request."""
        return None

    def reader(self) -> ReplyReader:
        """A reader for the next reply."""
        return ReplyReader()

    async def before_steps(self, turn: TurnAccess, text: str) -> None:
        """Work to do before a turn's steps, on its new input (nothing, but in ``prompt`` mode)."""

    async def aclose(self) -> None:
        """Release what the mode opened (the ``prompt`` mode's selector model)."""
