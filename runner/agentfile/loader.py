"""Loading an agent file: ``extends`` chains, team files, and the source map of the result.

``resolve(path)`` reads a file and every file it extends, deep-merges them (mappings merge;
lists and scalars replace) and returns one ``Document`` whose source map says, for every value,
which file and line wrote it. Team files (``agents:``) resolve each member's ``extends`` too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.agentfile.yamlsrc import Document, PathKey, SourceMap, error_at, load_document
from runner.errors import ConfigError, ConfigErrors

__all__ = ["MAX_EXTENDS_DEPTH", "MAX_PATH_CHARS", "Explained", "explain", "resolve"]

MAX_EXTENDS_DEPTH = 16
#: Longer ``extends`` paths are refused (operating systems allow 1024 to 4096 bytes).
MAX_PATH_CHARS = 4096


@dataclass(frozen=True)
class Explained:
    """Which file set one top-level value (``runner validate --explain``)."""

    key: str
    file: str
    line: int


def _merge(base: Any, child: Any, sources: SourceMap, child_sources: SourceMap, path: PathKey) -> Any:
    """Deep-merge ``child`` over ``base`` at ``path``, updating ``sources`` in place."""
    if isinstance(base, dict) and isinstance(child, dict):
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
        return (origin.parent / target).resolve(), where
    except (OSError, RuntimeError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise error_at(f"extends names a path that cannot be used: {reason}", info, where) from None


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


def _resolve_body(doc: Document, prefix: PathKey, env: Mapping[str, str], chain: tuple[Path, ...]) -> None:
    """Apply the ``extends`` chain of the body at ``prefix`` of ``doc``, in place."""
    found = _extends_of(doc, prefix)
    if found is None:
        return
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
    try:
        base = load_document(target, env=env)
        _resolve_body(base, (), env, (*chain, target))
    except ConfigError as exc:
        errors = list(exc) if isinstance(exc, ConfigErrors) else [exc]
        note = error_at(f"in the file this extends ({target.name})", info, where)
        raise ConfigErrors([*errors, note]) from None
    if "agents" in base.data:
        raise error_at("extends must name a single-agent file, not a team file", info, where)
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


def resolve(path: Path, *, env: Mapping[str, str]) -> Document:
    """Read ``path`` and apply ``extends`` (of the file, or of each member of a team file)."""
    path = path.resolve()
    doc = load_document(path, env=env)
    if isinstance(doc.data.get("agents"), dict):
        errors: list[ConfigError] = []
        for name, body in doc.data["agents"].items():
            if isinstance(body, dict) and not name.startswith("x-"):
                try:
                    _resolve_body(doc, ("agents", name), env, (path,))
                except ConfigErrors as exc:
                    errors.extend(exc)
                except ConfigError as exc:
                    errors.append(exc)
        if errors:
            raise ConfigErrors(errors)
    else:
        _resolve_body(doc, (), env, (path,))
    return doc


def explain(doc: Document, prefix: PathKey = ()) -> list[Explained]:
    """For each top-level value of the body at ``prefix``, the file and line that set it."""
    body = _get(doc.data, prefix)
    rows = []
    for key in body:
        info = doc.sources.key((*prefix, key))
        if info is not None:
            rows.append(Explained(key, info.file, info.line))
    return rows
