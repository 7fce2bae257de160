"""Tools from MCP servers, through the official ``mcp`` SDK.

``mcp: https://host/mcp`` is streamable HTTP (``headers`` sent), a URL ending in ``/sse`` is legacy
SSE, and ``mcp: {command, args, env, cwd}`` starts a stdio server: its directory defaults to the agent
file's, its environment is the SDK's safe default set plus ``env``, and a bare command missing from
PATH is also looked for beside this Python. One session per server per runner session
(``runner.tools.mcp_client``), opened here and closed when ``stack`` closes. A server that cannot be
started or reached is a ``ConfigError`` quoting the end of its stderr. Each call is bounded by the
source's ``timeout_s`` (else the context's default); start-up by the larger of that and the default.

Listed tools become ``Tool`` objects whose parameters are the ``inputSchema`` after ``clean_schema``.
An input schema without ``type`` (or none) is repaired to an object schema; one that cannot be an
arguments object (``type: string``) drops its tool, as do tools that run only as MCP tasks; each is
logged and listed in ``McpLoadedSource.skipped``. Results: text blocks joined; structured content as
compact JSON (a text block that only repeats it is dropped); images, audio and resources summarized
with type, MIME type, size and URI (an embedded text resource keeps its text); ``isError`` raises
``ToolError`` with the text. On ``notifications/tools/list_changed`` the tools are re-listed and
``McpLoadedSource.tools`` is rebuilt in place (``version`` bumped, ``on_progress`` told); the registry
takes the new list when the loop rebuilds it, so the request prefix never changes mid-session. Tools
handed out before keep working: they call by name through the session.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import sys
from collections.abc import Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TextIO

import httpx2
import mcp.types as types
from mcp import StdioServerParameters
from mcp.client.sse import sse_client
from mcp.client.stdio import get_default_environment, stdio_client
from mcp.client.streamable_http import streamable_http_client

from runner.agentfile.config import McpServerConfig, ToolSourceConfig
from runner.errors import ConfigError, ToolError
from runner.tls import tls_context
from runner.tools.base import RunContext, Tool, ToolCallable
from runner.tools.mcp_client import Connect, McpClient, McpStartError
from runner.tools.procs import reaped_server
from runner.tools.schema import clean_schema
from runner.tools.sources import LoadedSource, SourceContext

__all__ = [
    "McpLoadedSource",
    "SchemaProblem",
    "SchemaRepair",
    "connector",
    "load_source",
    "render_result",
    "tools_from_listing",
]

_STDERR_LINES = 10


@dataclass(frozen=True)
class SchemaProblem:
    """A listed tool whose ``inputSchema`` was not an object schema, and what was done about it."""

    tool: str
    problem: str
    action: Literal["repaired", "skipped"]


class SchemaRepair:
    """Filters raw ``tools/list`` results before the SDK validates them (it rejects a whole page
    when one ``inputSchema`` is not an object schema).

    A missing schema, or one without ``type``, has one obvious reading and is repaired to an object
    schema; a schema that cannot describe an arguments object (``type: string``, a list, ...) drops
    its tool. Each case is logged once and kept in ``problems``.
    """

    def __init__(self, label: str, logger: logging.Logger) -> None:
        self.label = label
        self.logger = logger
        self.problems: list[SchemaProblem] = []

    def __call__(self, result: dict[str, Any]) -> None:
        listed = result.get("tools")
        if not isinstance(listed, list):
            return
        kept: list[Any] = []
        for entry in listed:
            if not isinstance(entry, dict):
                continue
            name = str(entry.get("name", "?"))
            schema = entry.get("inputSchema")
            if isinstance(schema, dict) and schema.get("type") == "object":
                kept.append(entry)
            elif schema is None or (isinstance(schema, dict) and "type" not in schema):
                entry["inputSchema"] = {**(schema or {}), "type": "object"}
                self._record(
                    name, "no inputSchema" if schema is None else "inputSchema has no type", "repaired"
                )
                kept.append(entry)
            else:
                shown = schema.get("type") if isinstance(schema, dict) else type(schema).__name__
                self._record(name, f"inputSchema is not an object schema ({shown!r})", "skipped")
        result["tools"] = kept

    def _record(self, tool: str, problem: str, action: Literal["repaired", "skipped"]) -> None:
        found = SchemaProblem(tool, problem, action)
        if found not in self.problems:
            self.problems.append(found)
            self.logger.warning("MCP server %s: tool %r: %s; %s", self.label, tool, problem, action)


@dataclass
class McpLoadedSource(LoadedSource):
    """An MCP source: its tools (rebuilt in place when the server's list changes) and its client."""

    client: McpClient | None = None
    schema_problems: list[SchemaProblem] = field(default_factory=list)
    source_id: str = "mcp"
    timeout_s: float | None = None
    confirm: bool = False
    version: int = 0
    """Bumped each time ``tools`` was rebuilt after the server changed its list."""
    skipped: list[str] = field(default_factory=list)
    """Why listed tools were left out (schema not an object, task-only tools)."""

    def refresh(self) -> tuple[list[str], list[str]]:
        """Rebuild ``tools`` in place from the client's listing; the names added and removed."""
        if self.client is None:
            return [], []
        tools, skipped = tools_from_listing(
            self.client, source_id=self.source_id, timeout_s=self.timeout_s, confirm=self.confirm
        )
        skipped[:0] = [f"{p.tool}: {p.problem}" for p in self.schema_problems if p.action == "skipped"]
        before, after = {t.original_name for t in self.tools}, {t.original_name for t in tools}
        self.tools[:] = tools
        self.skipped[:] = skipped
        return sorted(after - before), sorted(before - after)


async def load_source(spec: ToolSourceConfig, ctx: SourceContext, stack: AsyncExitStack) -> McpLoadedSource:
    """Open the server's session (closed when ``stack`` closes) and list its tools."""
    server = spec.mcp
    if server is None:
        raise ConfigError(
            "an mcp source needs a URL or a command", file=str(ctx.agent.path), path=_path(spec)
        )
    timeout = spec.timeout_s if spec.timeout_s is not None else ctx.default_timeout_s
    # A short per-call timeout must not make a slow-starting server (npx, uvx) fail to start.
    startup_timeout = max(timeout, ctx.default_timeout_s)
    repair = SchemaRepair(spec.label, ctx.logger)
    client = McpClient(
        connector(server, headers=spec.headers, cwd=server.cwd or spec.base_dir),
        label=spec.label,
        timeout_s=timeout,
        startup_timeout_s=startup_timeout,
        listing_filter=repair,
        on_progress=ctx.on_progress,
        logger=ctx.logger,
    )
    try:
        await client.start()
    except McpStartError as exc:
        raise _start_error(spec, ctx, exc) from None
    stack.push_async_callback(client.close)
    loaded = McpLoadedSource(
        tools=[],
        instructions=client.instructions,
        client=client,
        schema_problems=repair.problems,
        source_id=spec.id or _slug(client.server_name),
        timeout_s=spec.timeout_s,
        confirm=bool(spec.confirm),
    )
    loaded.refresh()

    def tools_changed() -> None:
        added, removed = loaded.refresh()
        loaded.version += 1
        change = ", ".join([*(f"+{n}" for n in added), *(f"-{n}" for n in removed)])
        if ctx.on_progress is not None:
            ctx.on_progress(spec.label, f"tools changed ({change or 'schemas or descriptions'})")

    client.on_tools_changed = tools_changed
    return loaded


def connector(server: McpServerConfig, *, headers: Mapping[str, str], cwd: Path) -> Connect:
    """How the client reaches ``server``: stdio for a command, else streamable HTTP or legacy SSE."""

    async def connect(stack: AsyncExitStack, stderr: TextIO) -> tuple[Any, Any]:
        if server.command is not None:
            command = _resolve_command(server.command, server.env.get("PATH"))
            try:
                # Under the reaper: what the server leaves is killed, and it cannot read the runner.
                command, args = reaped_server(
                    command, server.args, get_default_environment() | dict(server.env)
                )
                # "replace": a line of invalid UTF-8 is one more unparsable line, not the end of the reader
                parameters = StdioServerParameters(
                    command=command,
                    args=args,
                    env=dict(server.env) or None,
                    cwd=cwd,
                    encoding_error_handler="replace",
                )
                return await stack.enter_async_context(stdio_client(parameters, errlog=stderr))
            except FileNotFoundError:
                raise McpStartError(f"command not found: {server.command}") from None
            except PermissionError:
                raise McpStartError(f"command is not executable: {server.command}") from None
        assert server.url is not None
        if server.transport == "sse":
            return await stack.enter_async_context(sse_client(server.url, headers=dict(headers) or None))
        # The SDK's documented way to send headers; its own defaults: 30 s, and 300 s to read a stream.
        client = httpx2.AsyncClient(
            headers=dict(headers), timeout=httpx2.Timeout(30.0, read=300.0), verify=tls_context()
        )
        http = await stack.enter_async_context(client)
        return await stack.enter_async_context(streamable_http_client(server.url, http_client=http))

    return connect


def tools_from_listing(
    client: McpClient, *, source_id: str, timeout_s: float | None = None, confirm: bool = False
) -> tuple[list[Tool], list[str]]:
    """The client's listed tools as ``Tool`` objects, and why any were left out."""
    skipped: list[str] = []
    tools: list[Tool] = []
    for listed in client.tools:
        execution = listed.execution
        if execution is not None and execution.task_support == "required":
            skipped.append(f"{listed.name}: runs only as an MCP task, which the runner does not drive")
            continue
        tools.append(
            Tool(
                name=listed.name,
                description=(listed.description or listed.title or "").strip(),
                parameters=clean_schema(listed.input_schema),
                source_kind="mcp",
                source_id=source_id,
                call=_tool_call(client, listed.name, timeout_s),
                confirm=confirm,
                timeout_s=timeout_s,
                original_name=listed.name,
            )
        )
    return tools, skipped


def render_result(result: types.CallToolResult) -> str:
    """The text a model reads for one MCP tool result; ``isError`` raises ``ToolError`` with it."""
    structured = result.structured_content
    structured_json = None if structured is None else json.dumps(structured, separators=(",", ":"))
    parts: list[str] = []
    structured_at: int | None = None
    for block in result.content:
        if isinstance(block, types.TextContent):
            if structured is not None and _repeats(block.text, structured):
                structured_at = len(parts) if structured_at is None else structured_at
                continue
            parts.append(block.text)
        else:
            parts.append(_summarize(block))
    if structured_json is not None:
        parts.insert(len(parts) if structured_at is None else structured_at, structured_json)
    text = "\n".join(parts)
    if result.is_error:
        raise ToolError(text or "the MCP tool reported an error without a message")
    return text


def _tool_call(client: McpClient, name: str, timeout_s: float | None) -> ToolCallable:
    """The tool's callable, bound to this name (a factory, so loop variables are not shared)."""

    async def call(arguments: dict[str, Any], ctx: RunContext) -> str:
        return render_result(await client.call_tool(name, arguments, timeout_s=timeout_s))

    return call


def _summarize(block: Any) -> str:
    if isinstance(block, types.ImageContent | types.AudioContent):
        return f"[{block.type}: {block.mime_type}, {_size(_base64_size(block.data))}]"
    if isinstance(block, types.ResourceLink):
        details = ", ".join(d for d in (block.mime_type, _size(block.size) if block.size else None) if d)
        label = f" {block.name}" if block.name else ""
        return f"[resource link{label}: {block.uri}" + (f" ({details})" if details else "") + "]"
    if isinstance(block, types.EmbeddedResource):
        resource = block.resource
        mime = resource.mime_type or "unknown type"
        if isinstance(resource, types.TextResourceContents):
            size = _size(len(resource.text.encode("utf-8")))
            return f"[resource: {resource.uri} ({mime}, {size})]\n{resource.text}"
        return f"[resource: {resource.uri} ({mime}, {_size(_base64_size(resource.blob))})]"
    return f"[{getattr(block, 'type', type(block).__name__)} content]"


def _repeats(text: str, structured: Any) -> bool:
    """Whether a text block is only the JSON form of the structured content (MCP's compatibility copy)."""
    try:
        return bool(json.loads(text) == structured)
    except ValueError:
        return False


def _base64_size(data: str) -> int:
    return len(data.rstrip("=")) * 3 // 4


def _size(size: int) -> str:
    if size < 1000:
        return f"{size} B"
    if size < 1_000_000:
        return f"{size / 1000:.1f} kB"
    return f"{size / 1_000_000:.1f} MB"


def _resolve_command(command: str, path: str | None) -> str:
    """A bare command missing from PATH is looked up beside this Python: a server pip-installed into
    the runner's own environment works without activating it."""
    if os.sep in command or shutil.which(command, path=path):
        return command
    return shutil.which(command, path=str(Path(sys.executable).parent)) or command


def _slug(server_name: str) -> str:
    """A short source id from the server's name (``mcp-servers/everything`` -> ``everything``)."""
    last = server_name.rstrip("/").rsplit("/", 1)[-1]
    return re.sub(r"[^a-zA-Z0-9_-]", "_", last) or "mcp"


def _path(spec: ToolSourceConfig) -> str:
    return f"tools[{spec.index}].mcp"


def _start_error(spec: ToolSourceConfig, ctx: SourceContext, exc: McpStartError) -> ConfigError:
    server = spec.mcp
    assert server is not None
    verb = "started" if server.transport == "stdio" else "reached"
    hint = None
    if exc.stderr_tail:
        lines = exc.stderr_tail.splitlines()[-_STDERR_LINES:]
        hint = "its stderr ended with:\n" + "\n".join(f"    {line}" for line in lines)
    elif server.transport != "stdio":
        hint = f"is the server running at {server.url}?"
    return ConfigError(
        f"MCP server {spec.label!r} could not be {verb}: {exc.reason}",
        file=str(ctx.agent.path),
        path=_path(spec),
        hint=hint,
    )
