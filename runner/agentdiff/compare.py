"""Comparing two snapshots: prompts as unified diffs, tools added / removed / changed (with the paths
of their schema changes), and every other setting as ``path: before -> after``."""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from runner.agentdiff.snapshot import Snapshot

__all__ = [
    "MISSING",
    "AgentDiff",
    "Change",
    "ToolChange",
    "compare",
    "format_diff",
    "show_value",
    "text_diff",
]


class _Missing:
    def __repr__(self) -> str:
        return "(none)"


#: The side of a change where the value is not set.
MISSING: Any = _Missing()


@dataclass(frozen=True)
class Change:
    """One setting that differs: its dotted path and both values (``MISSING`` where absent)."""

    path: str
    before: Any
    after: Any

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path}
        if self.before is not MISSING:
            out["before"] = self.before
        if self.after is not MISSING:
            out["after"] = self.after
        return out


@dataclass(frozen=True)
class ToolChange:
    """A tool on both sides whose source, description or parameters differ."""

    name: str
    changes: tuple[Change, ...]


@dataclass(frozen=True)
class AgentDiff:
    """What differs between two resolved configurations (``old`` -> ``new``)."""

    old_label: str
    new_label: str
    settings: tuple[Change, ...] = ()
    #: Per prompt template (system, user, status, tool_selection): unified diff lines.
    prompts: dict[str, list[str]] = field(default_factory=dict)
    tools_added: tuple[str, ...] = ()
    tools_removed: tuple[str, ...] = ()
    tools_changed: tuple[ToolChange, ...] = ()

    @property
    def same(self) -> bool:
        """Whether the two configurations are the same."""
        return not (
            self.settings or self.prompts or self.tools_added or self.tools_removed or self.tools_changed
        )

    def to_json(self) -> dict[str, Any]:
        """The whole diff as JSON data."""
        return {
            "old": self.old_label,
            "new": self.new_label,
            "same": self.same,
            "settings": [c.to_json() for c in self.settings],
            "prompts": {name: "".join(lines) for name, lines in self.prompts.items()},
            "tools": {
                "added": list(self.tools_added),
                "removed": list(self.tools_removed),
                "changed": {t.name: [c.to_json() for c in t.changes] for t in self.tools_changed},
            },
        }


def _changes(before: Any, after: Any, path: str) -> Iterator[Change]:
    """The leaves that differ between two JSON values (mappings compared key by key)."""
    if isinstance(before, dict) and isinstance(after, dict):
        for key in [*before, *(k for k in after if k not in before)]:
            sub = f"{path}.{key}" if path else str(key)
            yield from _changes(before.get(key, MISSING), after.get(key, MISSING), sub)
    elif before != after:
        yield Change(path, before, after)


def text_diff(before: str | None, after: str | None, name: str, labels: tuple[str, str]) -> list[str]:
    """``before`` -> ``after`` as unified diff lines, named ``LABEL:name`` on each side."""
    if before == after:
        return []
    old, new = (before or "").splitlines(keepends=True), (after or "").splitlines(keepends=True)
    lines = list(difflib.unified_diff(old, new, f"{labels[0]}:{name}", f"{labels[1]}:{name}"))
    return [line if line.endswith("\n") else line + "\n" for line in lines]


_SKIPPED = frozenset({"prompts", "tools"})


def compare(old: Snapshot, new: Snapshot, *, old_label: str = "old", new_label: str = "new") -> AgentDiff:
    """The semantic diff of two snapshots (``runner.agentdiff.snapshot``)."""
    settings = [
        change
        for key in [*old, *(k for k in new if k not in old)]
        if key not in _SKIPPED
        for change in _changes(old.get(key, MISSING), new.get(key, MISSING), key)
    ]
    prompts = {}
    for name in ("system", "user", "status", "tool_selection"):
        lines = text_diff(old["prompts"].get(name), new["prompts"].get(name), name, (old_label, new_label))
        if lines:
            prompts[name] = lines
    old_tools, new_tools = old["tools"], new["tools"]
    changed = tuple(
        ToolChange(name, tuple(_changes(old_tools[name], new_tools[name], "")))
        for name in old_tools
        if name in new_tools and old_tools[name] != new_tools[name]
    )
    return AgentDiff(
        old_label,
        new_label,
        settings=tuple(settings),
        prompts=prompts,
        tools_added=tuple(n for n in new_tools if n not in old_tools),
        tools_removed=tuple(n for n in old_tools if n not in new_tools),
        tools_changed=changed,
    )


def show_value(value: Any) -> str:
    """A value as one short line of JSON (``(none)`` where it is missing)."""
    if value is MISSING:
        return "(none)"
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= 200 else text[:197] + "..."


def format_diff(diff: AgentDiff) -> str:
    """The diff as text: settings, tools, then the prompts' unified diffs."""
    if diff.same:
        return f"no differences between {diff.old_label} and {diff.new_label}\n"
    out = [f"--- {diff.old_label}\n", f"+++ {diff.new_label}\n"]
    if diff.settings:
        out.append("settings:\n")
        out += [f"  {c.path}: {show_value(c.before)} -> {show_value(c.after)}\n" for c in diff.settings]
    if diff.tools_added or diff.tools_removed or diff.tools_changed:
        out.append("tools:\n")
        out += [f"  + {name}\n" for name in diff.tools_added]
        out += [f"  - {name}\n" for name in diff.tools_removed]
        for tool in diff.tools_changed:
            out.append(f"  ~ {tool.name}\n")
            out += [
                f"      {c.path}: {show_value(c.before)} -> {show_value(c.after)}\n" for c in tool.changes
            ]
    for lines in diff.prompts.values():
        out += lines
    return "".join(out)
