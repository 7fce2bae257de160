"""What an ACP session is made of: the agent configuration it runs (the editor's project folder as
the root of the ``files`` / ``shell`` toolsets, the editor's MCP servers as extra sources), the
runtime hosts those configurations share, and the ordered stream of updates to the editor.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acp.schema import HttpMcpServer, McpServerStdio, SseMcpServer

from runner.acp.mapping import EventMapper
from runner.agentfile.config import AgentConfig, McpServerConfig, ToolSourceConfig
from runner.errors import ConfigError
from runner.runtime.host import RuntimeHost
from runner.runtime.settings import RuntimeSettings
from runner.session import Session
from runner.session.opening import runtime_host

__all__ = ["AcpSession", "HostPool", "Outbox", "session_config", "source_of"]

log = logging.getLogger("runner.acp")

#: The toolsets whose root option is the session's folder when the agent file gives a relative one.
_ROOTED_TOOLSETS = frozenset({"files", "shell"})


def source_of(server: Any, *, cwd: Path, index: int, position: int = 0) -> ToolSourceConfig:
    """The tool source of one MCP server the editor passed (stdio, HTTP or SSE); others are refused."""
    if isinstance(server, McpServerStdio):
        mcp = McpServerConfig(
            command=server.command,
            args=tuple(server.args),
            env={variable.name: variable.value for variable in server.env},
            cwd=cwd,
        )
        target = " ".join([server.command, *server.args])
        headers: dict[str, str] = {}
    elif isinstance(server, HttpMcpServer | SseMcpServer):
        mcp = McpServerConfig(url=server.url)
        target = server.url
        headers = {header.name: header.value for header in server.headers}
    else:
        kind = getattr(server, "type", type(server).__name__)
        raise ConfigError(
            f"mcpServers[{index}]: {kind} MCP servers are not supported (stdio, http and sse are)"
        )
    return ToolSourceConfig(
        kind="mcp",
        target=target,
        base_dir=cwd,
        id=server.name or None,
        headers=headers,
        mcp=mcp,
        index=position,
    )


def session_config(config: AgentConfig, *, cwd: Path, servers: Sequence[Any] = ()) -> AgentConfig:
    """``config`` as a session in the editor's folder ``cwd`` runs it: the ``files`` and ``shell``
    toolsets' relative roots taken from ``cwd`` (absolute ones stay), the editor's MCP servers after
    the file's own sources. The same configuration when neither applies."""
    tools = tuple(
        dataclasses.replace(source, base_dir=cwd)
        if source.kind == "builtin" and source.target in _ROOTED_TOOLSETS
        else source
        for source in config.tools
    )
    extra = tuple(
        source_of(server, cwd=cwd, index=index, position=len(tools) + index)
        for index, server in enumerate(servers)
    )
    if tools == config.tools and not extra:
        return config
    return dataclasses.replace(config, tools=tools + extra)


class HostPool:
    """One ``RuntimeHost`` per distinct session configuration (sessions in one folder with the same
    MCP servers share a runtime); all closed with the agent."""

    def __init__(self, settings: RuntimeSettings, *, model: Any = None) -> None:
        self.settings = settings
        self.model = model
        self._hosts: dict[str, RuntimeHost] = {}
        self._lock = asyncio.Lock()

    async def host(self, config: AgentConfig) -> RuntimeHost:
        """The host of ``config``, its runtime built now (a ``ConfigError`` if its sources fail)."""
        key = json.dumps(dataclasses.asdict(config), sort_keys=True, default=str)
        async with self._lock:
            host = self._hosts.get(key)
            if host is None:
                host = runtime_host(config, self.settings, model=self.model)
                runtime = await host.acquire()  # open the sources now: errors belong to session/new
                await host.release(runtime)
                self._hosts[key] = host
            return host

    async def aclose(self) -> None:
        """Close every runtime."""
        hosts, self._hosts = list(self._hosts.values()), {}
        for host in hosts:
            try:
                await host.aclose()
            except Exception:
                log.exception("closing a runtime failed")


Send = Callable[[Any], Awaitable[None]]


class Outbox:
    """The updates of one session to the editor, sent in order by one task; ``flush`` waits until
    all that were put are sent (before a permission request and before a prompt's answer)."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self.broken = False

    def put(self, update: Any) -> None:
        """Queue ``update`` (sync: the loop's event sink calls it)."""
        if self.broken:
            return
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._drain(), name="acp-outbox")
        self._queue.put_nowait(update)

    async def flush(self) -> None:
        """Wait until every queued update was sent (or the connection is gone)."""
        if self._task is not None:
            await self._queue.join()

    async def _drain(self) -> None:
        while True:
            update = await self._queue.get()
            try:
                if not self.broken:
                    await self._send(update)
            except Exception as exc:  # the editor went away: nothing more can reach it
                self.broken = True
                log.warning("cannot send a session update: %s", exc)
            finally:
                self._queue.task_done()

    async def aclose(self) -> None:
        """Stop the sending task."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


@dataclass
class AcpSession:
    """One editor session: its id (the runner session's, so ``runner resume ID`` continues it), the
    member it runs (its mode), its folder and configuration, and the runner session once opened."""

    id: str
    mode: str
    cwd: Path
    config: AgentConfig
    host: RuntimeHost
    outbox: Outbox
    #: The MCP servers the editor passed (a mode change builds the other member's sources with them).
    servers: list[Any] = field(default_factory=list)
    session: Session | None = None
    #: The prompt turn running now (one at a time), and its translator.
    running: asyncio.Task[Any] | None = None
    mapper: EventMapper | None = None
    #: ``session/cancel`` arrived for the running turn.
    cancelled: bool = False
