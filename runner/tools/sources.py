"""Opening the tool sources of an agent: one loader per kind, behind one signature.

A loader is ``async def load(spec, ctx, stack) -> LoadedSource``. Whatever it opens (HTTP
clients, MCP sessions, subprocesses) it registers on ``stack``, an ``AsyncExitStack`` that the
session closes at its end, in the task that opened it. Loaders live in their own modules and are
imported only when an agent uses that kind, so an agent with Python tools never imports httpx or mcp.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.agentfile.config import AgentConfig, SourceKind, ToolSourceConfig
from runner.errors import ConfigError, RunnerError
from runner.tools.base import Tool

__all__ = ["AgentToolFactory", "LoadedSource", "SourceContext", "SourceFailure", "SourceLoader", "loader_for"]


@dataclass
class LoadedSource:
    """The tools one source offers, and text its server asks to add to the system prompt."""

    tools: list[Tool]
    instructions: str | None = None


AgentToolFactory = Callable[[ToolSourceConfig, AgentConfig, AsyncExitStack], Awaitable[Tool]]
"""Builds the tool of an ``agent:`` source (the session layer's: it runs sessions)."""


@dataclass
class SourceContext:
    """What loaders may need besides their own spec."""

    agent: AgentConfig
    cache_dir: Path = field(default_factory=lambda: Path(".runner") / "cache")
    openapi_cache_ttl_s: float = 3600.0
    refresh: bool = False
    default_timeout_s: float = 60.0
    logger: logging.Logger = field(default_factory=lambda: logging.getLogger("runner.tools"))
    #: Called with (source label, message) for progress worth showing (MCP progress, reconnects).
    on_progress: Callable[[str, str], None] | None = None
    #: Builds the tool of an ``agent:`` source (given by the session layer, which runs sessions);
    #: what the tool opens is registered on the stack, closed with the source.
    agent_tool_factory: AgentToolFactory | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SourceFailure:
    """A source that could not be opened, and why."""

    spec: ToolSourceConfig
    error: RunnerError


SourceLoader = Callable[[ToolSourceConfig, SourceContext, AsyncExitStack], Awaitable[LoadedSource]]

_LOADERS: dict[SourceKind, str] = {
    "python": "runner.tools.python:load_source",
    "openapi": "runner.tools.openapi:load_source",
    "mcp": "runner.tools.mcp:load_source",
    "builtin": "runner.tools.builtin:load_source",
    "agent": "runner.tools.agent:load_source",
    "a2a": "runner.tools.a2a:load_source",
}


def loader_for(kind: SourceKind) -> SourceLoader:
    """The loader of ``kind`` (imported on first use)."""
    module_name, _, function = _LOADERS[kind].partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:
            raise ConfigError(f"tool sources of kind '{kind}' are not available in this version") from None
        raise
    loader: SourceLoader = getattr(module, function)
    return loader
