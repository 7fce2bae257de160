"""Tools: the ``Tool`` shape, the registry, schema hygiene, permissions, execution and the sources.

The source modules (``python`` here; ``openapi``, ``mcp``, ``builtin``, ``agent`` alongside) each turn
one ``tools:`` entry into a list of ``Tool``; ``ToolRegistry`` names and orders them; ``executor`` runs
the calls of one assistant message.
"""

from __future__ import annotations

from runner.tools.base import RunContext, Tool, ToolCallable, ToolResult, ToolSourceKind
from runner.tools.executor import (
    AfterHook,
    BeforeHook,
    CallDecision,
    ParsedCall,
    ToolCallLike,
    execute_calls,
    execute_one,
    gather_in_order,
    interrupted_results,
)
from runner.tools.permissions import Permissions, Verdict
from runner.tools.registry import Rename, ToolRegistry
from runner.tools.schema import clean_schema

__all__ = [
    "AfterHook",
    "BeforeHook",
    "CallDecision",
    "ParsedCall",
    "Permissions",
    "Rename",
    "RunContext",
    "Tool",
    "ToolCallLike",
    "ToolCallable",
    "ToolRegistry",
    "ToolResult",
    "ToolSourceKind",
    "Verdict",
    "clean_schema",
    "execute_calls",
    "execute_one",
    "gather_in_order",
    "interrupted_results",
]
