"""Which agents ``runner serve`` offers: every agent file under the given paths, one model per agent.

A path is a file or a folder searched recursively for ``.yaml``/``.yml`` (hidden folders,
virtual environments and dependencies skipped). YAML in a folder that is not an agent (no
``version:``, or a fragment only other files extend) is set aside quietly (``Catalog.not_agents``);
an agent file that is not valid is skipped with one warning line; each member of a team file is a
model of its own. The model id is the
agent's name; when two files define the same name, the first one (in path order) is served.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from runner.agentfile.config import AgentConfig
from runner.agentfile.discover import discover, search_folder, skipped_note
from runner.agentfile.workflow import WorkflowConfig
from runner.errors import ConfigError, ConfigErrors
from runner.runnable.target import targets_of

__all__ = ["Catalog", "ServedAgent", "ServedWorkflow", "find_agent_files", "load_catalog", "load_models"]


@dataclass(frozen=True)
class ServedAgent:
    """One model of the server: the agent's name, its configuration and the file it came from."""

    name: str
    config: AgentConfig
    path: Path
    created: int


@dataclass(frozen=True)
class ServedWorkflow:
    """A team file's workflow served as a model: its name, configuration, its step agents' configs."""

    name: str
    workflow: WorkflowConfig
    #: The configuration of every team agent its steps run, by name.
    configs: dict[str, AgentConfig]
    path: Path
    created: int

    def description(self) -> str:
        """What ``/v1/models`` says of it: the steps and the agents they run."""
        steps = self.workflow.steps
        ids = ", ".join(step.id for step in steps[:8]) + (", ..." if len(steps) > 8 else "")
        count = f"{len(steps)} step{'s' if len(steps) != 1 else ''}"
        return f"a workflow of {count} ({ids}) running agents {', '.join(self.configs)}"


@dataclass(frozen=True)
class Catalog:
    """The agents and workflows found, every agent file looked at (valid or not), what went wrong."""

    agents: dict[str, ServedAgent] = field(default_factory=dict)
    files: tuple[Path, ...] = ()
    #: The error of each file that was skipped, one line each.
    failures: dict[Path, str] = field(default_factory=dict)
    #: Other warnings: missing paths, duplicate names.
    warnings: tuple[str, ...] = ()
    #: YAML files found in folders that are not agents, with why (not warned about).
    not_agents: dict[Path, str] = field(default_factory=dict)
    #: The workflows of team files, by model id (never the id of an agent).
    workflows: dict[str, ServedWorkflow] = field(default_factory=dict)

    def get(self, name: str) -> ServedAgent | None:
        """The agent served as model ``name``."""
        return self.agents.get(name)

    def workflow(self, name: str) -> ServedWorkflow | None:
        """The workflow served as model ``name``."""
        return self.workflows.get(name)

    def names(self) -> list[str]:
        """Every model id served, agents first (in the order found), then workflows."""
        return [*self.agents, *self.workflows]

    def problems(self) -> list[str]:
        """Every warning line, skipped files first."""
        return [f"skipped {error}" for error in self.failures.values()] + list(self.warnings)

    def note(self, show: Callable[[Path], str] = str) -> str | None:
        """One quiet line naming the files that are not agents, or None (``show`` prints a path)."""
        return skipped_note(self.not_agents, show=show)


def find_agent_files(paths: Iterable[Path]) -> tuple[list[Path], list[str]]:
    """The YAML files under ``paths`` (folders searched recursively) and the paths that do not exist."""
    files: list[Path] = []
    missing: list[str] = []
    for path in paths:
        if path.is_dir():
            found = search_folder(path)
            if not found:
                missing.append(f"{path}: no .yaml or .yml files in this folder")
            files.extend(found)
        elif path.is_file():
            files.append(path)
        else:
            missing.append(f"{path}: no such file or folder")
    unique = list(dict.fromkeys(p.resolve() for p in files))
    return unique, missing


def _first_error(path: Path, errors: Sequence[ConfigError]) -> str:
    """One line: the first error with its location (the file's path when it has none), and a count."""
    first = errors[0]
    text = str(first) if first.file else f"{path}: {first}"
    return text + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else "")


def load_models(
    path: Path, *, env: Mapping[str, str] | None = None
) -> tuple[list[ServedAgent], ServedWorkflow | None]:
    """The agents of one file (a team gives one per member) and its workflow, if it has one;
    raises ``ConfigError`` when the file is invalid (every check ``runner validate`` makes)."""
    targets = targets_of(path, env=env)  # read once, with every check runner validate makes
    try:
        created = int(path.stat().st_mtime)
    except OSError:
        created = int(time.time())
    agents = [ServedAgent(t.name, t.agent_config, path, created) for t in targets if t.workflow is None]
    flows = [t for t in targets if t.workflow is not None]
    if not flows:
        return agents, None
    [flow] = flows
    assert flow.workflow is not None
    return agents, ServedWorkflow(flow.name, flow.workflow, dict(flow.configs), path, created)


def load_agents(path: Path, *, env: Mapping[str, str] | None = None) -> list[ServedAgent]:
    """The agents of one file (a team gives one per member); raises ``ConfigError`` when invalid."""
    return load_models(path, env=env)[0]


def load_catalog(paths: Sequence[Path], *, env: Mapping[str, str] | None = None) -> Catalog:
    """Find and load every agent under ``paths``; invalid files are skipped with their error."""
    files, warnings = find_agent_files(paths)
    in_folders = [p for path in paths if path.is_dir() for p in search_folder(path)]
    explicit = {path.resolve() for path in paths if path.is_file()}
    split = discover(in_folders, env=os.environ if env is None else env)
    not_agents = {p.resolve(): why for p, why in split.skipped.items() if p.resolve() not in explicit}
    agents: dict[str, ServedAgent] = {}
    workflows: dict[str, ServedWorkflow] = {}
    failures: dict[Path, str] = {}
    for path in files:
        if path in not_agents:
            continue
        try:
            found, workflow = load_models(path, env=env)
        except ConfigError as exc:
            failures[path] = _first_error(path, list(exc) if isinstance(exc, ConfigErrors) else [exc])
            continue
        for agent in found:
            if agent.name in agents or agent.name in workflows:
                warnings.append(_duplicate(path, "agent", agent.name, agents, workflows))
                continue
            agents[agent.name] = agent
        if workflow is not None:
            if workflow.name in agents or workflow.name in workflows:
                warnings.append(_duplicate(path, "workflow", workflow.name, agents, workflows))
            else:
                workflows[workflow.name] = workflow
    return Catalog(
        agents=agents,
        files=tuple(files),
        failures=failures,
        warnings=tuple(warnings),
        not_agents=not_agents,
        workflows=workflows,
    )


def _duplicate(
    path: Path, kind: str, name: str, agents: dict[str, ServedAgent], workflows: dict[str, ServedWorkflow]
) -> str:
    """The warning for a model id already taken (by an agent or a workflow found earlier)."""
    first: ServedAgent | ServedWorkflow = agents[name] if name in agents else workflows[name]
    what = (
        ""
        if isinstance(first, ServedAgent) == (kind == "agent")
        else (" (as an agent)" if isinstance(first, ServedAgent) else " (as a workflow)")
    )
    return f"{path}: {kind} '{name}' is already served from {first.path}{what}; skipped"
