"""Every problem of an agent file in one pass, for ``runner validate`` and the loaders.

``survey_file`` reads the file, applies ``extends`` and checks the schema, reading past each
problem that leaves the rest readable: unset ``${VAR}``s, schema errors and broken ``extends`` are
all collected. ``Survey.semantic_errors`` then checks the parts that passed (templates, imports,
references, secrets) and skips only a part whose own value is wrong, so one run reports every
mistake that can be found, each once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from runner.agentfile.checks import semantic_errors
from runner.agentfile.loader import resolve_all
from runner.agentfile.validate import schema_errors, sort_errors, suggest
from runner.agentfile.yamlsrc import Document, PathKey, error_at, format_path
from runner.errors import ConfigError, ConfigErrors

__all__ = ["Survey", "errors_of", "pick_name", "survey_file"]

_MISSING_KEY = "missing required key "


def pick_name(names: tuple[str, ...], name: str | None, *, file: Path) -> str:
    """The agent ``name`` of a file (its first one when None); an unknown name is a ``ConfigError``."""
    if name is None and names:
        return names[0]
    if name is None or name not in names:
        close = suggest(name, names) if name else None
        raise ConfigError(
            f"no agent named '{name}' in this file" + (f" (did you mean '{close}'?)" if close else "")
            if name
            else "this file defines no agent",
            file=str(file),
            hint="agents here: " + ", ".join(names) if names else None,
        )
    return name


def _under(path: str, ancestor: str) -> bool:
    """Whether the formatted ``path`` is ``ancestor`` or lies below it."""
    if not ancestor:
        return True
    return path == ancestor or path.startswith((ancestor + ".", ancestor + "["))


@dataclass(frozen=True)
class Survey:
    """What reading and schema-checking a file found: the document, its agents, its problems."""

    path: Path
    document: Document
    #: Each agent's name and where its body is (``()`` for a one-agent file).
    bodies: tuple[tuple[str, PathKey], ...]
    is_team: bool
    #: Problems of reading, ``extends`` and the schema, in file order.
    errors: tuple[ConfigError, ...]
    #: Formatted paths that have an error at them (or a stand-in for an unreadable value).
    faults: frozenset[str]
    #: Bodies whose ``extends`` could not be applied (values it would add are unknown).
    broken: frozenset[PathKey]

    @property
    def names(self) -> tuple[str, ...]:
        """The agents of the file, in file order."""
        return tuple(name for name, _ in self.bodies)

    def prefix(self, name: str) -> PathKey:
        """Where the body of agent ``name`` is in the document."""
        return dict(self.bodies)[name]

    def sound(self, path: PathKey) -> bool:
        """Whether no problem lies at ``path`` or below it (its value can be checked further)."""
        text = format_path(path)
        return not any(_under(fault, text) for fault in self.faults)

    def semantic_errors(self, name: str, *, extra_vars: Iterable[str] = ()) -> list[ConfigError]:
        """The checks a schema cannot make, of the sound parts of agent ``name``."""
        prefix = self.prefix(name)
        return semantic_errors(
            self.document,
            prefix,
            extra_vars=extra_vars,
            team=self.names,
            sound=self.sound,
            vars_known=prefix not in self.broken,
        )

    def workflow_errors(self, *, extra_vars: Iterable[str] = ()) -> list[ConfigError]:
        """The checks a schema cannot make of the team's ``workflow:`` (step references, output fields),
        and its top-level ``tests:`` (they need a workflow)."""
        from runner.agentfile.workflow_checks import workflow_errors  # only files with a workflow pay

        data = self.document.data
        if not self.is_team or ("workflow" not in data and "tests" not in data):
            return []
        return workflow_errors(self.document, bodies=self.bodies, sound=self.sound, extra_vars=extra_vars)


def _bodies(doc: Document, faults: set[str]) -> tuple[tuple[tuple[str, PathKey], ...], list[ConfigError]]:
    """The agents of ``doc``; a team with none left is an error (unless the schema said so)."""
    data = doc.data
    if "agents" not in data:
        name = data.get("name")
        return ((name if isinstance(name, str) and name else doc.path.stem, ()),), []
    agents = data["agents"]
    if not isinstance(agents, dict):
        return (), []
    found = tuple(
        (name, ("agents", name))
        for name, body in agents.items()
        if isinstance(name, str) and not name.startswith("x-") and isinstance(body, dict)
    )
    if found or "agents" in faults:  # an empty `agents:` is the schema's to report
        return found, []
    if any(not str(name).startswith("x-") for name in agents):
        return (), []  # members that are not mappings: the schema reported each
    where = doc.sources.value(("agents",))
    return (), [error_at("the team has no agents (keys starting with x- are ignored)", where, ("agents",))]


def survey_file(path: Path, *, env: Mapping[str, str]) -> Survey:
    """Read, resolve and schema-check ``path``; raises only when the file cannot be read at all."""
    resolved = resolve_all(path, env=env)
    doc = resolved.document
    load_errors = resolved.errors
    faulty = {format_path(p) for p in doc.faulty}
    faulty |= {format_path((*p, "extends")) for p in resolved.broken}  # its error says what is wrong
    broken = {format_path(p) for p in resolved.broken}
    kept: list[ConfigError] = []
    for error in schema_errors(doc.data, doc.sources):
        if any(_under(error.path, fault) for fault in faulty if fault):
            continue  # the value is a stand-in: its own error is already reported
        if error.path in broken and error.message.startswith(_MISSING_KEY):
            continue  # the file it could not extend may have given the key
        kept.append(error)
    faults = {e.path for e in [*load_errors, *kept] if not e.message.startswith(_MISSING_KEY)}
    faults |= {fault for fault in faulty if fault}
    bodies, team_errors = _bodies(doc, faults)
    return Survey(
        path=doc.path,
        document=doc,
        bodies=bodies,
        is_team="agents" in doc.data,
        errors=tuple(sort_errors([*load_errors, *kept, *team_errors])),
        faults=frozenset(faults),
        broken=resolved.broken,
    )


def errors_of(exc: ConfigError) -> list[ConfigError]:
    """The errors a ``ConfigError`` stands for (a ``ConfigErrors`` is several)."""
    return list(exc) if isinstance(exc, ConfigErrors) else [exc]
