"""Where a Python module would come from, found without importing (executing) it or its parents.

``importlib.util.find_spec`` imports the parent packages of a dotted name (running their
``__init__.py``), so each part is looked up here the way the import system does, one level at a time:
every finder of ``sys.meta_path`` (the path finder, editable installs, ...) is asked for the
top-level name with the agent's folder first on ``sys.path``, then for each submodule in the
locations of the package found before it. Nothing is executed. (A package that changes its own
``__path__`` when imported can make the real import find a different file; that is rare.)
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.machinery
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

__all__ = ["ModuleLocation", "locate_module"]

Where = Literal["folder", "repository", "outside", "built-in", "missing"]


@dataclass(frozen=True)
class ModuleLocation:
    """The file a module resolves to, and where that file is."""

    module: str
    file: Path | None
    #: ``folder``: inside the agent's folder; ``repository``: elsewhere in its git repository;
    #: ``outside``: anywhere else; ``built-in``: compiled into Python; ``missing``: not found.
    where: Where
    problem: str | None = None

    @property
    def found(self) -> bool:
        return self.where != "missing"


def _find(name: str, path: list[str] | None) -> importlib.machinery.ModuleSpec | None:
    """The spec of ``name`` from the first finder that knows it (none of them imports anything)."""
    for finder in sys.meta_path:
        find = getattr(finder, "find_spec", None)
        if find is None:
            continue
        try:
            spec = find(name, path)
        except (ImportError, ValueError, OSError, TypeError):
            continue
        if spec is not None:
            return spec
    return None


def _spec_of(name: str, base_dir: Path) -> tuple[importlib.machinery.ModuleSpec | None, str | None]:
    parts = name.split(".")
    if not name or not all(part.isidentifier() for part in parts):
        return None, f"'{name}' is not a module name (write dotted names, no '.py' or '/')"
    entry = str(base_dir)
    sys.path.insert(0, entry)
    try:
        spec = None
        path: list[str] | None = None
        for depth in range(1, len(parts) + 1):
            spec = _find(".".join(parts[:depth]), path)
            if spec is None:
                missing = ".".join(parts[:depth])
                return None, f"no module '{missing}' (looked in {base_dir} and the installed packages)"
            if depth < len(parts):
                locations = spec.submodule_search_locations
                if locations is None:
                    return None, f"'{spec.name}' is a module, not a package: it has no '{parts[depth]}'"
                path = list(locations)
        return spec, None
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(entry)


def _inside(file: Path, folder: Path | None) -> bool:
    return folder is not None and file.is_relative_to(folder)


def locate_module(name: str, base_dir: Path, *, folder: Path, repository: Path | None) -> ModuleLocation:
    """Where ``name`` resolves with ``base_dir`` first on the path, and whether that is in ``folder``."""
    spec, problem = _spec_of(name, base_dir)
    if spec is None:
        return ModuleLocation(name, None, "missing", problem)
    origin = spec.origin if spec.has_location else None
    if origin is None and spec.submodule_search_locations:
        origin = next(iter(spec.submodule_search_locations), None)  # a namespace package: its folder
    if origin is None:
        return ModuleLocation(name, None, "built-in")
    file = Path(origin).resolve()
    if _inside(file, folder.resolve()):
        return ModuleLocation(name, file, "folder")
    if repository is not None and _inside(file, repository.resolve()):
        return ModuleLocation(name, file, "repository")
    return ModuleLocation(name, file, "outside")


def invalidate() -> None:
    """Forget the finders' directory listings (files written a moment ago are found)."""
    importlib.invalidate_caches()
