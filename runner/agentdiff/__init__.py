"""``runner diff``: the semantic diff of an agent file's resolved configuration at two revisions.

``snapshot`` turns an ``AgentConfig`` into plain data (rendered prompts, resolved tools, settings);
``compare`` diffs two of them into an ``AgentDiff``; ``filediff`` diffs a whole file (every agent of
a team and its ``workflow:``) into a ``FileDiff``; ``diff_agent`` does all of it for an agent file at
two revisions (None: the work tree). No code of the agent runs unless ``run_code`` (``pysource``
reads Python tools and output models from their source).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from runner.agentdiff.compare import MISSING, AgentDiff, Change, ToolChange, compare, format_diff
from runner.agentdiff.filediff import (
    Compared,
    FileDiff,
    Side,
    compare_sides,
    format_file_diff,
    workflow_snapshot,
)
from runner.agentdiff.snapshot import Snapshot, masked, snapshot
from runner.agentfile.files import agent_at, config_from_file, load_agent, load_file
from runner.agentfile.revisions import revision_of
from runner.agentfile.workflow import build_workflow
from runner.store.transcript import Redactor

__all__ = [
    "MISSING",
    "AgentDiff",
    "Change",
    "Compared",
    "FileDiff",
    "Snapshot",
    "ToolChange",
    "compare",
    "diff_agent",
    "format_diff",
    "format_file_diff",
    "snapshot",
]


def _label(ref: str, rev: str | None, path: Path) -> str:
    """``path/in/repo@REV (commit)`` for a revision, ``AGENT (work tree)`` for the work tree."""
    revision = revision_of(path)
    if revision is None:
        return f"{ref} (work tree)"
    return f"{revision.path}@{rev or revision.rev} ({revision.commit[:12]})"


async def _side(ref: str, rev: str | None, agent: str | None, home: Path | None, run_code: bool) -> Side:
    """One revision of the file: every agent (``agent``: that one only) and the workflow."""
    path = agent_at(ref, rev=rev, home=home)
    agent_file = load_file(path)  # read and checked; nothing imported
    names = (agent_file.pick(agent),) if agent is not None else agent_file.names
    agents = {}
    for name in names:
        # only --import-code loads the way `runner validate` does: its checks import the modules
        config = load_agent(path, agent=name) if run_code else config_from_file(agent_file, name)
        agents[name] = await snapshot(config, run_code=run_code)
    workflow = build_workflow(agent_file.document) if agent_file.is_team and agent is None else None
    plain = None
    if workflow is not None:
        plain = masked(Redactor(agent_file.document.secrets).record(workflow_snapshot(workflow)))
    return Side(_label(ref, rev, path), agent_file.is_team and agent is None, agents, plain)


def diff_agent(
    ref: str,
    old_rev: str | None,
    new_rev: str | None,
    *,
    agent: str | None = None,
    home: Path | None = None,
    run_code: bool = False,
) -> FileDiff:
    """The diff of agent file ``ref`` at ``old_rev`` against ``new_rev`` (None: the work tree).

    A team file: every agent and the workflow, unless ``agent`` names one. ``run_code`` imports the
    Python tools and models of both revisions for exact schemas (that runs their code)."""

    async def both() -> FileDiff:
        old = await _side(ref, old_rev, agent, home, run_code)
        new = await _side(ref, new_rev, agent, home, run_code)
        return compare_sides(old, new, imported=run_code)

    return asyncio.run(both())
