"""``runner diff``: the semantic diff of an agent's resolved configuration at two revisions.

``snapshot`` turns an ``AgentConfig`` into plain data (rendered prompts, resolved tools, settings);
``compare`` diffs two of them into an ``AgentDiff``; ``diff_agent`` does both for an agent file at
two revisions (None: the work tree).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from runner.agentdiff.compare import MISSING, AgentDiff, Change, ToolChange, compare, format_diff
from runner.agentdiff.snapshot import Snapshot, snapshot
from runner.agentfile.files import agent_at, load_agent
from runner.agentfile.revisions import revision_of

__all__ = [
    "MISSING",
    "AgentDiff",
    "Change",
    "Snapshot",
    "ToolChange",
    "compare",
    "diff_agent",
    "format_diff",
    "snapshot",
]


def _label(ref: str, rev: str | None, path: Path) -> str:
    """``path/in/repo@REV (commit)`` for a revision, ``AGENT (work tree)`` for the work tree."""
    revision = revision_of(path)
    if revision is None:
        return f"{ref} (work tree)"
    return f"{revision.path}@{rev or revision.rev} ({revision.commit[:12]})"


async def _side(ref: str, rev: str | None, agent: str | None, home: Path | None) -> tuple[Snapshot, str]:
    path = agent_at(ref, rev=rev, home=home)
    config = load_agent(path, agent=agent)
    return await snapshot(config), _label(ref, rev, path)


def diff_agent(
    ref: str, old_rev: str | None, new_rev: str | None, *, agent: str | None = None, home: Path | None = None
) -> AgentDiff:
    """The diff of agent ``ref`` at ``old_rev`` against ``new_rev`` (None: the work tree)."""

    async def both() -> AgentDiff:
        old, old_label = await _side(ref, old_rev, agent, home)
        new, new_label = await _side(ref, new_rev, agent, home)
        return compare(old, new, old_label=old_label, new_label=new_label)

    return asyncio.run(both())
