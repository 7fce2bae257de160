"""The contract between the runner and a built-in toolset (``toolsets/<name>.py``).

A toolset's ``build(options, ctx)`` gets a ``ToolsetContext`` and returns ``Tool``s, most made with
``builtin_tool``. This module imports nothing of ``toolsets``: the toolsets import it, and
``runner/tools/builtin.py`` (which loads them) imports both, so the two packages form no cycle.
"""

from __future__ import annotations

import logging
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.errors import ConfigError
from runner.tools.base import Tool, ToolCallable

__all__ = ["ToolsetContext", "builtin_tool"]


@dataclass(frozen=True)
class ToolsetContext:
    """What a toolset's ``build`` gets besides its options."""

    base_dir: Path
    """The folder of the agent file that declared the source; relative option paths start here."""
    stack: AsyncExitStack = field(default_factory=AsyncExitStack)
    """Closed at the end of the session: register clients and processes to clean up on it."""
    confirm: bool | None = None
    """The source's ``confirm:`` (None when the agent file leaves it to the toolset's default)."""
    logger: logging.Logger = field(default_factory=lambda: logging.getLogger("runner.tools"))

    def path(self, value: str) -> Path:
        """An option's path made absolute: ``~`` expanded, relative paths taken from ``base_dir``."""
        return (self.base_dir / Path(value).expanduser()).resolve()

    def folder(self, value: str, *, option: str, what: str = "the folder") -> Path:
        """``path(value)`` as a folder, created when missing; a ``ConfigError`` at ``option`` otherwise."""
        folder = self.path(value)
        if folder.exists() and not folder.is_dir():
            raise ConfigError(f"{option} {str(folder)!r} exists but is not a folder", path=option)
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"cannot create {what} {str(folder)!r}: {exc.strerror}", path=option) from None
        return folder


def builtin_tool(
    toolset: str,
    name: str,
    description: str,
    properties: dict[str, Any],
    required: list[str],
    call: ToolCallable,
) -> Tool:
    """A tool of a built-in toolset, with an object schema of ``properties``."""
    return Tool(
        name=name,
        description=description,
        parameters={"type": "object", "properties": properties, "required": required},
        source_kind="builtin",
        source_id=toolset,
        call=call,
    )
