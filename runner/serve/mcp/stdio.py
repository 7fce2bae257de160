"""``runner mcp``: the served agents as MCP tools over stdio (what a desktop client's config starts).

stdout carries the protocol only: progress lines and warnings go to ``report`` (stderr). One
client, no keys: every conversation it starts it may continue. ``watch`` reloads edited agent
files between calls, as ``runner serve --watch`` does, and tells the client when the tools changed
(``notifications/tools/list_changed``).
"""

from __future__ import annotations

from collections.abc import Callable

import anyio

from runner.serve.conversations import Conversations, idle_seconds
from runner.serve.mcp.calls import McpCalls
from runner.serve.mcp.changes import ToolListChanges
from runner.serve.mcp.server import build_server
from runner.serve.reload import CatalogHolder
from runner.serve.state import ServeState

__all__ = ["serve_stdio"]


async def serve_stdio(holder: CatalogHolder, *, watch: bool = False, report: Callable[[str], None]) -> None:
    """Answer MCP on this process's stdin/stdout until the client closes stdin."""
    from mcp.server.stdio import stdio_server

    state = ServeState(holder, watch=watch, report=report)
    calls = McpCalls(state, Conversations(holder.settings.home, idle_s=idle_seconds()))
    changes = ToolListChanges(calls) if watch else None
    server = build_server(calls, changes=changes)
    serving = state.serving()
    async with serving, stdio_server() as (read_stream, write_stream), anyio.create_task_group() as tasks:
        if changes is not None:
            tasks.start_soon(changes.run)
        await server.run(read_stream, write_stream, server.create_initialization_options())
        tasks.cancel_scope.cancel()
