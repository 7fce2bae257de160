"""Importing user modules (``python:`` tools and hooks) with the agent's folder first on sys.path."""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from pathlib import Path
from types import ModuleType

from runner.agentfile.revisions import Revision, revision_of
from runner.errors import ConfigError

__all__ = ["import_module", "resolve_callable"]

#: The runner's own packages: never re-imported from an agent's tree.
_OWN = frozenset({"runner", "toolsets"})


def _stale(module: ModuleType, base_dir: Path, name: str) -> bool:
    """A cached module of the same name that lives elsewhere than ``base_dir`` would shadow ours."""
    local = base_dir / (name.split(".")[0])
    if not (local.with_suffix(".py").is_file() or (local / "__init__.py").is_file()):
        return False
    file = getattr(module, "__file__", None)
    return file is None or not Path(file).resolve().is_relative_to(base_dir.resolve())


def _drop(top: str) -> None:
    for key in [k for k in sys.modules if k == top or k.startswith(top + ".")]:
        del sys.modules[key]


def _forget_other_trees(base_dir: Path, *, at_revision: bool) -> None:
    """Forget cached modules that ``base_dir`` also holds but that were imported from elsewhere, so
    a tool's own imports (its helpers) come from the same tree as the tool: at a revision, any such
    module (the work tree's, another revision's); in the work tree, those of a revision's tree."""
    try:
        names = {p.stem if p.suffix == ".py" else p.name for p in base_dir.iterdir()}
    except OSError:
        return
    for top in names - _OWN:
        module = sys.modules.get(top)
        if module is None or not _stale(module, base_dir, top):
            continue
        file = getattr(module, "__file__", None)
        if at_revision or (file is not None and revision_of(Path(file)) is not None):
            _drop(top)


def _check_committed(module: ModuleType, name: str, revision: Revision) -> None:
    """A module imported for an agent at a revision must not come from the work tree."""
    file = getattr(module, "__file__", None)
    if file is None:
        return
    where = Path(file).resolve()
    installed = {"site-packages", "dist-packages"} & set(where.parts)
    if installed or name.split(".")[0] in _OWN or where.is_relative_to(revision.root.resolve()):
        return
    other = revision_of(where)
    if other is not None:  # cached from another revision's tree: not this revision's module
        raise ConfigError(
            f"module '{name}' is not in the repository at revision '{revision.rev}' "
            f"({revision.commit[:12]}): the one loaded comes from revision {other.commit[:12]}",
            hint="commit the module at this revision",
        )
    for local in (revision.work_tree, Path.cwd().resolve()):
        if local is not None and where.is_relative_to(local):
            raise ConfigError(
                f"module '{name}' is not in the repository at revision '{revision.rev}' "
                f"({revision.commit[:12]}): only the work tree has it ({where})",
                hint="commit the module, or run without --rev",
            )


def import_module(name: str, base_dir: Path, *, reload: bool = False) -> ModuleType:
    """Import ``name`` with ``base_dir`` first on ``sys.path``; failures become ``ConfigError``.

    ``reload`` imports an already imported module again (hot reload: edited code takes effect).
    Below a revision's tree (``--rev``), modules come from that tree, never from the work tree.
    """
    revision = revision_of(base_dir / "_")
    _forget_other_trees(base_dir, at_revision=revision is not None)
    writes = sys.dont_write_bytecode
    sys.dont_write_bytecode = writes or revision is not None  # a revision's tree holds only the commit
    try:
        module = _import(name, base_dir, reload=reload)
    finally:
        sys.dont_write_bytecode = writes
    if revision is not None:
        _check_committed(module, name, revision)
    return module


def _import(name: str, base_dir: Path, *, reload: bool) -> ModuleType:
    cached = sys.modules.get(name)
    if cached is not None and _stale(cached, base_dir, name):
        for key in [k for k in sys.modules if k == name or k.startswith(name.split(".")[0] + ".")]:
            del sys.modules[key]
        sys.modules.pop(name.split(".")[0], None)
        cached = None
    hint = f"looked in {base_dir} and the installed packages"
    if name.endswith(".py") or "/" in name or "\\" in name:
        dotted = name.removesuffix(".py").replace("/", ".").replace("\\", ".")
        hint = f"write a module path with dots and no '.py', e.g. {dotted!r}"
    entry = str(base_dir)
    sys.path.insert(0, entry)
    try:
        if cached is not None and reload:
            _forget_bytecode(cached)
            return importlib.reload(cached)
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if name == missing or name.startswith(missing + "."):
            raise ConfigError(f"cannot import module '{name}': no such module", hint=hint) from None
        raise ConfigError(
            f"importing '{name}' failed: it imports '{missing}', which is not installed",
            hint=f"install the package that provides '{missing}'",
        ) from None
    except SyntaxError as exc:
        where = f" ({Path(exc.filename or '?').name}:{exc.lineno})" if exc.lineno else ""
        raise ConfigError(f"importing '{name}' failed: syntax error{where}: {exc.msg}") from None
    except (Exception, SystemExit) as exc:
        raise ConfigError(f"importing '{name}' failed: {type(exc).__name__}: {exc}") from None
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(entry)


def _forget_bytecode(module: ModuleType) -> None:
    """Remove the bytecode cached for ``module``'s source before a hot reload reads it again: Python
    judges that cache fresh by the source's size and modification time in whole seconds, so an edit
    made within the same second that keeps the size (``return 1`` -> ``return 2``) would be missed."""
    import importlib.util

    source = getattr(module, "__file__", None)
    if not source or not source.endswith(".py"):
        return
    with contextlib.suppress(OSError, NotImplementedError, ValueError):
        os.remove(importlib.util.cache_from_source(source))


def resolve_callable(target: str, base_dir: Path) -> object:
    """The object named by ``module:attribute``; a missing attribute gets a suggestion."""
    module_name, _, attribute = target.partition(":")
    module = import_module(module_name, base_dir)
    if not attribute:
        return module
    try:
        return getattr(module, attribute)
    except AttributeError:
        import difflib

        public = [n for n in dir(module) if not n.startswith("_") and callable(getattr(module, n))]
        close = difflib.get_close_matches(attribute, public, n=1)
        raise ConfigError(
            f"module '{module_name}' has no function '{attribute}'"
            + (f" (did you mean '{close[0]}'?)" if close else "")
        ) from None
