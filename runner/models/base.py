"""The ``Model`` protocol and the values that cross it.

Messages are OpenAI chat-format dicts everywhere (``{"role": ..., "content": ...}``); nothing here
converts them, so a step costs no more than the provider call itself. A model answers a ``Request``
either at once (``complete`` -> ``Reply``) or as a stream of events that always ends with
``Completed(reply)``.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from runner.errors import ModelError

__all__ = [
    "Completed",
    "EncodedRun",
    "Model",
    "ReasoningDelta",
    "Reply",
    "Request",
    "StreamEvent",
    "StreamingUnsupported",
    "TextDelta",
    "ToolCall",
    "ToolCallReady",
    "Usage",
    "events_of",
    "says_streaming_unsupported",
]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call the model asked for; ``arguments`` is the raw JSON text ("{}" when it sent none)."""

    id: str
    name: str
    arguments: str

    def message(self) -> dict[str, Any]:
        """The call in OpenAI's ``tool_calls`` item format."""
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments or "{}"},
        }


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens (and the cost, when the price is known) of one or more model calls.

    ``cached_tokens`` are the prompt tokens the provider read from its prompt cache
    (``usage.prompt_tokens_details.cached_tokens``); they are part of ``prompt_tokens``.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cost_usd: float | None = None
    cached_tokens: int = 0

    def as_dict(self) -> dict[str, Any]:
        """The usage as transcripts record it (the cost only when it is known)."""
        data: dict[str, Any] = {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
        }
        if self.cost_usd is not None:
            data["cost_usd"] = self.cost_usd
        if self.cached_tokens:
            data["cached_tokens"] = self.cached_tokens
        return data

    def __add__(self, other: Usage) -> Usage:
        if self.cost_usd is None and other.cost_usd is None:
            cost = None
        else:
            cost = (self.cost_usd or 0.0) + (other.cost_usd or 0.0)
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.total_tokens + other.total_tokens,
            cost,
            self.cached_tokens + other.cached_tokens,
        )


@dataclass(frozen=True, slots=True)
class Reply:
    """One assembled answer of the model."""

    content: str | None
    tool_calls: tuple[ToolCall, ...] = ()
    reasoning: str | None = None
    usage: Usage = Usage()
    finish_reason: str | None = None
    model: str = ""
    response_id: str | None = None  # the provider's id of the answer (``chatcmpl-...``), when it sent one

    def message(self) -> dict[str, Any]:
        """The assistant message in OpenAI format, ready to append to the history (never the reasoning)."""
        if not self.tool_calls:
            return {"role": "assistant", "content": self.content or ""}
        return {
            "role": "assistant",
            "content": self.content or None,
            "tool_calls": [call.message() for call in self.tool_calls],
        }


@dataclass(frozen=True, slots=True)
class EncodedRun:
    """Some of a request's messages encoded already: ``messages[start:start + len(originals)]``
    as compact JSON (``ensure_ascii=False``), without the brackets, valid while those messages
    still equal ``originals`` (a restored history sent again and again is encoded once)."""

    start: int
    originals: tuple[dict[str, Any], ...]
    text: str

    def holds(self, messages: list[dict[str, Any]]) -> bool:
        """Whether ``messages`` still hold the run's messages where it says (equal, not encoded)."""
        end = self.start + len(self.originals)
        return len(messages) >= end and messages[self.start : end] == list(self.originals)


@dataclass(frozen=True, slots=True)
class Request:
    """What to send: OpenAI-format messages and tool specs, extra parameters, and whether to stream.

    ``model`` names the model for records (transcripts, cassettes); the ``Model`` object that
    receives the request decides which model answers.
    """

    model: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    params: dict[str, Any] = field(default_factory=dict)
    stream: bool = True
    #: Messages of it encoded already (a restored history's): a model that sends JSON may splice
    #: them in instead of encoding them again, checked first (``EncodedRun.holds``).
    encoded: EncodedRun | None = None


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of the reply's text."""

    text: str


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    """A piece of the model's reasoning (``reasoning_content``), never sent back to it."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolCallReady:
    """A tool call whose arguments are complete, reported before the stream ends when possible."""

    index: int
    call: ToolCall


@dataclass(frozen=True, slots=True)
class Completed:
    """The last event of every stream: the assembled reply."""

    reply: Reply


StreamEvent = TextDelta | ReasoningDelta | ToolCallReady | Completed


def events_of(reply: Reply) -> list[StreamEvent]:
    """The stream events that deliver an already complete ``reply`` (for answers that were not streamed)."""
    events: list[StreamEvent] = []
    if reply.reasoning:
        events.append(ReasoningDelta(reply.reasoning))
    if reply.content:
        events.append(TextDelta(reply.content))
    events.extend(ToolCallReady(index, call) for index, call in enumerate(reply.tool_calls))
    events.append(Completed(reply))
    return events


@runtime_checkable
class Model(Protocol):
    """A chat model: streams or completes a ``Request``; ``stream`` always ends with ``Completed``."""

    @property
    def name(self) -> str:
        """The model id, e.g. ``openai/gpt-4o-mini``."""
        ...

    @property
    def supports_tools(self) -> bool | None:
        """Whether the model takes native tool calls; None when unknown."""
        ...

    def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        """Answer as a stream of events; the last one is ``Completed``."""
        ...

    async def complete(self, request: Request) -> Reply:
        """Answer in one piece."""
        ...

    async def aclose(self) -> None:
        """Release connections; the model may not be used afterwards."""
        ...


class StreamingUnsupported(ModelError):
    """The model or its endpoint refused a streamed request; ``complete`` may still work."""


_STREAM_REFUSAL = re.compile(
    r"stream\w*[^.\n]{0,60}?(not (be )?(supported|support|available|allowed)|unsupported)"
    r"|(does not|doesn't|do not|cannot|can't|unable to) (support )?stream",
    re.IGNORECASE,
)


def says_streaming_unsupported(message: str) -> bool:
    """True when an error message says the model cannot stream (e.g. "stream is not supported")."""
    return bool(_STREAM_REFUSAL.search(message))
