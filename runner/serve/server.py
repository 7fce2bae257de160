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

The body of a request is bounded by the app (``http.py``: size and read time). This module, ``app.py``,
``http.py``, ``doors.py`` and the door modules are the only ones that import uvicorn or starlette.
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


class _Guards:
    """The header deadline and the connection cap, for either of uvicorn's HTTP protocols."""

    header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    _header_deadline: asyncio.TimerHandle | None = None
    connections: Any
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    app: Any

    def _awaiting_headers(self) -> bool:
        raise NotImplementedError

    def _cap(self) -> None:
        if len(self.connections) > self.max_connections:
            self.app = _busy

    def _arm(self) -> None:
        self._disarm()
        self._header_deadline = self.loop.call_later(self.header_timeout_s, self._too_slow)

    def _disarm(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _too_slow(self) -> None:
        self._header_deadline = None
        if self._awaiting_headers() and not self.transport.is_closing():
            self.transport.close()  # its request headers did not arrive in time


class GuardedH11Protocol(_Guards, H11Protocol):
    """uvicorn's h11 protocol with a header deadline and a connection cap (see the module doc)."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._cap()
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if not self._awaiting_headers():  # the headers are in: the app bounds the body
            self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self._awaiting_headers():
            self._arm()  # the next request on this connection gets its own

    def _awaiting_headers(self) -> bool:
        return self.conn.their_state is h11.IDLE


def _httptools_protocol() -> type[Any] | None:
    """The same guards on uvicorn's httptools protocol (its C parser is faster than h11), if installed."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:
        return None

    class GuardedHttpToolsProtocol(_Guards, HttpToolsProtocol):
        _waiting = True

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._cap()
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def on_headers_complete(self) -> None:
            self._waiting = False
            self._disarm()  # the headers are in: the app bounds the body
            super().on_headers_complete()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._waiting = True
                self._arm()  # the next request on this connection gets its own

        def _awaiting_headers(self) -> bool:
            return self._waiting

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
