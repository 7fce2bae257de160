"""Every ``${VAR}`` an agent file and the files it extends read, found without expanding any of them.

The loader expands every string value of the file (all members of a team file) and of each file in
its ``extends`` chains, so those are the files scanned. ``$${`` is a literal ``${`` and reads nothing.
Values are never kept: only the names, whether each has a default, and which files name it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

__all__ = ["VariableUse", "scan_variables"]

_TOKEN = re.compile(r"\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)(:-[^}]*)?\}")
#: Before and after a reference that sits in a URL's password (``https://user:${PASS}@host``).
_BEFORE_PASSWORD = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s/?#@:'\"<>]*:[^\s/?#'\"<>]*\Z")
_AFTER_PASSWORD = re.compile(r"[^\s/?#'\"<>]*@")
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
#: Longer chains are refused by the loader; the scan stops there too.
_MAX_FILES = 64


@dataclass
class VariableUse:
    """One variable: whether every reference to it has a default, and the files that name it."""

    name: str
    defaulted: bool
    files: list[Path]
    #: Some reference to it is the password of a URL: its value is a secret whatever its name.
    password: bool = False


def _in_password(text: str, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` is inside the password of a URL's userinfo."""
    before = text[max(0, start - 2000) : start]
    return _BEFORE_PASSWORD.search(before) is not None and _AFTER_PASSWORD.match(text, end) is not None


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _extends(data: Any) -> list[str]:
    """The ``extends`` targets of a file: its own, or each team member's."""
    if not isinstance(data, dict):
        return []
    bodies = list(data["agents"].values()) if isinstance(data.get("agents"), dict) else [data]
    return [b["extends"] for b in bodies if isinstance(b, dict) and isinstance(b.get("extends"), str)]


def scan_variables(path: Path, read_text: Callable[[Path], str]) -> list[VariableUse]:
    """The variables ``path`` and its ``extends`` chain read, in the order first met."""
    found: dict[str, VariableUse] = {}
    todo, seen = [path.resolve()], set[Path]()
    while todo and len(seen) < _MAX_FILES:
        file = todo.pop(0)
        if file in seen:
            continue
        seen.add(file)
        try:
            data = yaml.load(read_text(file), Loader=_Loader)
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            continue  # the loader reported it already; nothing more to learn here
        for text in _strings(data):
            for match in _TOKEN.finditer(text):
                if match.group(0) == "$${":
                    continue
                name, default = match.group(1), match.group(2) is not None
                use = found.setdefault(name, VariableUse(name, default, []))
                use.defaulted = use.defaulted and default
                use.password = use.password or _in_password(text, match.start(), match.end())
                if file not in use.files:
                    use.files.append(file)
        todo += [(file.parent / target).resolve() for target in _extends(data) if "${" not in target]
    return list(found.values())
