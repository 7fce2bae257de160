"""Which browsers and hosts may talk to ``runner serve`` (SPEC section 15): an ASGI middleware.

A web page the user opens can send requests to a server on loopback, and with DNS rebinding
(a name of the attacker's that resolves to 127.0.0.1) read the answers. So:

- ``Host``: when host checking is on (no API keys, or ``allowed_hosts`` set), a request is
  answered only if its ``Host`` is a loopback address, ``localhost`` (or a ``*.localhost`` name)
  or one of ``allowed_hosts``; otherwise 403. With keys and no ``allowed_hosts`` (``--host 0.0.0.0``
  behind a name of yours), any Host is answered: the key is the guard.
- ``Origin``: a request that carries one (browsers send it on every cross-origin request and on
  POSTs) is refused with 403 unless ``allowed_origins`` names it. Allowed origins get CORS
  headers (starlette's ``CORSMiddleware``, wrapped inside this one in ``app.py``), preflights
  included (and Chrome's Private Network Access grant, for an allowed page on a public origin).

Refusals are OpenAI-shaped JSON errors. This module imports no web framework.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterable
from typing import Any

from runner.serve.protocol import ApiError

__all__ = ["HostGuard", "is_loopback", "is_loopback_host", "normalize_origin"]

ASGIApp = Any


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (or ``localhost``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]").split("%")[0]).is_loopback
    except ValueError:
        return False


def _hostname(host: str) -> str:
    """The name or address of a ``Host`` header value, without its port, lowercase."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[: host.find("]") + 1] if "]" in host else host
    name, _, port = host.rpartition(":")
    return name if name and (port.isdigit() or not port) else host


def is_loopback_host(host: str) -> bool:
    """Whether a ``Host`` header value names this machine's loopback (``localhost``, 127.x, [::1])."""
    name = _hostname(host).rstrip(".")
    return name == "localhost" or name.endswith(".localhost") or is_loopback(name)


def normalize_origin(origin: str) -> str:
    """An origin as browsers send it: ``scheme://host[:port]``, lowercase, no trailing slash."""
    return origin.strip().rstrip("/").lower()


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return bytes(value).decode("latin-1")
    return None


class HostGuard:
    """ASGI middleware refusing requests from unexpected hosts and origins (403, OpenAI's shape)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        check_host: bool,
        allowed_hosts: Iterable[str] = (),
        allowed_origins: Iterable[str] = (),
    ) -> None:
        self.app = app
        self.check_host = check_host
        self.allowed_hosts = frozenset(_hostname(h).rstrip(".") for h in allowed_hosts if h.strip())
        self.allowed_origins = frozenset(normalize_origin(o) for o in allowed_origins if o.strip())

    def refusal(self, scope: dict[str, Any]) -> ApiError | None:
        """Why this request is refused, or None."""
        if self.check_host:
            host = _header(scope, b"host") or ""
            name = _hostname(host).rstrip(".")
            if not (is_loopback_host(host) or name in self.allowed_hosts):
                return ApiError(
                    403,
                    f"this server answers only requests for localhost, not for Host '{host}' "
                    "(allow a name with RUNNER_SERVE_ALLOWED_HOSTS)",
                    code="host_not_allowed",
                )
        origin = _header(scope, b"origin")
        if origin is not None and normalize_origin(origin) not in self.allowed_origins:
            return ApiError(
                403,
                f"cross-origin requests from '{origin}' are refused "
                "(allow an origin with RUNNER_SERVE_ALLOWED_ORIGINS or --allow-origin)",
                code="origin_not_allowed",
            )
        return None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        error = self.refusal(scope)
        if error is None:
            await self.app(scope, receive, send)
            return
        body = json.dumps(error.body()).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": error.status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
