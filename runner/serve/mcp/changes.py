"""``notifications/tools/list_changed`` under ``--watch``: connected clients hear when the tools change.

A reload (``CatalogHolder.on_reload``) wakes ``ToolListChanges.run``, which compares the tools as
``tools/list`` would list them now (names, descriptions, schemas, annotations) with the list it
last announced; when they differ (an agent or workflow added, removed, or its description, schema
or tools edited), it tells:

- the 2025 generation (the ``initialize`` handshake): every connection that asked this server
  anything (``tools/list``, ``tools/call``) gets ``notifications/tools/list_changed`` on its
  standalone channel (over HTTP the GET stream the client keeps open; over stdio the pipe);
- the 2026-07-28 generation: every ``subscriptions/listen`` stream that asked for
  ``toolsListChanged`` (the SDK's ``ListenHandler`` over an in-process bus).

Only a watching server declares the capability (``tools.listChanged``; in 2026, by serving
``subscriptions/listen``): without ``--watch`` the list never changes.
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import suppress
from typing import Any

import anyio
from mcp.server.context import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from runner.serve.mcp.calls import McpCalls

__all__ = ["MAX_CONNECTIONS", "SEND_TIMEOUT_S", "ToolListChanges"]

logger = logging.getLogger(__name__)

#: The most 2025-generation connections remembered for the notification (the oldest go first).
MAX_CONNECTIONS = 1000
#: How long one connection's notification may take before it is given up (a client not reading).
SEND_TIMEOUT_S = 5.0

#: The key of the one connection of stdio (an HTTP connection's key is its ``Mcp-Session-Id``).
_STDIO = ""


def _connection_key(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """The connection a request came on: its MCP session id over HTTP, the one pipe over stdio."""
    headers = getattr(ctx.request, "headers", None)
    if headers is None:
        return _STDIO
    session_id = headers.get("mcp-session-id")
    return session_id if isinstance(session_id, str) and session_id else None


class ToolListChanges:
    """The served tools as last announced, the connections to tell, and the 2026 listen streams."""

    def __init__(self, calls: McpCalls) -> None:
        self.calls = calls
        self.bus = InMemorySubscriptionBus()
        self.listen = ListenHandler(self.bus)
        self._connections: dict[str, ServerSession] = {}
        self._wake = asyncio.Event()

    def seen(self, ctx: ServerRequestContext[Any, Any]) -> None:
        """Remember the connection of a 2025-generation request (the 2026 one listens instead)."""
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return
        key = _connection_key(ctx)
        if key is None:
            return
        self._connections.pop(key, None)
        self._connections[key] = ctx.session  # its standalone channel outlives the request
        while len(self._connections) > MAX_CONNECTIONS:
            del self._connections[next(iter(self._connections))]

    def _listing(self) -> list[tuple[Any, ...]]:
        return [
            (s.name, s.description, s.input_schema, s.output_schema, s.annotations())
            for s in self.calls.tools()
        ]

    async def run(self) -> None:
        """Announce each change of the tools after a reload, until cancelled."""
        unsubscribe = self.calls.state.catalog.on_reload(self._wake.set)
        listed = self._listing()
        try:
            while True:
                await self._wake.wait()
                self._wake.clear()
                now = self._listing()
                if now != listed:
                    listed = now
                    await self.announce()
        finally:
            unsubscribe()
            self.listen.close()

    async def announce(self) -> None:
        """Tell every listen stream and every remembered connection; forget those that are gone."""
        await self.bus.publish(ToolsListChanged())
        for key, session in list(self._connections.items()):
            sent = False
            with anyio.move_on_after(SEND_TIMEOUT_S), suppress(Exception):
                await session.send_tool_list_changed()
                sent = True
            if not sent:  # closed, or not reading: it lists again when it comes back
                logger.debug("tools/list_changed not delivered to connection %r", key)
                self._connections.pop(key, None)
