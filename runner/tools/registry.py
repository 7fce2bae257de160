"""The tool registry: every source's tools under unique, provider-valid names, in a fixed order.

Sources are taken in file order and tools in the order their source gives, so the tool list (and the
request prefix built from it) is the same on every run. Per source: ``include`` / ``exclude`` globs on
the original names, ``prefix: true`` (``<id>_<name>``), ``confirm`` and ``timeout_s``. Then every name
is made valid (``^[a-zA-Z0-9_-]{1,64}$``) and unique: a name already taken is prefixed with the source's
id + ``_`` (Open WebUI's rule), then given a numeric suffix if still taken. Each rename is recorded.
Every schema goes through ``clean_schema``, whichever source built it.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import hashlib
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from runner.agentfile.config import ToolSourceConfig
from runner.tools.base import Tool
from runner.tools.schema import clean_schema

__all__ = ["MAX_NAME_LENGTH", "Rename", "ToolRegistry", "fit_name_length", "sanitize_name"]

MAX_NAME_LENGTH = 64
_INVALID_CHARS = re.compile(r"[^a-zA-Z0-9_-]")


@dataclass(frozen=True)
class Rename:
    """A tool whose final name differs from the one its source gave, and why."""

    original: str
    final: str
    source: str
    reason: str


def sanitize_name(name: str) -> str:
    """Replace every character outside ``[a-zA-Z0-9_-]`` with ``_`` (an empty name becomes ``tool``)."""
    return _INVALID_CHARS.sub("_", name) or "tool"


def fit_name_length(name: str) -> str:
    """Cut a name longer than 64 characters to 55 + ``_`` + the first 8 hex digits of its sha256."""
    if len(name) <= MAX_NAME_LENGTH:
        return name
    digest = hashlib.sha256(name.encode("utf-8")).hexdigest()[:8]
    return f"{name[:55]}_{digest}"


class ToolRegistry:
    """The final, ordered set of tools a session offers the model."""

    def __init__(self, groups: Iterable[tuple[ToolSourceConfig | None, Sequence[Tool]]]) -> None:
        self._by_name: dict[str, Tool] = {}
        self.renames: list[Rename] = []
        """Every tool whose final name differs from its original one, in registry order."""
        for spec, tools in groups:
            for tool in tools:
                if _selected(spec, tool.original_name):
                    self._add(spec, tool)
        self._tools = tuple(self._by_name.values())
        self._names = tuple(self._by_name)
        self._definitions: list[dict[str, Any]] = [tool.definition() for tool in self._tools]

    @classmethod
    def from_tools(cls, tools: Iterable[Tool]) -> ToolRegistry:
        """A registry of tools that come from no configured source (tests, ad-hoc tools)."""
        return cls([(None, list(tools))])

    def get(self, name: str) -> Tool | None:
        """The tool with this final name, if any."""
        return self._by_name.get(name)

    def names(self) -> tuple[str, ...]:
        """The final tool names, in registry order."""
        return self._names

    def tools(self) -> tuple[Tool, ...]:
        """The tools, in registry order."""
        return self._tools

    def definitions(self) -> list[dict[str, Any]]:
        """The OpenAI tool specs; the same list object on every call (do not mutate it)."""
        return self._definitions

    def __len__(self) -> int:
        return len(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools)

    def _add(self, spec: ToolSourceConfig | None, tool: Tool) -> None:
        original = tool.original_name
        source_id = (spec.id if spec is not None else None) or tool.source_id
        prefix = sanitize_name(source_id) if source_id else ""
        reasons: list[str] = []
        name = original
        prefixed = False
        if spec is not None and spec.prefix and prefix:
            name, prefixed = f"{prefix}_{name}", True
            reasons.append("prefix: true")
        valid = sanitize_name(name)
        if valid != name:
            reasons.append("characters outside [a-zA-Z0-9_-] replaced")
        name = self._fit(valid, reasons)
        if name in self._by_name:
            reasons.append(f"name {name!r} already taken by {self._owner(name)}")
            name = self._resolve_collision(name, prefix="" if prefixed else prefix, reasons=reasons)
        final = self._finish(spec, tool, name)
        self._by_name[name] = final
        if name != original:
            label = spec.label if spec is not None else tool.source_id
            self.renames.append(Rename(original, name, label, "; ".join(reasons)))

    def _resolve_collision(self, name: str, *, prefix: str, reasons: list[str]) -> str:
        """Open WebUI's rule (prefix with the source id), then a numeric suffix until it is free."""
        if prefix:
            candidate = fit_name_length(f"{prefix}_{name}")
            if candidate not in self._by_name:
                reasons.append("prefixed with the source id")
                return candidate
            name = candidate
        number = 2
        while True:
            suffix = f"_{number}"
            candidate = f"{name[: MAX_NAME_LENGTH - len(suffix)]}{suffix}"
            if candidate not in self._by_name:
                reasons.append(f"numbered {suffix}")
                return candidate
            number += 1

    @staticmethod
    def _fit(name: str, reasons: list[str]) -> str:
        fitted = fit_name_length(name)
        if fitted != name:
            reasons.append(f"longer than {MAX_NAME_LENGTH} characters")
        return fitted

    def _owner(self, name: str) -> str:
        tool = self._by_name[name]
        return f"{tool.source_kind}:{tool.source_id}"

    @staticmethod
    def _finish(spec: ToolSourceConfig | None, tool: Tool, name: str) -> Tool:
        """The tool under its final name, with a clean schema and the source's id, confirm and timeout."""
        changes: dict[str, Any] = {}
        if name != tool.name:
            changes["name"] = name
        parameters = clean_schema(tool.parameters)
        if parameters != tool.parameters:
            changes["parameters"] = parameters
        if spec is not None:
            if spec.id and spec.id != tool.source_id:
                changes["source_id"] = spec.id
            if spec.confirm is not None and spec.confirm != tool.confirm:
                changes["confirm"] = spec.confirm
            if spec.timeout_s is not None and spec.timeout_s != tool.timeout_s:
                changes["timeout_s"] = spec.timeout_s
        return dataclasses.replace(tool, **changes) if changes else tool


def _selected(spec: ToolSourceConfig | None, name: str) -> bool:
    """``include`` (any glob matches; empty = all) minus ``exclude``, on the source's original name."""
    if spec is None:
        return True
    if spec.include and not any(fnmatch.fnmatchcase(name, pattern) for pattern in spec.include):
        return False
    return not any(fnmatch.fnmatchcase(name, pattern) for pattern in spec.exclude)
