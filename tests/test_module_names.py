"""The module names issue 24 found overloaded name one module each (``models``, ``record``,
``output``, ``settings``), so that an import says which one it means."""

from __future__ import annotations

from pathlib import Path

import runner

PACKAGE = Path(runner.__file__).resolve().parent
NAMES = ("models", "record", "output", "settings")
#: Modules still to rename (in packages being reworked by issue 24's runnable layer); remove an entry
#: when its module is renamed.
PENDING = {"batch/pooled_model.py", "batch/item_result.py"}


def _modules_named(name: str) -> list[str]:
    found = [
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob(f"{name}.py")
        if "__pycache__" not in path.parts
    ]
    found += [path.relative_to(PACKAGE).as_posix() + "/" for path in PACKAGE.rglob(name) if path.is_dir()]
    return sorted(module for module in found if module not in PENDING)


def test_each_overloaded_name_names_one_module() -> None:
    for name in NAMES:
        modules = _modules_named(name)
        assert len(modules) <= 1, f"'{name}' names {len(modules)} modules: {', '.join(modules)}"


def test_the_pending_renames_are_still_pending() -> None:
    for module in PENDING:
        assert (PACKAGE / module).is_file(), f"{module} is gone: remove it from PENDING"
