"""The items of a batch: one JSONL line each, read lazily, hashed, their ids checked for duplicates.

A line is a JSON string (the prompt) or an object ``{"id": ..., "input": "...", "vars": {...}}``
(``id`` and ``vars`` optional). Blank lines are skipped, but every line counts for the line numbers.
A line that is neither becomes an item that fails with its line number (``BatchItem.problem``); the
batch goes on. An item without an ``id`` is known by its 1-based line number.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from runner.errors import ConfigError
from runner.text import one_line, valid_text

__all__ = ["BatchItem", "DuplicateIds", "check_unique", "input_hash", "item_key", "parse_lines"]

ItemId = str | int


@dataclass(frozen=True, slots=True)
class BatchItem:
    """One input of a batch."""

    line: int
    """The 1-based line number in the input file (or the position in an iterable)."""
    id: ItemId
    input: str = ""
    vars: dict[str, Any] = field(default_factory=dict)
    sha256: str = ""
    """The hash of what the item asks (``input`` and ``vars``; the raw line when malformed)."""
    problem: str | None = None
    """Why the line is not a usable item (it then fails without running)."""
    yes: bool = False
    """Approve this item's ``ask`` tools whatever the batch says (an eval case's ``yes: true``)."""


class DuplicateIds(ConfigError):
    """Two lines of the input share an id."""


def input_hash(input: str, variables: dict[str, Any]) -> str:
    """The sha256 of an item's input and variables, as canonical JSON."""
    canonical = json.dumps({"input": input, "vars": variables}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def item_key(item_id: Any) -> str:
    """How ids compare: 3 and "3" are the same id (an output line's id may come back either way)."""
    return str(item_id)


def _malformed(line: int, raw: str, why: str) -> BatchItem:
    digest = hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()
    return BatchItem(line, line, sha256=digest, problem=f"input line {line}: {why}")


#: How deep an input line may nest (``vars`` holding objects in lists in ...): deeper lines fail
#: alone, at the same depth wherever they are read (Python's decoder would fail at a depth that
#: depends on its own stack).
MAX_DEPTH = 100

_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"')
_BRACKETS = re.compile(r"[\[\]{}]")


def _depth(raw: str) -> int:
    """How deep ``raw`` nests (0 when it cannot nest past ``MAX_DEPTH``: the common case, at once)."""
    if raw.count("[") + raw.count("{") <= MAX_DEPTH:
        return 0
    depth = deepest = 0
    for bracket in _BRACKETS.findall(_STRINGS.sub("", raw)):
        depth += 1 if bracket in "[{" else -1
        deepest = max(deepest, depth)
    return deepest


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def parse_item(line: int, raw: str) -> BatchItem:
    """The item of one input line (``problem`` set when the line is not a usable item).

    Whatever the line holds, it never raises: a number too long for Python (over 4300 digits),
    ``NaN`` / ``Infinity``, nesting deeper than ``MAX_DEPTH``, any other line the decoder refuses,
    and a value its checks trip on make that one item fail with its line number.
    """
    if (depth := _depth(raw)) > MAX_DEPTH:
        return _malformed(line, raw, f"nested {depth} levels deep (at most {MAX_DEPTH})")
    try:
        value = json.loads(raw, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, the int-digits limit, NaN
        return _malformed(line, raw, f"not JSON ({exc.__class__.__name__}: {one_line(str(exc), 120)})")
    return item_of(line, value, raw=raw)


def item_of(line: int, value: Any, *, raw: str | None = None) -> BatchItem:
    """The item of one decoded input (a string, or an object with ``input``, ``id``, ``vars``);
    never raises: a value that cannot be hashed (not JSON, an int too long to write, a cycle)
    makes the item fail with its line number."""
    try:
        return _item_of(line, value, raw=raw)
    except (ValueError, TypeError, RecursionError) as exc:
        why = f"cannot be used ({exc.__class__.__name__}: {one_line(str(exc), 120)})"
        return _malformed(line, raw if raw is not None else f"<input {line}>", why)


def _item_of(line: int, value: Any, *, raw: str | None) -> BatchItem:
    raw = raw if raw is not None else json.dumps(value, default=str)
    if isinstance(value, str):
        prompt = valid_text(value)
        return BatchItem(line, line, prompt, {}, input_hash(prompt, {}))
    if not isinstance(value, dict):
        return _malformed(line, raw, f"expected a string or an object, got {type(value).__name__}")
    unknown = sorted(set(value) - {"id", "input", "vars"})
    if unknown:
        return _malformed(line, raw, f"unknown key(s) {', '.join(map(repr, unknown))} (id, input, vars)")
    text, variables, item_id = value.get("input"), value.get("vars", {}), value.get("id", line)
    if not isinstance(text, str):
        return _malformed(line, raw, "'input' must be a string")
    return _checked(line, raw, text, variables, item_id)


def _checked(line: int, raw: str, text: str, variables: Any, item_id: Any) -> BatchItem:
    if not isinstance(variables, dict):
        return _malformed(line, raw, "'vars' must be an object")
    if isinstance(item_id, bool) or not isinstance(item_id, (str, int)) or item_id == "":
        return _malformed(line, raw, "'id' must be a non-empty string or an integer")
    text = valid_text(text)
    if isinstance(item_id, str):
        item_id = valid_text(item_id)  # written as such: a rerun must find it under the same id
    return BatchItem(line, item_id, text, variables, input_hash(text, variables))


def parse_lines(lines: Iterable[str]) -> Iterator[BatchItem]:
    """The items of JSONL ``lines``, lazily (blank lines skipped, still counted)."""
    for number, raw in enumerate(lines, 1):
        if raw.strip():
            yield parse_item(number, raw)


def check_unique(items: Iterable[BatchItem], *, source: str = "the input") -> int:
    """Raise ``DuplicateIds`` naming both lines when two items share an id; the number of items."""
    seen: dict[str, int] = {}
    count = 0
    for item in items:
        count += 1
        key = item_key(item.id)
        first = seen.setdefault(key, item.line)
        if first != item.line:
            raise DuplicateIds(
                f"{source}: lines {first} and {item.line} have the same id {item.id!r}",
                hint="every item needs its own id (a line without one is known by its line number)",
            )
    return count
