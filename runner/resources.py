"""Files that ship with the package: the JSON Schemas and the packaged agents.

In a wheel they live in ``runner/_data/`` (hatch force-includes ``schemas/`` and ``agents/``
there); in a checkout or an editable install they are read from the repository root.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

__all__ = ["data_dir", "load_schema", "packaged_agents_dir", "schema_path", "schema_text"]

_PACKAGE_DIR = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    """The directory of packaged data ``name`` (``schemas`` or ``agents``)."""
    packaged = _PACKAGE_DIR / "_data" / name
    if packaged.is_dir():
        return packaged
    return _PACKAGE_DIR.parent / name


def schema_path(name: str = "agent") -> Path:
    """Path of ``schemas/<name>.schema.json``."""
    return data_dir("schemas") / f"{name}.schema.json"


@cache
def schema_text(name: str = "agent") -> str:
    """The exact text of a schema file, as ``runner schema`` prints it."""
    return schema_path(name).read_text(encoding="utf-8")


@cache
def load_schema(name: str = "agent") -> dict[str, Any]:
    """A schema parsed as JSON (cached: treat it as read-only)."""
    result: dict[str, Any] = json.loads(schema_text(name))
    return result


def packaged_agents_dir() -> Path:
    """Where the ready-made agents that ship with the package are."""
    return data_dir("agents")
