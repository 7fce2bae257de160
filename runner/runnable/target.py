"""What a user names, resolved once: an agent target or a workflow target (``resolve``).

Every door (``runner run`` / ``resume`` / ``test`` / ``render`` / ``batch`` / ``eval``, ``runner.Agent``,
``runner.batch.run_batch``) calls ``resolve`` with what it was given — an agent file, a team file
with or without a ``workflow:``, ``--agent NAME`` of a team, ``--rev``, a ``git+URL`` — and gets one
``Target``; no door asks itself whether a file is a team or has a workflow.

- a one-agent file → that agent;
- a team file with ``--agent NAME`` → that member (an unknown name: "did you mean");
- a team file with a ``workflow:`` → the workflow;
- a team file without a workflow → its one member, or an error listing the members;
- ``--agent`` on a one-agent file → an error (a resumed session's agent is ``member``: no error);
- a workflow where the door runs only agents (``workflows=False``) → an error naming the door.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from runner.agentfile.config import AgentConfig
from runner.agentfile.files import AgentFile, agent_at, load_agent, load_file
from runner.agentfile.workflow import WorkflowConfig
from runner.errors import ConfigError
from runner.store.transcript import file_sha256

if TYPE_CHECKING:
    from runner.workflow.loading import TeamWorkflow

__all__ = ["Target", "resolve", "shown", "targets_of"]


def shown(path: Path) -> str:
    """``path`` as a user reads it: relative to the current folder when below it."""
    try:
        return str(Path(path).absolute().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


@dataclass(frozen=True)
class Target:
    """One thing to run: an agent (``config``) or a team file's workflow (``workflow`` and the
    configurations of the agents its steps run)."""

    kind: Literal["agent", "workflow"]
    #: The file (for ``--rev`` / ``git+``: the file in the revision's tree).
    path: Path
    config: AgentConfig | None = None
    workflow: WorkflowConfig | None = None
    #: Every agent this target runs, by name (the one agent, or the workflow's members).
    configs: dict[str, AgentConfig] = field(default_factory=dict)
    #: A workflow target's file as it was read and checked (what ``runner render`` prints).
    file: AgentFile | None = None

    @property
    def name(self) -> str:
        """The agent's name, or the workflow's."""
        if self.workflow is not None:
            return self.workflow.name
        assert self.config is not None
        return self.config.name

    @property
    def agent_config(self) -> AgentConfig:
        """The one agent's configuration (an agent target's; a workflow target has none)."""
        assert self.config is not None, "a workflow target runs several agents"
        return self.config

    @property
    def is_workflow(self) -> bool:
        return self.kind == "workflow"

    @property
    def secrets(self) -> frozenset[str]:
        """The secret values of every agent the target runs (what redaction masks)."""
        return frozenset().union(*(config.secrets for config in self.configs.values()))

    @property
    def sha256(self) -> str:
        """The hash of the file (what a batch's resume checks)."""
        return file_sha256(self.path)

    @property
    def models(self) -> str:
        """The model ids of every agent it runs, for a transcript's header."""
        return ", ".join(sorted({c.model.id for c in self.configs.values() if c.model is not None}))


def resolve(
    ref: str | Path,
    *,
    agent: str | None = None,
    rev: str | None = None,
    extra_vars: Iterable[str] = (),
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
    workflows: bool = True,
    door: str = "this command",
    member: str | None = None,
) -> Target:
    """The target ``ref`` names (with ``--agent`` / ``--rev``); one ``ConfigError`` per bad case.

    ``member``: the agent a resumed session names, picked in a team file when ``agent`` is None and
    ignored in a one-agent file (the session's own check names both agents).
    ``workflows=False``: ``door`` (e.g. "the chat (-i)") runs one agent only; a team file whose
    workflow would run is refused, naming the door and the members ``--agent`` can pick.
    """
    path = _located(ref, rev=rev, home=home)
    extra = list(extra_vars)
    agent_file = load_file(path, env=env)
    if agent is None and member is not None and agent_file.is_team:
        agent = member
    if agent is not None and not agent_file.is_team:
        raise ConfigError(
            f"--agent {agent}: {shown(path)} is not a team file (it is one agent)",
            hint=f"drop --agent to run {shown(path)}",
        )
    if agent is not None or not agent_file.is_team:  # the member named, or the file's one agent
        config = load_agent(path, agent=agent, env=env, extra_vars=extra)
        return Target("agent", path, config=config, configs={config.name: config})
    team = _workflow(path, agent_file, extra, env)
    if team is None:
        if len(agent_file.names) != 1:
            raise ConfigError(
                f"{shown(path)} is a team of {len(agent_file.names)} agents and has no workflow: "
                "name the one to run with --agent",
                file=str(path),
                hint="agents here: " + ", ".join(agent_file.names),
            )
        config = load_agent(path, agent=agent_file.names[0], env=env, extra_vars=extra)
        return Target("agent", path, config=config, configs={config.name: config})
    if not workflows:
        raise ConfigError(
            f"{shown(path)} runs a workflow, and {door} runs one agent",
            file=str(path),
            hint="give --agent NAME to run one of its agents: " + ", ".join(agent_file.names),
        )
    return Target("workflow", path, workflow=team.workflow, configs=team.configs, file=team.file)


def targets_of(
    ref: str | Path, *, extra_vars: Iterable[str] = (), env: Mapping[str, str] | None = None
) -> list[Target]:
    """Every target of a file — each of its agents, then its workflow if it has one — read once with
    every check ``runner validate`` makes (``ConfigErrors`` listing them): what ``runner test`` runs
    and what ``runner serve`` serves of a file."""
    from runner.agentfile.files import config_from_file, inspect_file
    from runner.agentfile.workflow import build_workflow
    from runner.errors import ConfigErrors
    from runner.workflow.loading import step_agents

    path = _located(ref, rev=None, home=None)
    agent_file, errors = inspect_file(path, env=env, extra_vars=extra_vars)
    if errors or agent_file is None:
        raise ConfigErrors(errors)
    members = {name: config_from_file(agent_file, name) for name in agent_file.names}
    found = [Target("agent", path, config=c, configs={c.name: c}) for c in members.values()]
    workflow = build_workflow(agent_file.document) if agent_file.is_team else None
    if workflow is not None:
        configs = {name: members[name] for name in step_agents(workflow.steps)}
        found.append(Target("workflow", path, workflow=workflow, configs=configs))
    return found


def _located(ref: str | Path, *, rev: str | None, home: Path | None) -> Path:
    if isinstance(ref, Path):
        return agent_at(str(ref), rev=rev, home=home) if rev is not None else ref
    return agent_at(ref, rev=rev, home=home)


def _workflow(
    path: Path, agent_file: AgentFile, extra: list[str], env: Mapping[str, str] | None
) -> TeamWorkflow | None:
    """The team file's workflow, with every check ``runner validate`` makes (None: it has none)."""
    data = agent_file.document.data
    if not isinstance(data, dict) or data.get("workflow") is None:
        return None
    from runner.workflow.loading import team_workflow

    return team_workflow(path, extra_vars=extra, env=env)
