"""The whole pipeline from a path to a validated ``AgentConfig``.

read YAML (positions, ``${}``) -> apply ``extends`` -> JSON Schema -> semantic checks -> build.
One pass finds every problem (``runner.agentfile.survey``), raised as ``ConfigErrors``, each with a
location.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from runner.agentfile.build import build_agent
from runner.agentfile.config import AgentConfig
from runner.agentfile.discover import AGENT_SUFFIXES
from runner.agentfile.revisions import at_revision, from_reference, parse_reference
from runner.agentfile.survey import Survey, errors_of, pick_name, survey_file
from runner.agentfile.validate import sort_errors, suggest
from runner.agentfile.yamlsrc import Document, PathKey
from runner.errors import ConfigError, ConfigErrors
from runner.resources import packaged_agents_dir

__all__ = [
    "AGENT_SUFFIXES",
    "AgentFile",
    "agent_at",
    "check_file",
    "config_from_file",
    "every_error",
    "find_agent",
    "inspect_file",
    "load_agent",
    "load_file",
]


@dataclass(frozen=True)
class AgentFile:
    """A loaded, schema-valid agent file: one agent, or a team (``agents:``)."""

    path: Path
    document: Document
    names: tuple[str, ...]
    is_team: bool

    def prefix(self, name: str) -> PathKey:
        """Where the body of agent ``name`` is in the document."""
        return ("agents", name) if self.is_team else ()

    def pick(self, name: str | None) -> str:
        """The agent ``name`` (the first one when None); an unknown name is a ``ConfigError``."""
        return pick_name(self.names, name, file=self.path)


def _survey(path: Path, env: Mapping[str, str] | None) -> Survey | list[ConfigError]:
    """The survey of ``path``, or the errors that kept it from being read at all."""
    try:
        return survey_file(path, env=os.environ if env is None else env)
    except ConfigError as exc:
        return sort_errors(errors_of(exc))


def _agent_file(survey: Survey) -> AgentFile:
    return AgentFile(survey.path, survey.document, survey.names, survey.is_team)


def load_file(path: Path, *, env: Mapping[str, str] | None = None) -> AgentFile:
    """Read, resolve and schema-validate ``path``; raises ``ConfigErrors`` listing every problem."""
    survey = _survey(path, env)
    if isinstance(survey, list):
        raise ConfigErrors(survey)
    if survey.errors:
        raise ConfigErrors(list(survey.errors))
    return _agent_file(survey)


def check_file(
    path: Path, *, env: Mapping[str, str] | None = None, extra_vars: Iterable[str] = ()
) -> list[ConfigError]:
    """Every problem of a file (all agents of a team), or [] when it is valid."""
    return inspect_file(path, env=env, extra_vars=extra_vars)[1]


def inspect_file(
    path: Path, *, env: Mapping[str, str] | None = None, extra_vars: Iterable[str] = ()
) -> tuple[AgentFile | None, list[ConfigError]]:
    """``check_file`` that also hands back the loaded file (None unless it is valid), read once."""
    survey = _survey(path, env)
    if isinstance(survey, list):
        return None, survey
    errors = every_error(survey, extra_vars=extra_vars)
    return (None if errors else _agent_file(survey)), errors


def every_error(survey: Survey, *, extra_vars: Iterable[str] = ()) -> list[ConfigError]:
    """The survey's errors and the semantic errors of each of its agents, in file order."""
    extra = list(extra_vars)
    errors = list(survey.errors)
    for name in survey.names:
        errors += survey.semantic_errors(name, extra_vars=extra)
    errors += survey.workflow_errors(extra_vars=extra)
    return sort_errors(errors)


def config_from_file(agent_file: AgentFile, name: str | None = None) -> AgentConfig:
    """The ``AgentConfig`` of one agent of an already checked file."""
    chosen = agent_file.pick(name)
    return build_agent(agent_file.document, agent_file.prefix(chosen), team=agent_file.names)


def load_agent(
    path: str | Path,
    *,
    agent: str | None = None,
    env: Mapping[str, str] | None = None,
    extra_vars: Iterable[str] = (),
) -> AgentConfig:
    """Load, validate and check one agent; raises ``ConfigErrors`` listing every problem."""
    survey = _survey(Path(path), env)
    if isinstance(survey, list):
        raise ConfigErrors(survey)
    if not survey.names:
        raise ConfigErrors(list(survey.errors))
    chosen = pick_name(survey.names, agent, file=survey.path)
    errors = [*survey.errors, *survey.semantic_errors(chosen, extra_vars=extra_vars)]
    if errors:
        raise ConfigErrors(sort_errors(errors))
    return config_from_file(_agent_file(survey), chosen)


def agent_at(ref: str, *, rev: str | None = None, home: Path | None = None, cwd: Path | None = None) -> Path:
    """``find_agent``, at revision ``rev`` of its repository when given (``--rev``)."""
    if rev is None:
        return find_agent(ref, cwd=cwd, home=home)
    if ref.startswith("git+"):
        raise ConfigError(f"--rev {rev} with '{ref}': a git+ reference names its revision after '#'")
    return at_revision(find_agent(ref, cwd=cwd), rev, home=home)


def find_agent(ref: str, *, cwd: Path | None = None, home: Path | None = None) -> Path:
    """Resolve AGENT: a ``git+URL#REV:path`` reference, a path, a name in ``./agents/``, a packaged agent."""
    reference = parse_reference(ref)
    if reference is not None:
        return from_reference(reference, home=home)
    base = cwd or Path.cwd()
    direct = base / ref
    if direct.is_file() or direct.is_dir() or os.sep in ref or ref.endswith(AGENT_SUFFIXES):
        return direct
    for folder in (base / "agents", packaged_agents_dir()):
        for suffix in AGENT_SUFFIXES:
            candidate = folder / f"{ref}{suffix}"
            if candidate.is_file():
                return candidate
    known = sorted(
        {
            p.stem
            for folder in (base / "agents", packaged_agents_dir())
            if folder.is_dir()
            for p in folder.iterdir()
            if p.suffix in AGENT_SUFFIXES
        }
    )
    close = suggest(ref, known)
    raise ConfigError(
        f"no agent file or agent named '{ref}'" + (f" (did you mean '{close}'?)" if close else ""),
        hint="give a path to a YAML file, or a name from ./agents/ or the packaged agents"
        + (f": {', '.join(known)}" if known else ""),
    )
