"""docs/architecture.md's "Front doors" table names every protocol door ``runner serve`` opens."""

from __future__ import annotations

import importlib.util
import inspect
import re
from pathlib import Path

from runner.serve import doors

ROOT = Path(__file__).resolve().parents[2]


def _front_doors_table() -> str:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("## Front doors", 1)[1].split("\n## ", 1)[0]
    return "\n".join(line for line in section.splitlines() if line.startswith("|"))


def _where(module: str) -> str:
    """How the table names a door module: its package (``serve/a2a/``) or its file (``serve/metrics.py``)."""
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None, module
    path = Path(spec.origin).relative_to(ROOT / "runner")
    if path.name in ("__init__.py", "door.py"):
        return f"{path.parent.as_posix()}/"
    return path.as_posix()


def test_every_door_of_runner_serve_has_a_row_in_the_architecture_table() -> None:
    modules = re.findall(r"from (runner\.serve\.[\w.]+) import door", inspect.getsource(doors.open_doors))
    assert len(modules) >= 4, modules  # responses, mcp, a2a, metrics
    table = _front_doors_table()
    for module in modules:
        where = _where(module)
        assert where in table, f"{module}: no row of docs/architecture.md's Front doors table names {where}"
