"""The whole pipeline from a path to a validated ``AgentConfig``.

read YAML (positions, ``${}``) -> apply ``extends`` -> JSON Schema -> semantic checks -> build.
Every step reports all the problems it finds as ``ConfigErrors``, each with a location.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from runner.agentfile.build import build_agent
from runner.agentfile.checks import semantic_errors
from runner.agentfile.config import AgentConfig
from runner.agentfile.loader import resolve
from runner.agentfile.validate import sort_errors, suggest
from runner.agentfile.yamlsrc import Document, PathKey, error_at
from runner.errors import ConfigError, ConfigErrors
from runner.resources import packaged_agents_dir

__all__ = [
    "AGENT_SUFFIXES",
    "AgentFile",
    "check_file",
    "config_from_file",
    "find_agent",
    "inspect_file",
    "load_agent",
    "load_file",
]

AGENT_SUFFIXES = (".yaml", ".yml")


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
        if name is None:
            return self.names[0]
        if name not in self.names:
            close = suggest(name, self.names)
            raise ConfigError(
                f"no agent named '{name}' in this file" + (f" (did you mean '{close}'?)" if close else ""),
                file=str(self.path),
                hint="agents here: " + ", ".join(self.names),
            )
        return name


def _errors_of(exc: ConfigError) -> list[ConfigError]:
    return list(exc) if isinstance(exc, ConfigErrors) else [exc]


def load_file(path: Path, *, env: Mapping[str, str] | None = None) -> AgentFile:
    """Read, resolve and schema-validate ``path``; raises ``ConfigErrors`` listing every problem."""
    from runner.agentfile.validate import schema_errors

    doc = resolve(path, env=os.environ if env is None else env)
    errors = schema_errors(doc.data, doc.sources)
    if errors:
        raise ConfigErrors(errors)
    agents = doc.data.get("agents")
    if isinstance(agents, dict):
        names = tuple(name for name in agents if not name.startswith("x-"))
        if not names:
            raise error_at(
                "the team has no agents (keys starting with x- are ignored)",
                doc.sources.value(("agents",)),
                ("agents",),
            )
        return AgentFile(doc.path, doc, names, True)
    return AgentFile(doc.path, doc, (doc.data["name"],), False)


def check_file(
    path: Path, *, env: Mapping[str, str] | None = None, extra_vars: Iterable[str] = ()
) -> list[ConfigError]:
    """Every problem of a file (all agents of a team), or [] when it is valid."""
    return inspect_file(path, env=env, extra_vars=extra_vars)[1]


def inspect_file(
    path: Path, *, env: Mapping[str, str] | None = None, extra_vars: Iterable[str] = ()
) -> tuple[AgentFile | None, list[ConfigError]]:
    """``check_file`` that also hands back the loaded file (None when it did not load), read once."""
    try:
        agent_file = load_file(path, env=env)
    except ConfigError as exc:
        return None, sort_errors(_errors_of(exc))
    extra = list(extra_vars)
    errors: list[ConfigError] = []
    for name in agent_file.names:
        errors += semantic_errors(
            agent_file.document, agent_file.prefix(name), extra_vars=extra, team=agent_file.names
        )
    return agent_file, sort_errors(errors)


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
    """Load, validate and check one agent; raises ``ConfigErrors`` on any problem."""
    agent_file = load_file(Path(path), env=env)
    chosen = agent_file.pick(agent)
    errors = semantic_errors(
        agent_file.document, agent_file.prefix(chosen), extra_vars=extra_vars, team=agent_file.names
    )
    if errors:
        raise ConfigErrors(sort_errors(errors))
    return config_from_file(agent_file, chosen)


def find_agent(ref: str, *, cwd: Path | None = None) -> Path:
    """Resolve AGENT: a path, else a name in ``./agents/``, else a packaged agent."""
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
