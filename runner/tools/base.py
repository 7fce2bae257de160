"""The shapes every tool source produces: ``Tool``, the ``RunContext`` it runs in, and ``ToolResult``."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

__all__ = ["RunContext", "Tool", "ToolCallable", "ToolResult", "ToolSourceKind"]

ToolSourceKind = Literal["python", "openapi", "mcp", "builtin", "agent", "a2a", "client"]


@dataclass(frozen=True)
class RunContext:
    """What the runner hands to a tool call: who is calling, with which vars, and where."""

    session_id: str
    agent: str
    vars: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    workspace: Path = field(default_factory=Path.cwd)
    logger: logging.Logger = field(default_factory=lambda: logging.getLogger("runner.tools"))
    output_chars: int = 0
    """``limits.tool_output_chars``: results longer than this are cut (0: no limit). A tool may read
    and keep only this much."""


ToolCallable = Callable[[dict[str, Any], RunContext], Awaitable[Any]]


@dataclass(frozen=True, eq=False)
class Tool:
    """One callable tool with its model-facing name, description and JSON Schema parameters.

    ``call(arguments, ctx)`` receives the already validated arguments and returns any value; the
    executor turns it into text. ``original_name`` is the name the source gave (before the registry
    sanitized, prefixed or de-duplicated it). Equality is identity: a tool is a live object.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    source_kind: ToolSourceKind
    source_id: str
    call: ToolCallable
    confirm: bool = False
    timeout_s: float | None = None
    original_name: str = ""
    #: Its call runs someone else's async code on the event loop (an async Python tool), which may
    #: ignore cancellation: the executor runs it in a task of its own that it can abandon.
    isolated: bool = False
    #: How the tool reads a path argument (``path``, ``file``, ...): the path it will use, relative
    #: to its root, stripped and resolved (None: it refuses the path). Permission rules match it.
    path_view: Callable[[str], str | None] | None = None
    _definition: dict[str, Any] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not self.original_name:
            object.__setattr__(self, "original_name", self.name)
        definition = {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }
        object.__setattr__(self, "_definition", definition)

    def definition(self) -> dict[str, Any]:
        """The OpenAI function-tool dict; the same object every time (request prefixes stay identical)."""
        return self._definition


@dataclass(frozen=True)
class ToolResult:
    """The outcome of one tool call, as the model will read it."""

    call_id: str
    name: str
    content: str
    is_error: bool = False
    duration_s: float = 0.0
    arguments: dict[str, Any] | None = None
