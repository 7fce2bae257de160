"""Which YAML files under a folder are agents, for ``runner validate DIR`` and ``runner serve DIR``.

A folder holds more YAML than agents: scripts of a scripted model, fragments that agents
``extends``. A file is not an agent when its top level has no ``version:`` key (and no ``name:``
or ``agents:``, which make it an agent that forgot its version), or when another file found
extends it and it names no agent of its own (no ``name:``, no ``agents:``). Such files are skipped
with a reason; every other file is an agent and is checked (a broken one is reported).
Only the top-level keys are read here, without ``${VAR}`` interpolation: a file that cannot be
read that far is taken as an agent, so that its error is reported.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from runner.agentfile.interpolate import Interpolator
from runner.agentfile.yamlsrc import compose, read_text
from runner.errors import ConfigError

__all__ = [
    "AGENT_SUFFIXES",
    "NO_VERSION",
    "ONLY_EXTENDED",
    "SKIPPED_DIRS",
    "Discovered",
    "discover",
    "search_folder",
    "skipped_note",
    "top_level",
]

AGENT_SUFFIXES = (".yaml", ".yml")
#: Folders a directory search never enters (environments, dependencies, caches).
SKIPPED_DIRS = frozenset({"node_modules", "__pycache__", "venv", "site-packages"})

#: Why a file is not an agent.
NO_VERSION = "no version:"
ONLY_EXTENDED = "only extended by other files"


#: Top-level keys that make a file an agent (or a team).
_NAMING_KEYS = frozenset({"name", "agents"})


@dataclass(frozen=True)
class TopLevel:
    """The top-level keys of a YAML file and the files its ``extends`` name (resolved)."""

    keys: frozenset[str]
    extends: tuple[Path, ...] = ()

    @property
    def unversioned(self) -> bool:
        """No ``version:`` and nothing that names an agent: not meant as an agent file."""
        return "version" not in self.keys and not self.keys & _NAMING_KEYS

    @property
    def names_an_agent(self) -> bool:
        """Whether it has ``name:`` or ``agents:``."""
        return bool(self.keys & _NAMING_KEYS)


@dataclass(frozen=True)
class Discovered:
    """The agent files among the files looked at, and the others with why they are not agents."""

    agents: list[Path] = field(default_factory=list)
    skipped: dict[Path, str] = field(default_factory=dict)


def search_folder(folder: Path) -> list[Path]:
    """The ``.yaml``/``.yml`` files under ``folder``, hidden folders and environments left out."""
    return sorted(
        p
        for p in folder.rglob("*")
        if p.suffix in AGENT_SUFFIXES
        and not any(part.startswith(".") or part in SKIPPED_DIRS for part in p.relative_to(folder).parts)
        and p.is_file()
    )


def _extends_target(node: yaml.Node, origin: Path, env: Mapping[str, str]) -> Path | None:
    if not isinstance(node, yaml.ScalarNode) or not node.value.strip():
        return None
    text = str(node.value)
    if "$" in text:
        try:
            text = str(Interpolator(env).expand(text, (), plain=False))
        except ConfigError:
            return None
    try:
        return (origin.parent / text).resolve()
    except (OSError, RuntimeError, ValueError):
        return None


def top_level(path: Path, *, env: Mapping[str, str]) -> TopLevel | None:
    """The top-level keys of ``path`` and what it extends; None when it cannot be read as YAML.

    A file that is empty, or whose top level is not a mapping, has no keys.
    """
    try:
        text = read_text(path)
    except ConfigError as exc:
        if exc.message.startswith("file is empty"):
            return TopLevel(frozenset())
        return None
    try:
        node = compose(text, str(path))
    except ConfigError:
        return None
    if not isinstance(node, yaml.MappingNode):
        return TopLevel(frozenset())
    keys: set[str] = set()
    extends: list[Path] = []
    for key, value in node.value:
        if not isinstance(key, yaml.ScalarNode):
            continue
        keys.add(str(key.value))
        if key.value == "extends":
            extends.append(_extends_target(value, path, env) or path)
        elif key.value == "agents" and isinstance(value, yaml.MappingNode):
            for _key, member in value.value:
                if not isinstance(member, yaml.MappingNode):
                    continue
                for sub_key, sub_value in member.value:
                    if isinstance(sub_key, yaml.ScalarNode) and sub_key.value == "extends":
                        extends.append(_extends_target(sub_value, path, env) or path)
    return TopLevel(frozenset(keys), tuple(p for p in extends if p != path))


def discover(files: Iterable[Path], *, env: Mapping[str, str]) -> Discovered:
    """Split ``files`` (found in folders) into agents and files that are not agents."""
    paths = list(dict.fromkeys(files))
    tops = {p: top_level(p, env=env) for p in paths}
    extended = {target for top in tops.values() if top is not None for target in top.extends}
    found = Discovered()
    for path in paths:
        top = tops[path]
        if top is not None and top.unversioned:
            found.skipped[path] = NO_VERSION
        elif top is not None and path.resolve() in extended and not top.names_an_agent:
            found.skipped[path] = ONLY_EXTENDED
        else:
            found.agents.append(path)
    return found


def skipped_note(skipped: Mapping[Path, str], *, show: Callable[[Path], str] = str) -> str | None:
    """One line naming the skipped files by reason, or None when there are none.

    ``skipped 6 files that are not agents: a.yaml, b.yaml (no version:); base.yaml (only extended
    by other files)``; ``show`` says how a path is printed.
    """
    if not skipped:
        return None
    by_reason: dict[str, list[str]] = {}
    for path, reason in skipped.items():
        by_reason.setdefault(reason, []).append(show(path))
    groups = "; ".join(f"{', '.join(names)} ({reason})" for reason, names in by_reason.items())
    what = "1 file that is not an agent" if len(skipped) == 1 else f"{len(skipped)} files that are not agents"
    return f"skipped {what}: {groups}"
