"""The diff of a whole agent file: every agent of a team (or the one agent) and the ``workflow:``.

Each agent is compared by ``compare`` (``runner.agentdiff.compare``), team members matched by
name; the workflow (its steps with their templates, expressions, ``max_iterations``,
``max_parallel``..., its output, output schema and limits) is compared as data, step by step.
``Compared`` says what was compared, and how Python code was read.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from runner.agentdiff.compare import MISSING, AgentDiff, Change, compare, format_diff, show_value, text_diff
from runner.agentdiff.snapshot import Snapshot
from runner.agentfile.workflow import WorkflowConfig

__all__ = ["Compared", "FileDiff", "Side", "compare_sides", "format_file_diff", "workflow_snapshot"]

#: Fields of workflow values that say where they are in the file, or are not part of what it runs.
_NOT_COMPARED = frozenset({"path", "tests"})


@dataclass(frozen=True)
class Side:
    """One revision of the file: its label, whether it is a team file, its agents' snapshots (in file
    order) and its workflow's (None: not compared, or it has none)."""

    label: str
    team: bool
    agents: dict[str, Snapshot]
    workflow: dict[str, Any] | None = None


@dataclass(frozen=True)
class Compared:
    """What a diff compared, so a "no differences" says about what."""

    agents: tuple[str, ...]
    workflow: bool
    #: The Python tools and output models were imported (``--import-code``), or read from their source.
    imported: bool
    #: ``agent.tool: why`` for each tool whose signature was not read exactly from its source.
    not_read: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "agents": list(self.agents),
            "workflow": self.workflow,
            "python": "imported" if self.imported else "source",
            "not_read": list(self.not_read),
        }

    def describe(self) -> str:
        """One line, and one more per tool whose signature was not read."""
        names = ", ".join(self.agents) or "(none)"
        what = f"agent{'s' if len(self.agents) != 1 else ''} {names}" + (
            " and the workflow" if self.workflow else ""
        )
        how = (
            "Python tools and models imported (--import-code)"
            if self.imported
            else "Python tools and models read from their source, not run (--import-code imports them)"
        )
        lines = [f"compared: {what}; {how}\n"]
        lines += [f"  {note}\n" for note in self.not_read]
        return "".join(lines)


@dataclass(frozen=True)
class FileDiff:
    """What differs between two revisions of an agent file (``old`` -> ``new``)."""

    old_label: str
    new_label: str
    compared: Compared
    #: Whether the JSON has the team shape (a team file, all its agents and its workflow).
    team: bool
    agents: dict[str, AgentDiff] = field(default_factory=dict)
    agents_added: tuple[str, ...] = ()
    agents_removed: tuple[str, ...] = ()
    workflow: tuple[Change, ...] = ()

    @property
    def same(self) -> bool:
        """Whether everything compared is the same."""
        return not (
            self.agents_added
            or self.agents_removed
            or self.workflow
            or any(not d.same for d in self.agents.values())
        )

    def to_json(self) -> dict[str, Any]:
        """One agent: its diff's shape plus ``compared``; a team: every agent's and the workflow's."""
        if not self.team and len(self.agents) == 1 and not (self.agents_added or self.agents_removed):
            (only,) = self.agents.values()
            return {**only.to_json(), "same": self.same, "compared": self.compared.to_json()}
        agents = {}
        for name, diff in self.agents.items():
            body = diff.to_json()
            del body["old"], body["new"]
            agents[name] = body
        return {
            "old": self.old_label,
            "new": self.new_label,
            "same": self.same,
            "compared": self.compared.to_json(),
            "agents": agents,
            "agents_added": list(self.agents_added),
            "agents_removed": list(self.agents_removed),
            "workflow": [c.to_json() for c in self.workflow],
        }


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: _plain(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if f.name not in _NOT_COMPARED
        }
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def workflow_snapshot(workflow: WorkflowConfig) -> dict[str, Any]:
    """The workflow as JSON data: everything it runs, nothing of where it is written."""
    data: dict[str, Any] = _plain(workflow)
    return data


