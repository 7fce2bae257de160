"""The files an agent is made of, and one fingerprint of them all.

``watched_files(spec)``: the agent file and its ``extends`` chain, its template files, its output
schema file, and the Python files of its ``python:`` tools, hooks and output model under the
agent's folder (what ``--watch`` watches). ``fingerprint(spec)``: the sha256 of those files' paths
and contents, the "configuration hash" a transcript records for each turn: a turn's behaviour is
what these files said when it ran.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import sys
from pathlib import Path

from runner.agentfile.config import AgentConfig
from runner.agentfile.files import load_file
from runner.errors import ConfigError

__all__ = ["fingerprint", "watched_files"]


def _module_file(target: str, base_dir: Path) -> Path | None:
    module = target.partition(":")[0]
    sys.path.insert(0, str(base_dir))
    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(str(base_dir))
    if found is None or not found.origin or found.origin in ("built-in", "frozen"):
        return None
    return Path(found.origin).resolve()


def watched_files(spec: AgentConfig) -> set[Path]:
    """The files ``spec`` is made of, whose change should reload it: the agent file and its
    ``extends`` chain, its template files and schema file, its skills' ``SKILL.md`` files, and the
    Python files of its tools, hooks and ``output:`` model that live in the agent's folder (never
    site-packages)."""
    files = {spec.path.resolve()}
    try:
        document = load_file(spec.path).document
        files |= {Path(info.file).resolve() for info in document.sources.entries.values()}
    except ConfigError:
        pass  # an invalid file is still watched by its own path
    if spec.output is not None and spec.output.file is not None:
        files.add(spec.output.file.resolve())
    files |= {skill.file.resolve() for skill in spec.skills}
    prompts = spec.prompts
    for template in (prompts.system, prompts.user, prompts.status, prompts.tool_selection):
        if template is not None and template.file is not None:
            files.add(template.file.resolve())
    root = spec.directory.resolve()
    targets = [(s.target, s.base_dir) for s in spec.tools if s.kind == "python"]
    targets += [(h.value, h.base_dir) for chain in spec.hooks.values() for h in chain if h.kind == "python"]
    if spec.output is not None and spec.output.python is not None:
        targets.append((spec.output.python, spec.output.base_dir))
    for target, base_dir in targets:
        path = _module_file(target, base_dir)
        if (
            path is not None
            and "site-packages" not in path.parts
            and (path.is_relative_to(root) or path.is_relative_to(base_dir.resolve()))
        ):
            files.add(path)
    return files


def fingerprint(spec: AgentConfig) -> str:
    """The sha256 of the files ``spec`` is made of (paths relative to its folder, and contents)."""
    digest = hashlib.sha256()
    root = spec.directory.resolve()
    for path in sorted(watched_files(spec)):
        try:
            data = path.read_bytes()
        except OSError:
            data = b"(unreadable)"
        name = str(path.relative_to(root)) if path.is_relative_to(root) else str(path)
        digest.update(f"{name}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()
