"""What the permission tests read of a ``Permissions.check``: the verdict, the pattern (the class
keeps one method, ``check``; these two readings are the tests' own)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runner.tools.permissions import Permissions


def verdict(perms: Permissions, tool_name: str, arguments: Mapping[str, Any] | None = None) -> str | None:
    """``allow``, ``ask`` or ``deny`` for this call; None when no rule matched."""
    found = perms.check(tool_name, arguments)
    return found.verdict if found is not None else None


def pattern(perms: Permissions, tool_name: str, arguments: Mapping[str, Any] | None = None) -> str | None:
    """The pattern that decided this call."""
    found = perms.check(tool_name, arguments)
    return found.pattern if found is not None else None
