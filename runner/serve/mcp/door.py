"""``/mcp`` on ``runner serve``: the agents as MCP tools over streamable HTTP (the SDK's session manager).

Behind the app's ``HostGuard`` and CORS like every route, and authorized first with
``ServeState.authorize`` (401 without a configured key; without keys only loopback clients). The
key a request used is left in its ASGI scope for ``tools/call`` (``server.KEY_SCOPE``): the
conversations it starts are that key's. With keys, each MCP session is also bound to the key that
opened it (the SDK answers another key's ``Mcp-Session-Id`` as unknown). A client that hangs up
stops the calls its request carried (``server.Hangup``), in both protocol generations. The SDK's
own DNS-rebinding check is off: ``HostGuard`` already made it, with the server's own host and
origin lists. The session manager runs in the door's lifespan (with ``--watch``, so does the task
that announces ``tools/list_changed``: ``changes.py``); request bodies are bounded by the server's
limit.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import Request
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from runner.serve.conversations import Conversations, idle_seconds, owner_tag
from runner.serve.door_spec import Door
from runner.serve.http import JSON
from runner.serve.mcp.answers import SessionManager, json_answer, read_messages, wants_json, watched
from runner.serve.mcp.calls import McpCalls
from runner.serve.mcp.changes import ToolListChanges
from runner.serve.mcp.server import HANGUP_SCOPE, KEY_SCOPE, Hangup, build_server
from runner.serve.protocol import ApiError
from runner.serve.state import ServeState

__all__ = ["MAX_SESSIONS", "door"]

#: Open MCP sessions (2025-era clients) one server keeps at most; more are refused with 503.
MAX_SESSIONS = 1000
#: An MCP session with no request for this long is closed (its client opens a new one).
SESSION_IDLE_S = 30 * 60.0


class _Endpoint:
    """``/mcp`` as an ASGI app: authorize, leave the key in the scope, hand over to the SDK."""

    def __init__(self, state: ServeState, manager: SessionManager) -> None:
        self.state = state
        self.manager = manager

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        try:
            key = self.state.authorize(request)
        except ApiError as exc:
            headers = {**exc.headers(), "www-authenticate": "Bearer"}
            await JSON(exc.body(), status_code=exc.status, headers=headers)(scope, receive, send)
            return
        scope[KEY_SCOPE] = key
        if key is not None:
            tag = owner_tag(key)
            scope["user"] = AuthenticatedUser(AccessToken(token=tag, client_id=tag, scopes=[]))
        hangup = scope[HANGUP_SCOPE] = Hangup()
        if scope["method"] != "POST" or _declared_too_long(request, self.manager.max_request_body_size):
            await self.manager.handle_request(scope, watched([], receive, hangup), send)
            return
        cached, body = await read_messages(receive, self.manager.max_request_body_size)
        if body is None or not wants_json(request, body):
            await self.manager.handle_request(scope, watched(cached, receive, hangup), send)
            return
        async with json_answer(cached, receive, hangup) as replay:
            await self.manager.handle_request(scope, replay, send)


def _declared_too_long(request: Request, limit: int) -> bool:
    """Whether the request's ``Content-Length`` is over ``limit`` (the SDK answers 413 at once)."""
    declared = request.headers.get("content-length", "")
    return declared.isdigit() and int(declared) > limit


def door(state: ServeState) -> Door:
    """The MCP door of ``state``'s server: ``/mcp`` and the session manager's lifespan."""
    calls = McpCalls(state, Conversations(state.catalog.settings.home, idle_s=idle_seconds()))
    changes = ToolListChanges(calls) if state.watch else None
    manager = SessionManager(
        app=build_server(calls, changes=changes),
        security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        max_request_body_size=state.max_body_bytes,
        session_idle_timeout=SESSION_IDLE_S,
        max_sessions=MAX_SESSIONS,
    )

    @asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
        async with manager.run(), anyio.create_task_group() as tasks:
            if changes is not None:
                tasks.start_soon(changes.run)
            yield
            tasks.cancel_scope.cancel()

    endpoint = _Endpoint(state, manager)
    return Door(
        "mcp",
        routes=[Route("/mcp", endpoint=endpoint, methods=["GET", "POST", "DELETE"])],
        lifespan=lifespan,
        paths=("/mcp",),
    )
