"""Read a tool's description and parameter descriptions out of its docstring (reST or Google style)."""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field

__all__ = ["ParsedDocstring", "parse_docstring"]

_REST_FIELD = re.compile(r"^:(\w+)(?:\s+([^:]*?))?:\s*(.*)$")
_GOOGLE_SECTION = re.compile(r"^(\w[\w ]*):\s*$")
_GOOGLE_ARG_SECTIONS = frozenset({"args", "arguments", "parameters", "params", "keyword args", "kwargs"})
_GOOGLE_SECTIONS = _GOOGLE_ARG_SECTIONS | {
    "returns",
    "return",
    "raises",
    "yields",
    "examples",
    "example",
    "notes",
}
_GOOGLE_ARG = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


@dataclass(frozen=True)
class ParsedDocstring:
    """The first paragraph of a docstring and the description of each documented parameter."""

    description: str = ""
    params: dict[str, str] = field(default_factory=dict)


def parse_docstring(doc: str | None) -> ParsedDocstring:
    """Split a docstring into its first paragraph and its ``:param x:`` / ``Args:`` entries."""
    if not doc:
        return ParsedDocstring()
    lines = inspect.cleandoc(doc).splitlines()
    params: dict[str, str] = {}
    _read_rest_params(lines, params)
    _read_google_params(lines, params)
    return ParsedDocstring(description=_first_paragraph(lines), params=params)


def _first_paragraph(lines: list[str]) -> str:
    paragraph: list[str] = []
    for line in lines:
        stripped = line.strip()
        if not stripped:
            if paragraph:
                break
            continue
        if stripped.startswith(":") or _is_google_section(stripped):
            break
        paragraph.append(stripped)
    return " ".join(paragraph)


def _is_google_section(stripped: str) -> bool:
    match = _GOOGLE_SECTION.match(stripped)
    return match is not None and match.group(1).lower() in _GOOGLE_SECTIONS


def _read_rest_params(lines: list[str], params: dict[str, str]) -> None:
    """``:param x: text`` and ``:param int x: text``, with indented continuation lines."""
    current: str | None = None
    for line in lines:
        stripped = line.strip()
        match = _REST_FIELD.match(stripped)
        if match:
            current = None
            kind, words, text = match.groups()
            if kind in ("param", "parameter", "arg", "argument", "key", "keyword") and words:
                name = words.split()[-1]
                params[name] = text.strip()
                current = name
            continue
        if current is not None and stripped and line[:1].isspace():
            params[current] = f"{params[current]} {stripped}".strip()
        else:
            current = None


def _read_google_params(lines: list[str], params: dict[str, str]) -> None:
    """``Args:`` sections: ``name (type): text`` entries, continuation lines indented further."""
    in_section = False
    entry_indent = -1
    current: str | None = None
    for line in lines:
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if not in_section:
            match = _GOOGLE_SECTION.match(stripped)
            if match and match.group(1).lower() in _GOOGLE_ARG_SECTIONS:
                in_section, entry_indent, current = True, -1, None
            continue
        if not stripped:
            continue
        if indent == 0:
            in_section = False
            match = _GOOGLE_SECTION.match(stripped)
            if match and match.group(1).lower() in _GOOGLE_ARG_SECTIONS:
                in_section, entry_indent, current = True, -1, None
            continue
        if entry_indent < 0:
            entry_indent = indent
        if indent <= entry_indent:
            arg = _GOOGLE_ARG.match(stripped)
            current = None
            if arg is not None and arg.group(1) not in params:  # a reST entry for the same name wins
                current = arg.group(1)
                params[current] = arg.group(2).strip()
        elif current is not None:
            params[current] = f"{params[current]} {stripped}".strip()
