"""A team file's workflow, loaded with every check ``runner validate`` makes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from runner.agentfile import load_agent
from runner.agentfile.config import AgentConfig
from runner.agentfile.files import AgentFile
from runner.agentfile.workflow import Step, WorkflowConfig
from runner.errors import ConfigErrors

__all__ = ["TeamWorkflow", "load_configs", "step_agents", "team_workflow"]


@dataclass(frozen=True)
class TeamWorkflow:
    """A team file's workflow, the configurations of the agents its steps run, and the checked file
    they were read from (what ``runner render`` prints), all from one reading of the file."""

    workflow: WorkflowConfig
    configs: dict[str, AgentConfig]
    file: AgentFile


def team_workflow(
    path: Path, *, extra_vars: Iterable[str] = (), env: Mapping[str, str] | None = None
) -> TeamWorkflow | None:
    """The workflow of the team file at ``path`` (None: not a team file, or one without a workflow),
    with every check ``runner validate`` makes: a workflow whose references ``validate`` refuses
    never starts (``ConfigErrors``, exit 2). The file is read and checked once."""
    from runner.agentfile.files import config_from_file, inspect_file
    from runner.agentfile.workflow import build_workflow

    loaded, errors = inspect_file(path, env=env, extra_vars=extra_vars)
    if errors:
        raise ConfigErrors(errors)
    assert loaded is not None
    workflow = build_workflow(loaded.document) if loaded.is_team else None
    if workflow is None:
        return None
    configs = {name: config_from_file(loaded, name) for name in step_agents(workflow.steps)}
    return TeamWorkflow(workflow, configs, loaded)


def step_agents(steps: tuple[Step, ...]) -> list[str]:
    """The team agents ``steps`` run (nested steps included), in the order they first appear."""
    names: list[str] = []
    for step in steps:
        inner = (*step.steps, *((step.step,) if step.step is not None else ()))
        for name in ([step.agent] if step.agent is not None else []) + step_agents(inner):
            if name not in names:
                names.append(name)
    return names


def load_configs(path: Path, workflow: WorkflowConfig) -> dict[str, AgentConfig]:
    """The configuration of every team agent the workflow's steps name (an unknown one: ``ConfigError``)."""
    return {name: load_agent(path, agent=name) for name in step_agents(workflow.steps)}
