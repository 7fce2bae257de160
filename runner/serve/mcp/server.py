"""The MCP server (the official ``mcp`` SDK's low-level ``Server``) over the tools of ``McpCalls``.

The SDK does the wire: both protocol generations (the ``initialize`` handshake of 2025-11-25 and
earlier, and the stateless 2026-07-28 revision with ``server/discover``), stdio and streamable
HTTP, progress notifications (``report_progress`` sends one only when the request carried a
progress token) and ``notifications/cancelled`` (it cancels the handler, which cancels the run).
This module maps ``tools/list`` to ``McpCalls.tools`` and ``tools/call`` to ``McpCalls.call``,
and, under ``--watch``, declares and sends ``tools/list_changed`` (``changes.py``). The SDK's
OpenTelemetry middleware stays only when a tracer provider of the process records its spans.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.models import InitializationOptions
from mcp.shared.exceptions import MCPError

import runner.telemetry as telemetry
from runner.serve.mcp.calls import CallAnswer, McpCalls, UnknownTool
from runner.serve.mcp.changes import ToolListChanges
from runner.serve.mcp.tools import ToolShape
from runner.version import __version__

__all__ = ["HANGUP_SCOPE", "KEY_SCOPE", "Hangup", "build_server"]

#: Where the HTTP door leaves the API key a request was authorized with (its ASGI scope).
KEY_SCOPE = "runner.mcp.key"
#: Where the HTTP door leaves the ``Hangup`` of a request (its ASGI scope).
HANGUP_SCOPE = "runner.mcp.hangup"


class Hangup:
    """Tells the calls a POST carries that its client hung up (the HTTP door fires it).

    The 2025 generation keeps a call running when its stream closes (the SDK waits for a
    ``notifications/cancelled`` that a vanished client never sends); the door stops it instead,
    since nobody can read its answer any more (there is no event store to resume a stream from).
    """

    def __init__(self) -> None:
        self.fired = False
        self._scopes: list[anyio.CancelScope] = []

    def fire(self) -> None:
        self.fired = True
        for scope in self._scopes:
            scope.cancel()

    def watch(self, scope: anyio.CancelScope) -> None:
        self._scopes.append(scope)
        if self.fired:
            scope.cancel()


def _hangup(ctx: ServerRequestContext[Any, Any]) -> Hangup | None:
    scope = getattr(ctx.request, "scope", None)
    hangup = scope.get(HANGUP_SCOPE) if isinstance(scope, dict) else None
    return hangup if isinstance(hangup, Hangup) else None


INSTRUCTIONS = (
    "Each tool is an agent (or a workflow of agents). Call it with a message; its answer carries a "
    "session_id: pass it back as session_id to continue that conversation."
)


def _tool(shape: ToolShape) -> types.Tool:
    return types.Tool(
        name=shape.name,
        title=shape.name,
        description=shape.description,
        input_schema=shape.input_schema,
        output_schema=shape.output_schema,
        annotations=types.ToolAnnotations(**shape.annotations()),
    )


def _result(answer: CallAnswer) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(text=answer.text)],
        structured_content=answer.structured,
        is_error=answer.is_error,
    )


def caller_key(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """The API key the HTTP request was authorized with (None over stdio, or without keys)."""
    request = ctx.request
    scope = getattr(request, "scope", None)
    if isinstance(scope, dict):
        key = scope.get(KEY_SCOPE)
        return key if isinstance(key, str) else None
    return None


class _Server(Server[Any]):
    """The SDK's server, declaring ``tools.listChanged`` in the handshake when it is true."""

    announces_changes = False

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        if notification_options is None and self.announces_changes:
            notification_options = NotificationOptions(tools_changed=True)
        return super().create_initialization_options(
            notification_options, experimental_capabilities, extensions
        )


def _no_header_params(name: str) -> None:
    """The input schema the 2026 entry checks a call's ``Mcp-Param-*`` headers against: none, since
    runner's tools declare no ``x-mcp-header`` params (their schemas are ``tools.input_schema``'s),
    so there is nothing to check. (Without this function the SDK would list every tool to find the
    schema; with the schema it would walk it for nothing, ~40 µs a call.)"""
    return None


def build_server(
    calls: McpCalls,
    *,
    changes: ToolListChanges | None = None,
    key_of: Callable[[ServerRequestContext[Any, Any]], str | None] = caller_key,
) -> Server[Any]:
    """The SDK server answering ``tools/list`` and ``tools/call`` from ``calls``; with ``changes``
    (``--watch``), it also announces when the tools change (``changes.py``)."""
    seen = changes.seen if changes is not None else (lambda ctx: None)

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        seen(ctx)
        return types.ListToolsResult(tools=[_tool(shape) for shape in calls.tools()])

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        seen(ctx)
        step = 0

        async def progress(message: str) -> None:
            nonlocal step
            step += 1
            await ctx.session.report_progress(step, None, message)

        answer: CallAnswer | None = None
        with anyio.CancelScope() as scope:
            hangup = _hangup(ctx)
            if hangup is not None:
                hangup.watch(scope)
            try:
                with telemetry.continue_trace(params.meta):  # a ``traceparent`` in ``_meta`` parents the run
                    answer = await calls.call(
                        params.name, params.arguments, key=key_of(ctx), progress=progress
                    )
            except UnknownTool as exc:
                raise MCPError(types.INVALID_PARAMS, str(exc)) from None
        if answer is None:  # the client hung up: nobody reads this
            return _result(CallAnswer("the client went away; the run was stopped", is_error=True))
        return _result(answer)

    server = _Server(
        "runner",
        version=__version__,
        title="runner agents",
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        get_tool_input_schema=_no_header_params,
        on_subscriptions_listen=changes.listen if changes is not None else None,
    )
    server.announces_changes = changes is not None
    if not sdk_traced():  # a span nobody records still costs ~40 µs a request
        server.middleware[:] = [m for m in server.middleware if type(m).__name__ != "OpenTelemetryMiddleware"]
    return server


def sdk_traced() -> bool:
    """Whether this process has an OpenTelemetry tracer provider of its own (``opentelemetry-instrument``,
    an embedding app) to record the SDK's spans of each request; runner's ``--otel`` keeps its own
    provider, so without one the SDK's middleware would only make spans nobody records."""
    from opentelemetry import trace

    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider | trace.NoOpTracerProvider)
