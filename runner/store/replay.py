"""Models that record to and replay from cassettes (``--record`` / ``--replay``).

``RecordingModel`` wraps a live model and writes every request with its response.
``ReplayModel`` answers requests from a cassette, in order, without any network: strict mode
compares each request's hash with the recorded one and fails with a readable diff; loose mode
only warns (through ``on_warning``) and answers anyway.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from runner.models.base import (
    Completed,
    Model,
    ReasoningDelta,
    Reply,
    Request,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallReady,
    Usage,
    events_of,
)
from runner.store.cassette import (
    Cassette,
    CassetteError,
    CassetteWriter,
    canonical,
    normalize_request,
    readable_diff,
    request_hash,
)
from runner.store.transcript import Redactor

__all__ = ["RecordingModel", "ReplayModel", "reply_from_dict", "reply_to_dict"]


def reply_to_dict(reply: Reply) -> dict[str, Any]:
    """A reply as stored in a cassette (with the provider's ``response_id`` and the cached prompt
    tokens, so that a replayed transcript records what the recorded one did)."""
    return {
        "content": reply.content,
        "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in reply.tool_calls],
        "reasoning": reply.reasoning,
        "usage": {
            "prompt_tokens": reply.usage.prompt_tokens,
            "completion_tokens": reply.usage.completion_tokens,
            "total_tokens": reply.usage.total_tokens,
            "cost_usd": reply.usage.cost_usd,
            "cached_tokens": reply.usage.cached_tokens,
        },
        "finish_reason": reply.finish_reason,
        "model": reply.model,
        "response_id": reply.response_id,
    }


def reply_from_dict(data: dict[str, Any]) -> Reply:
    """A stored reply back as a ``Reply``; a cassette recorded before ``response_id`` and
    ``cached_tokens`` were kept replays without them (None, 0)."""
    usage = data.get("usage") or {}
    return Reply(
        content=data.get("content"),
        tool_calls=tuple(
            ToolCall(c["id"], c["name"], c.get("arguments") or "{}") for c in data.get("tool_calls", [])
        ),
        reasoning=data.get("reasoning"),
        usage=Usage(
            int(usage.get("prompt_tokens", 0)),
            int(usage.get("completion_tokens", 0)),
            int(usage.get("total_tokens", 0)),
            usage.get("cost_usd"),
            _cached_tokens(usage.get("cached_tokens", 0)),
        ),
        finish_reason=data.get("finish_reason"),
        model=str(data.get("model", "")),
        response_id=_response_id(data.get("response_id")),
    )


def _cached_tokens(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"usage.cached_tokens must be a whole number of at least 0, not {value!r}")
    return value


def _response_id(value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise ValueError(f"response_id must be a string or null, not {value!r}")
    return value or None


def _event_record(event: StreamEvent, t: float) -> dict[str, Any] | None:
    if isinstance(event, TextDelta):
        return {"t": round(t, 4), "kind": "text", "text": event.text}
    if isinstance(event, ReasoningDelta):
        return {"t": round(t, 4), "kind": "reasoning", "text": event.text}
    if isinstance(event, ToolCallReady):
        return {"t": round(t, 4), "kind": "tool_call", "index": event.index, "id": event.call.id}
    return None


class RecordingModel:
    """Passes requests to ``inner`` and records each one with its response."""

    def __init__(self, inner: Model, writer: CassetteWriter) -> None:
        self.inner = inner
        self.writer = writer

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def supports_tools(self) -> bool | None:
        return self.inner.supports_tools

    @property
    def structured_output(self) -> str | None:
        return getattr(self.inner, "structured_output", None)

    def _normalized(self, request: Request) -> dict[str, Any]:
        return normalize_request(request.model, request.messages, request.tools, request.params)

    async def complete(self, request: Request) -> Reply:
        reply = await self.inner.complete(request)
        self.writer.add(self._normalized(request), reply_to_dict(reply), stream=False, events=[])
        return reply

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        start = time.perf_counter()
        events: list[dict[str, Any]] = []
        async for event in self.inner.stream(request):
            if isinstance(event, Completed):
                self.writer.add(
                    self._normalized(request), reply_to_dict(event.reply), stream=True, events=events
                )
            else:
                record = _event_record(event, time.perf_counter() - start)
                if record is not None:
                    events.append(record)
            yield event

    async def aclose(self) -> None:
        await self.inner.aclose()
        self.writer.close()


class ReplayModel:
    """Answers from a cassette, in order; never touches the network."""

    def __init__(
        self,
        cassette: Cassette,
        *,
        name: str,
        redact: Redactor,
        strict: bool = True,
        on_warning: Callable[[str], None] | None = None,
    ) -> None:
        self.cassette = cassette
        self._name = name
        self.redact = redact
        self.strict = strict
        self.on_warning = on_warning or (lambda message: None)
        self.position = 0

    @property
    def name(self) -> str:
        return self._name

    @property
    def supports_tools(self) -> bool | None:
        return True

    @property
    def structured_output(self) -> str | None:
        """The strategy the cassette was recorded with, so that the same requests are made again:
        ``response_format`` if a request carried one, ``tool`` if one offered a final-answer tool."""
        for interaction in self.cassette.interactions:
            request = interaction.request
            if "response_format" in (request.get("params") or {}):
                return "response_format"
            names = [str((t.get("function") or {}).get("name", "")) for t in request.get("tools") or ()]
            if any(name.startswith("final_answer") for name in names):
                return "tool"
        return None

    def _next(self, request: Request) -> tuple[Reply, list[dict[str, Any]]]:
        normalized = json.loads(
            self.redact(
                canonical(normalize_request(request.model, request.messages, request.tools, request.params))
            )
        )
        index = self.position
        if index >= len(self.cassette.interactions):
            last: dict[str, Any] = next(
                (m for m in reversed(request.messages) if m.get("role") in ("user", "tool")), {}
            )
            raise CassetteError(
                f"{self.cassette.path}: no recorded response for model request #{index + 1} "
                f"(the cassette has {len(self.cassette.interactions)}); the request ends with a "
                f"{last.get('role', '?')} message: {str(last.get('content', ''))[:120]!r}",
                hint="the agent now makes more model calls than when it was recorded: record again",
            )
        recorded = self.cassette.interactions[index]
        self.position += 1
        if request_hash(normalized) != recorded.hash:
            message = (
                f"{self.cassette.path}: model request #{index + 1} differs from the recording:\n"
                + readable_diff(recorded.request, normalized)
            )
            if self.strict:
                raise CassetteError(message, hint="record again, or use --replay-loose to only warn")
            self.on_warning(message)
        try:
            reply = reply_from_dict(recorded.response)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CassetteError(
                f"{self.cassette.path}: the recorded response #{index + 1} is malformed ({exc})",
                hint="record it again with --record (or runner test --update)",
            ) from None
        return reply, recorded.events

    async def complete(self, request: Request) -> Reply:
        reply, _ = self._next(request)
        return reply

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        reply, events = self._next(request)
        if not events:
            for event in events_of(reply):
                yield event
            return
        calls = {c.id: c for c in reply.tool_calls}
        for record in events:
            kind = record.get("kind")
            if kind == "text":
                yield TextDelta(str(record["text"]))
            elif kind == "reasoning":
                yield ReasoningDelta(str(record["text"]))
            elif kind == "tool_call" and record.get("id") in calls:
                yield ToolCallReady(int(record["index"]), calls[record["id"]])
        yield Completed(reply)

    def remaining(self) -> int:
        """Recorded responses not used yet."""
        return len(self.cassette.interactions) - self.position

    async def aclose(self) -> None:
        return None
