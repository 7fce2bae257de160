"""The HTTP pieces every door of ``runner serve`` shares (starlette; imported by ``app.py`` and the doors).

``JSON`` (a response that is valid UTF-8 whatever its strings hold), ``is_json`` (a ``Content-Type``
check), ``read_body`` (the body within the size limit, 413, and the time limit, 408) and
``disconnected`` (returns when the client hangs up), ``unless_disconnected`` (a whole answer that
the client's going away cancels, with its run) and ``replaying`` (a request's ``receive`` that gives
again the messages a door read already, for the SDK behind it) and ``Events`` (sse-starlette's
streamed response, one cancel scope fewer per event).
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import Coroutine, Iterable
from typing import Any, Protocol, TypeVar

import anyio
from sse_starlette import EventSourceResponse
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import Message, Receive, Send

from runner.serve.protocol import ApiError
from runner.text import utf8

__all__ = [
    "JSON",
    "Events",
    "disconnected",
    "is_json",
    "read_body",
    "replaying",
    "require_json",
    "unless_disconnected",
]

T = TypeVar("T")


class Cancellable(Protocol):
    """What ``unless_disconnected`` stops (a ``RequestRun``)."""

    def cancel(self) -> None: ...

    async def wait_closed(self, timeout_s: float = ...) -> bool: ...


#: A body over the limit is still read (and dropped) up to this size, so the client gets its 413.
_DRAIN_BYTES = 64 * 1024 * 1024


class Events(EventSourceResponse):
    """sse-starlette's response without a cancel scope around each send when sends have no timeout
    (``move_on_after(None)``: ~7 µs an event, on the event loop that relays every stream)."""

    async def _send_with_timeout(self, send: Send, message: Message) -> None:
        if self.send_timeout is not None:
            await super()._send_with_timeout(send, message)
            return
        try:
            await send(message)
        except BaseException:
            self._send_interrupted = True
            raise


class JSON(JSONResponse):
    """A JSON response that is valid UTF-8 whatever its strings hold (lone surrogates become U+FFFD)."""

    def render(self, content: Any) -> bytes:
        return utf8(json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":")))


def require_json(request: Request) -> None:
    """Refuse a body that is not ``application/json`` (415: a web page cannot send one without a
    CORS preflight)."""
    content_type = request.headers.get("content-type", "")
    if not is_json(content_type):
        raise ApiError(
            415,
            f"the request body must be application/json, not '{content_type[:100] or 'none'}'",
            code="unsupported_media_type",
        )


def is_json(content_type: str) -> bool:
    """Whether a ``Content-Type`` value is JSON (``application/json``, parameters allowed)."""
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json"


async def read_body(request: Request, limit: int, timeout_s: float) -> bytes:
    """The body, within ``limit`` bytes (413) and ``timeout_s`` seconds (408)."""
    try:
        async with asyncio.timeout(timeout_s):
            return await _read_limited(request, limit)
    except TimeoutError:
        raise ApiError(
            408,
            f"the request body did not arrive within {timeout_s:g} s (RUNNER_SERVE_BODY_TIMEOUT_S)",
            code="request_timeout",
        ) from None


async def _read_limited(request: Request, limit: int) -> bytes:
    too_big = ApiError(413, f"the request body is larger than {limit} bytes", code="request_too_large")
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > _DRAIN_BYTES:
        raise too_big
    parts: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size <= limit:
            parts.append(chunk)
        elif size > _DRAIN_BYTES:
            break
    if size > limit:
        raise too_big
    return b"".join(parts)


async def disconnected(receive: Receive) -> None:
    """Return when the client hangs up (the body has been read: nothing else can arrive)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


async def unless_disconnected(
    receive: Receive, run: Cancellable, collect: Coroutine[Any, Any, T]
) -> T | None:
    """``collect``'s result, or None when the client hung up first (then ``run`` is cancelled and
    waited for: its tools are released before the request ends)."""
    task = asyncio.ensure_future(collect)
    gone = asyncio.ensure_future(disconnected(receive))
    try:
        done, _ = await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        if not task.done():
            task.cancel()
            run.cancel()
            with anyio.CancelScope(shield=True):
                await run.wait_closed()
    if task not in done:
        return None
    return task.result()


def replaying(messages: Iterable[Message], receive: Receive) -> Receive:
    """``receive`` that gives ``messages`` (read from it already) first, then what it gives."""
    pending = deque(messages)

    async def replayed() -> Message:
        return pending.popleft() if pending else await receive()

    return replayed