def _changes(before: Any, after: Any, path: str) -> Iterator[Change]:
    """The leaves that differ; mappings key by key, lists of the same length item by item."""
    if isinstance(before, dict) and isinstance(after, dict):
        for key in [*before, *(k for k in after if k not in before)]:
            yield from _changes(before.get(key, MISSING), after.get(key, MISSING), f"{path}.{key}")
    elif isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        for index, (old, new) in enumerate(zip(before, after, strict=True)):
            yield from _changes(old, new, f"{path}[{index}]")
    elif before != after:
        yield Change(path, before, after)


def _not_read(agents: dict[str, Snapshot]) -> Iterator[str]:
    for agent, snap in agents.items():
        for tool, entry in snap.get("tools", {}).items():
            if entry.get("signature"):
                yield f"{agent}.{tool}: {entry['signature']}"


def compare_sides(old: Side, new: Side, *, imported: bool) -> FileDiff:
    """The diff of two revisions of one file; two one-agent files pair their agents whatever the names."""
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    if not old.team and not new.team and len(old.agents) == len(new.agents) == 1:
        (old_snap,), ((new_name, new_snap),) = old.agents.values(), new.agents.items()
        pairs = {new_name: (old_snap, new_snap)}
    else:
        pairs = {n: (old.agents[n], new.agents[n]) for n in old.agents if n in new.agents}
        added = tuple(n for n in new.agents if n not in old.agents)
        removed = tuple(n for n in old.agents if n not in new.agents)
    agents = {name: compare(a, b, old_label=old.label, new_label=new.label) for name, (a, b) in pairs.items()}
    workflow = old.workflow is not None or new.workflow is not None
    changes = tuple(_changes(old.workflow, new.workflow, "workflow")) if workflow else ()
    notes = tuple(dict.fromkeys([*_not_read(old.agents), *_not_read(new.agents)]))
    return FileDiff(
        old.label,
        new.label,
        Compared(tuple(dict.fromkeys([*old.agents, *new.agents])), workflow, imported, notes),
        team=old.team or new.team,
        agents=agents,
        agents_added=added,
        agents_removed=removed,
        workflow=changes,
    )


def _body(diff: AgentDiff) -> list[str]:
    """An agent's diff without its two header lines."""
    return format_diff(diff).splitlines(keepends=True)[2:]


def _workflow_lines(changes: tuple[Change, ...], labels: tuple[str, str]) -> list[str]:
    out = ["workflow:\n"]
    for change in changes:
        before, after = change.before, change.after
        if isinstance(before, str) and isinstance(after, str) and "\n" in before + after:
            out += [f"  {line}" for line in text_diff(before, after, change.path, labels)]
        else:
            out.append(
                f"  {change.path.removeprefix('workflow.')}: {show_value(before)} -> {show_value(after)}\n"
            )
    return out


def format_file_diff(diff: FileDiff) -> str:
    """The diff as text: what was compared, then each agent that differs, then the workflow."""
    if diff.same:
        return f"no differences between {diff.old_label} and {diff.new_label}\n" + diff.compared.describe()
    out = [f"--- {diff.old_label}\n", f"+++ {diff.new_label}\n", diff.compared.describe()]
    if not diff.team and len(diff.agents) == 1 and not (diff.agents_added or diff.agents_removed):
        (only,) = diff.agents.values()
        return "".join(out + _body(only))
    out += [f"agent added: {name}\n" for name in diff.agents_added]
    out += [f"agent removed: {name}\n" for name in diff.agents_removed]
    for name, agent in diff.agents.items():
        if not agent.same:
            out.append(f"agent {name}:\n")
            out += [f"  {line}" for line in _body(agent)]
    if diff.workflow:
        out += _workflow_lines(diff.workflow, (diff.old_label, diff.new_label))
    return "".join(out)
