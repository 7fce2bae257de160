"""Text that can always be written: lone surrogates replaced (issue 12). Imports nothing internal.

A Python ``str`` can hold a lone surrogate (``"\\udcff"``): JSON's ``\\udcff`` escape decodes to one,
and so do undecodable bytes read with ``surrogateescape``. Such a string cannot be encoded as UTF-8,
so a model reply, a tool result or a client message holding one would crash the first write
(stdout, a transcript, a request body). Every boundary where outside text comes in passes it
through ``valid_text`` / ``valid_record``, and every writer falls back to them: a lone surrogate
becomes U+FFFD, the replacement character; a proper surrogate pair becomes the character it encodes.
"""

from __future__ import annotations

from typing import Any, TypeVar

__all__ = ["counted", "one_line", "utf8", "valid_record", "valid_text"]

T = TypeVar("T")


def valid_text(text: str) -> str:
    """``text`` unchanged when it encodes as UTF-8, else with each lone surrogate replaced."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def counted(count: int, word: str, plural: str | None = None) -> str:
    """``1 step``, ``2 steps``; ``plural`` when adding an s will not do (``entry`` -> ``entries``)."""
    return f"{count:,} {word if count == 1 else plural or word + 's'}"


def one_line(text: str, limit: int, *, words: bool = False) -> str:
    """``text`` on one line (runs of whitespace made one space), cut to ``limit`` with ``...``;
    ``words``: cut after the last whole word that fits (mid-word only when one word fills most of it)."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    kept = text[: limit - 3]
    if words and text[limit - 3] != " ":
        space = kept.rfind(" ")
        if space >= limit // 2:
            kept = kept[:space]
    return (kept.rstrip() if words else kept) + "..."


def utf8(text: str) -> bytes:
    """``text`` as UTF-8, lone surrogates written as U+FFFD (never a ``UnicodeEncodeError``)."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return valid_text(text).encode("utf-8")


def valid_record(value: T) -> T:
    """``value`` (JSON-like: dicts, lists, strings) with every string made valid; the same object
    when nothing needed a change."""
    fixed = _fixed(value)
    return value if fixed is None else fixed


def _fixed(value: Any) -> Any:
    """The valid form of ``value``, or None when it is valid already."""
    if isinstance(value, str):
        text = valid_text(value)
        return None if text is value else text
    if isinstance(value, dict):
        changed = False
        out: dict[Any, Any] = {}
        for key, item in value.items():
            new_key, new_item = _fixed(key), _fixed(item)
            changed = changed or new_key is not None or new_item is not None
            out[key if new_key is None else new_key] = item if new_item is None else new_item
        return out if changed else None
    if isinstance(value, list | tuple):
        items = [_fixed(item) for item in value]
        if all(item is None for item in items):
            return None
        rebuilt = [old if new is None else new for old, new in zip(value, items, strict=True)]
        return tuple(rebuilt) if isinstance(value, tuple) else rebuilt
    return None
