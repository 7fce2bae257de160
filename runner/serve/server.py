"""uvicorn for ``runner serve``: a header read timeout and a connection cap on uvicorn's protocol
(httptools when installed, h11 otherwise).

uvicorn closes an idle keep-alive connection (``timeout_keep_alive``), but a connection that sends
half a request's headers (or one byte of them now and then) is kept forever, and its own
``limit_concurrency`` answers in plain text. ``GuardedH11Protocol`` (and its httptools twin) adds:

- a header deadline: a request's headers must be complete within ``header_timeout_s`` of the
  connection opening, or of the previous response on a kept-alive connection; otherwise the
  connection is closed;
- a connection cap: a connection opened while ``max_connections`` others are open gets its first
  request answered 503 (OpenAI's error shape, ``Connection: close``) and is closed.

The body of a request is bounded by the app (``app.py``: size and read time). This module and
``app.py`` are the only ones that import uvicorn or starlette.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from runner.serve.protocol import ApiError

__all__ = [
    "DEFAULT_HEADER_TIMEOUT_S",
    "DEFAULT_MAX_CONNECTIONS",
    "GuardedH11Protocol",
    "guarded_protocol",
    "server_config",
]

DEFAULT_HEADER_TIMEOUT_S = 10.0
DEFAULT_MAX_CONNECTIONS = 100


async def _busy(scope: Any, receive: Any, send: Any) -> None:
    """The answer of a connection over the cap."""
    error = ApiError(
        503,
        "the server has too many open connections; retry later (RUNNER_SERVE_MAX_CONNECTIONS)",
        type="server_error",
        code="too_many_connections",
    )
    body = json.dumps(error.body()).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
        (b"retry-after", b"1"),
    ]
    await send({"type": "http.response.start", "status": 503, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a header deadline and a connection cap (see the module doc)."""

    header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S
    max_connections: int = DEFAULT_MAX_CONNECTIONS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:
            self.app = _busy
        self._arm_header_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_header_deadline()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:  # the headers are in: the app bounds the body
            self._disarm_header_deadline()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self._arm_header_deadline()  # the next request on this connection gets its own

    def _arm_header_deadline(self) -> None:
        self._disarm_header_deadline()
        self._header_deadline = self.loop.call_later(self.header_timeout_s, self._headers_too_slow)

    def _disarm_header_deadline(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _headers_too_slow(self) -> None:
        self._header_deadline = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            if self.logger.isEnabledFor(10):
                self.logger.debug("closing a connection whose request headers did not arrive in time")
            self.transport.close()


def _httptools_protocol() -> type[Any] | None:
    """The same guards on uvicorn's httptools protocol (its C parser is faster than h11), if installed."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:
        return None

    class GuardedHttpToolsProtocol(HttpToolsProtocol):
        header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S
        max_connections: int = DEFAULT_MAX_CONNECTIONS

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._header_deadline: asyncio.TimerHandle | None = None
            self._awaiting_headers = True

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > self.max_connections:
                self.app = _busy
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def on_headers_complete(self) -> None:
            self._awaiting_headers = False
            self._disarm()  # the headers are in: the app bounds the body
            super().on_headers_complete()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()  # the next request on this connection gets its own

        def _arm(self) -> None:
            self._disarm()
            self._awaiting_headers = True
            self._header_deadline = self.loop.call_later(self.header_timeout_s, self._too_slow)

        def _disarm(self) -> None:
            if self._header_deadline is not None:
                self._header_deadline.cancel()
                self._header_deadline = None

        def _too_slow(self) -> None:
            self._header_deadline = None
            if self._awaiting_headers and not self.transport.is_closing():
                self.transport.close()

    return GuardedHttpToolsProtocol


def guarded_protocol(*, header_timeout_s: float, max_connections: int) -> type[Any]:
    """The guarded protocol class with these limits (uvicorn builds one instance per connection):
    on httptools when it is installed, else on h11."""
    attributes = {"header_timeout_s": header_timeout_s, "max_connections": max_connections}
    base = _httptools_protocol() or GuardedH11Protocol
    return type(base.__name__, (base,), attributes)


def server_config(
    app: Any,
    *,
    header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S,
    max_connections: int = DEFAULT_MAX_CONNECTIONS,
    **options: Any,
) -> uvicorn.Config:
    """uvicorn's configuration for ``app`` with the guarded protocol (``options`` go to uvicorn)."""
    protocol = guarded_protocol(header_timeout_s=header_timeout_s, max_connections=max_connections)
    return uvicorn.Config(app, http=protocol, **options)
