"""Loading an agent file: ``extends`` chains, team files, and the source map of the result.

``resolve(path)`` reads a file and every file it extends, deep-merges them (mappings merge,
but ``output:`` is replaced whole; lists and scalars replace) and returns one ``Document``
whose source map says, for every value, which file and line wrote it. Team files (``agents:``)
resolve each member's ``extends`` too.
``resolve_all`` does the same but hands back the problems it could read past, with the bodies
whose ``extends`` could not be applied, so that ``runner validate`` can check everything else.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.agentfile.revisions import confine
from runner.agentfile.yamlsrc import Document, PathKey, SourceMap, error_at, read_document
from runner.errors import ConfigError, ConfigErrors

__all__ = [
    "MAX_EXTENDS_DEPTH",
    "MAX_PATH_CHARS",
    "Explained",
    "Resolved",
    "explain",
    "resolve",
    "resolve_all",
]

MAX_EXTENDS_DEPTH = 16
#: Longer ``extends`` paths are refused (operating systems allow 1024 to 4096 bytes).
MAX_PATH_CHARS = 4096


@dataclass(frozen=True)
class Explained:
    """Which file set one top-level value (``runner validate --explain``)."""

    key: str
    file: str
    line: int


@dataclass(frozen=True)
class Resolved:
    """A document with its ``extends`` applied, the problems met on the way, and what they broke."""

    document: Document
    errors: list[ConfigError]
    #: Bodies (``()`` or ``("agents", NAME)``) whose ``extends`` failed: they lack what it would add.
    broken: frozenset[PathKey]


def _merge(base: Any, child: Any, sources: SourceMap, child_sources: SourceMap, path: PathKey) -> Any:
    """Deep-merge ``child`` over ``base`` at ``path``, updating ``sources`` in place.

    ``output:`` is replaced whole: a schema merged key by key with another is neither of them.
    """
    if isinstance(base, dict) and isinstance(child, dict) and not _replaced(path):
        merged = dict(base)
        info = child_sources.entries.get(path)
        if info is not None and path:
            sources.entries[path] = info
        for key, value in child.items():
            sub = (*path, key)
            if key in merged:
                merged[key] = _merge(merged[key], value, sources, child_sources, sub)
            else:
                merged[key] = value
                sources.entries.update(child_sources.subtree(sub))
        return merged
    sources.drop_subtree(path)
    sources.entries.update(child_sources.subtree(path))
    return child


def _replaced(path: PathKey) -> bool:
    """Whether the value at ``path`` (an agent body's key, or a team member's) replaces, never merges."""
    return path in (("output",),) or (len(path) == 3 and path[0] == "agents" and path[2] == "output")


def _extends_of(doc: Document, prefix: PathKey) -> tuple[Path, PathKey] | None:
    body = _get(doc.data, prefix)
    if not isinstance(body, dict) or "extends" not in body:
        return None
    where = (*prefix, "extends")
    target = body["extends"]
    if not isinstance(target, str) or not target.strip():
        raise error_at("extends must be a path to another agent file", doc.sources.value(where), where)
    info = doc.sources.value(where)
    problem = _bad_path(target)
    if problem:
        raise error_at(f"extends must be a path to another agent file: {problem}", info, where)
    origin = Path(info.file) if info is not None else doc.path
    try:
        resolved = (origin.parent / target).resolve()
    except (OSError, RuntimeError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise error_at(f"extends names a path that cannot be used: {reason}", info, where) from None
    try:
        confine(origin, resolved, what="extends")
    except ConfigError as exc:
        raise error_at(exc.message, info, where, hint=exc.hint) from None
    return resolved, where


def _bad_path(target: str) -> str | None:
    """Why ``target`` cannot name a file on any system, or None."""
    if "\x00" in target:
        return "it contains a NUL character"
    if len(target) > MAX_PATH_CHARS:
        return f"it is {len(target):,} characters long (the limit is {MAX_PATH_CHARS})"
    if any(ord(c) < 32 for c in target):
        return "it contains a control character"
    return None


def _get(data: Any, path: PathKey) -> Any:
    for part in path:
        data = data[part]
    return data


def _errors_of(exc: ConfigError) -> list[ConfigError]:
    return list(exc) if isinstance(exc, ConfigErrors) else [exc]


def _resolve_body(
    doc: Document, prefix: PathKey, env: Mapping[str, str], chain: tuple[Path, ...]
) -> list[ConfigError]:
    """Apply the ``extends`` chain of the body at ``prefix`` of ``doc``, in place.

    Returns the problems of the extended files that left them readable; raises when the chain
    cannot be applied at all.
    """
    found = _extends_of(doc, prefix)
    if found is None:
        return []
    target, where = found
    info = doc.sources.value(where)
    if target in chain:
        cycle = " -> ".join(p.name for p in (*chain, target))
        raise error_at(f"extends cycle: {cycle}", info, where)
    if len(chain) > MAX_EXTENDS_DEPTH:
        raise error_at(f"extends chain deeper than {MAX_EXTENDS_DEPTH} files", info, where)
    try:
        is_file = target.is_file()
        folder = not is_file and target.is_dir()
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise error_at(f"cannot use the extends path: {reason}", info, where) from None
    if folder:
        raise error_at(f"extends names a directory, not an agent file: {_get(doc.data, where)}", info, where)
    if not is_file:
        raise error_at(f"no such file: {_get(doc.data, where)}", info, where, hint=f"looked for {target}")
    note = error_at(f"in the file this extends ({target.name})", info, where)
    try:
        base, problems = read_document(target, env=env)
        problems += _resolve_body(base, (), env, (*chain, target))
    except ConfigError as exc:
        raise ConfigErrors([*_errors_of(exc), note]) from None
    if "agents" in base.data:
        raise error_at("extends must name a single-agent file, not a team file", info, where)
    _graft(doc, prefix, base)
    return [*problems, note] if problems else []


def _graft(doc: Document, prefix: PathKey, base: Document) -> None:
    """Merge the body at ``prefix`` of ``doc`` over ``base`` (a resolved file it extends)."""
    body = _get(doc.data, prefix)
    child = {k: v for k, v in body.items() if k != "extends"}
    if prefix:  # a team member: the base's `version` belongs to the base file, its name is the key
        for key in ("version", "name"):
            base.data.pop(key, None)
            base.sources.drop_subtree((key,))
    rebased = SourceMap({(*prefix, *p): i for p, i in base.sources.entries.items() if p})
    child_map = SourceMap(doc.sources.subtree(prefix))
    child_map.drop_subtree((*prefix, "extends"))
    doc.sources.drop_subtree(prefix)
    doc.sources.entries.update(rebased.entries)
    if prefix in child_map.entries:
        doc.sources.entries[prefix] = child_map.entries[prefix]
    merged = _merge(base.data, child, doc.sources, child_map, prefix)
    if prefix:
        _get(doc.data, prefix[:-1])[prefix[-1]] = merged
    else:
        doc.data = merged
    doc.secrets |= base.secrets
    doc.interpolated |= {(*prefix, *p) for p in base.interpolated}
    doc.faulty |= {(*prefix, *p) for p in base.faulty}


def resolve(path: Path, *, env: Mapping[str, str]) -> Document:
    """Read ``path`` and apply ``extends`` (of the file, or of each member of a team file)."""
    resolved = resolve_all(path, env=env)
    if resolved.errors:
        raise ConfigErrors(resolved.errors)
    return resolved.document


def resolve_all(path: Path, *, env: Mapping[str, str]) -> Resolved:
    """``resolve`` that reads past every problem it can; raises only when nothing can be read."""
    path = path.resolve()
    doc, errors = read_document(path, env=env)
    bodies: list[PathKey] = [()]
    if isinstance(doc.data.get("agents"), dict):
        bodies = [
            ("agents", name)
            for name, body in doc.data["agents"].items()
            if isinstance(body, dict) and not (isinstance(name, str) and name.startswith("x-"))
        ]
    broken: set[PathKey] = set()
    for prefix in bodies:
        try:
            errors += _resolve_body(doc, prefix, env, (path,))
        except ConfigError as exc:
            errors += _errors_of(exc)
            broken.add(prefix)
    return Resolved(doc, errors, frozenset(broken))


def explain(doc: Document, prefix: PathKey = ()) -> list[Explained]:
    """For each top-level value of the body at ``prefix``, the file and line that set it."""
    body = _get(doc.data, prefix)
    rows = []
    for key in body:
        info = doc.sources.key((*prefix, key))
        if info is not None:
            rows.append(Explained(key, info.file, info.line))
    return rows
