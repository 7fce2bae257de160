"""JSON as models write it, and tool specs in either shape; shared by the inline and prompt modes.

- ``load_json(text) -> (value, None) | (None, why)``: plain JSON first (raw newlines and tabs allowed
  inside strings); then, unless the text looks cut short (an open string or bracket), repaired with
  ``json-repair`` (trailing commas, single quotes, unquoted keys, ...). From the repairer only an
  object (text starting with ``{``) or an array (text starting with ``[``) is accepted.
- ``unwrap_fence(text)``: the body of a code fence around the whole text.
- ``tool_function(spec)``: ``{name, description, parameters}`` of an OpenAI-wrapped or flat spec.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["FENCE", "TOO_DEEP", "load_json", "tool_function", "unwrap_fence"]

#: Why JSON nested past what the parser can read is refused.
TOO_DEEP = "the JSON nests arrays and objects too deeply to read"
#: A code fence line: its marks (group 1) and its info string (group 2, unstripped).
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")


def tool_function(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The ``{name, description, parameters}`` of a tool spec, OpenAI-wrapped or flat."""
    inner = spec.get("function")
    source: Mapping[str, Any] = inner if isinstance(inner, Mapping) else spec
    parameters = source.get("parameters")
    return {
        "name": str(source.get("name") or ""),
        "description": str(source.get("description") or ""),
        "parameters": dict(parameters) if isinstance(parameters, Mapping) else {"type": "object"},
    }


def _rest_ends_string(text: str, start: int) -> bool:
    rest = text[start:].lstrip()
    return not rest or rest[0] in ",}]:"


def _incomplete(text: str) -> str | None:
    """Why ``text`` looks cut short (an open string or bracket), or None."""
    depth, quote, escaped, previous = 0, "", False, ""
    for index, char in enumerate(text):
        if quote:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote and (quote == '"' or _rest_ends_string(text, index + 1)):
                quote, previous = "", char
            continue
        if char == '"' or (char == "'" and previous in ("", "{", "[", ",", ":")):
            quote = char
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
        if not char.isspace():
            previous = char
    if quote:
        return "the JSON ends inside a string (cut short?)"
    if depth > 0:
        return "the JSON is not closed (cut short?)"
    return None


def load_json(text: str) -> tuple[Any, str | None]:
    """Parse JSON a model wrote (trailing commas, single quotes repaired): (value, None) or (None, why)."""
    text = text.strip()
    if not text:
        return None, "empty"
    for strict in (True, False):  # strict=False: raw newlines and tabs inside strings
        try:
            return json.loads(text, strict=strict), None
        except RecursionError:  # the parser recurses per level: ~1,000 levels are past its reach
            return None, TOO_DEEP
        except ValueError:
            continue
    if text[0] not in "{[":
        return None, "not a JSON object or array"
    problem = _incomplete(text)
    if problem:
        return None, problem
    import json_repair  # only imported when a model writes broken JSON

    try:
        value = json_repair.loads(text, skip_json_loads=True)
    except RecursionError:
        return None, TOO_DEEP
    except Exception:  # the repairer failing is one more kind of invalid JSON
        value = None
    if not isinstance(value, dict if text[0] == "{" else list):  # the repairer guessed something else
        return None, "unreadable even after repair"
    return value, None


def unwrap_fence(text: str) -> str:
    """``text`` without a code fence around it (the fence lines removed), else unchanged."""
    lines = text.strip().split("\n")
    if len(lines) < 2 or not FENCE.match(lines[0]):
        return text
    last = FENCE.match(lines[-1])
    return "\n".join(lines[1:-1]) if last and not last[2].strip() else text
