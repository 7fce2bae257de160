"""How ``/mcp`` answers a POST: one ``application/json`` body, or an SSE stream, chosen per request.

A request with nothing to stream — no progress token in its ``params._meta``, not ``initialize``,
not ``subscriptions/listen`` — from a client that accepts both media types (as before, the SDK
answers 406 to one that does not) is answered as the SDK's ``json_response`` mode answers it: one
JSON body, without the SSE framing, the stream's task group, its ping task and (2025 generation)
the memory stream the answer crosses to reach it. Everything else still gets the stream, so
progress notifications go out exactly as before. The SDK makes that choice per session manager
(2026-07-28) or per transport (2025); ``SessionManager`` and its transports read it instead from
``_JSON``, a context variable the door sets around one request (``json_answer``). ``initialize``
is never answered in JSON: the session's own tasks start inside that request and would inherit its
choice (they read it too: the 2025 message router drops what it routes to a JSON request).

A JSON answer is not sent until the run ends, and the SDK reads nothing from such a request after
its body; so the door reads the body first (bounded by the server's limit: ``read_messages``) and
watches the connection itself while the call runs (``json_answer``): a client that hangs up still
stops the run (``Hangup``), in both generations.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar

from mcp.server.auth.middleware.bearer_auth import AuthorizationContext
from mcp.server.streamable_http import StreamableHTTPServerTransport, check_accept_headers
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.requests import Request
from starlette.types import Message, Receive

from runner.serve.http import replaying
from runner.serve.mcp.server import Hangup

__all__ = ["SessionManager", "json_answer", "read_messages", "wants_json", "watched"]

#: Whether the request being handled is answered in one JSON body (set by ``json_answer``).
_JSON: ContextVar[bool] = ContextVar("runner_mcp_json_answer", default=False)
#: Methods whose answer is a stream, or that start a session's tasks (see the module's docstring).
_STREAMED = frozenset({"initialize", "subscriptions/listen"})


def _per_request_only(value: bool) -> None:
    """The SDK's constructors set their JSON switch to False; True would fix it for all requests."""
    if value:
        raise ValueError("JSON answers are chosen per request (runner.serve.mcp.answers)")


class _Transport(StreamableHTTPServerTransport):
    """A 2025-generation session's transport, answering in JSON when the request's ``_JSON`` says so."""

    @property
    def is_json_response_enabled(self) -> bool:
        return _JSON.get()

    @is_json_response_enabled.setter
    def is_json_response_enabled(self, value: bool) -> None:
        _per_request_only(value)


class SessionManager(StreamableHTTPSessionManager):
    """The SDK's session manager, answering in JSON when the request's ``_JSON`` says so (both
    generations: the 2026-07-28 entry takes ``json_response`` per call, the 2025 sessions are
    ``_Transport``)."""

    @property
    def json_response(self) -> bool:
        return _JSON.get()

    @json_response.setter
    def json_response(self, value: bool) -> None:
        _per_request_only(value)

    def _admit_session(self, requestor: AuthorizationContext | None) -> StreamableHTTPServerTransport | None:
        transport = super()._admit_session(requestor)
        if transport is not None:
            transport.__class__ = _Transport  # no state of its own: only where the choice is read
        return transport


async def read_messages(receive: Receive, limit: int) -> tuple[list[Message], bytes | None]:
    """The messages of a request's body as received (to hand on), and the body itself; None when it
    is longer than ``limit`` or ended by something else than its last part (the SDK answers those)."""
    messages: list[Message] = []
    size = 0
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            return messages, None
        size += len(message.get("body", b""))
        if size > limit:
            return messages, None
        if not message.get("more_body", False):
            return messages, b"".join(m.get("body", b"") for m in messages)


def wants_json(request: Request, body: bytes) -> bool:
    """Whether the POST of ``body`` is answered in one JSON body (see the module's docstring)."""
    has_json, has_sse = check_accept_headers(request)
    if not (has_json and has_sse):
        return False
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):
        return False
    if not isinstance(message, dict) or "id" not in message or message.get("method") in _STREAMED:
        return False
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    return not (isinstance(meta, dict) and meta.get("progressToken") is not None)


def watched(cached: list[Message], receive: Receive, hangup: Hangup) -> Receive:
    """``receive`` for the SDK when it streams: the body read already, then the connection's own
    messages, a hang-up among them telling ``hangup``."""
    source = replaying(cached, receive)

    async def next_message() -> Message:
        message = await source()
        if message["type"] == "http.disconnect":
            hangup.fire()
        return message

    return next_message


@asynccontextmanager
async def json_answer(cached: list[Message], receive: Receive, hangup: Hangup) -> AsyncIterator[Receive]:
    """Within: the request is answered in JSON, and a task watches its connection (``hangup`` told when
    the client goes); yields ``receive`` for the SDK (the body, then the hang-up once it happens)."""
    pending = deque(cached)
    gone = asyncio.Event()

    async def watch() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        hangup.fire()
        gone.set()

    async def next_message() -> Message:
        if pending:
            return pending.popleft()
        await gone.wait()
        return {"type": "http.disconnect"}

    token = _JSON.set(True)
    watcher = asyncio.ensure_future(watch())
    try:
        yield next_message
    finally:
        watcher.cancel()
        _JSON.reset(token)
