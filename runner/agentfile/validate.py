"""JSON-Schema validation of agent data, with errors mapped back to FILE:LINE:COL.

One validator (``schemas/agent.schema.json``) serves ``runner validate`` and ``runner run``.
jsonschema's raw errors are rewritten into short messages: unknown keys and enum values get a
"did you mean", a missing key points at the mapping that lacks it, and the ``oneOf`` of tool
sources and hooks is resolved by the kind key the entry actually has.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from typing import Any
from urllib.parse import unquote

from runner.agentfile.yamlsrc import PathKey, SourceMap, error_at
from runner.errors import ConfigError
from runner.resources import load_schema
from runner.text import counted

__all__ = ["resolve_pointer", "schema_errors", "sort_errors", "suggest"]

_TYPE_NAMES = {
    "object": "a mapping",
    "array": "a list",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "null": "null",
}


#: The order in which alternatives are listed ("a string or a mapping").
_TYPE_ORDER = ("string", "integer", "number", "boolean", "object", "array", "null")


@cache
def _validator() -> Any:
    from jsonschema import Draft202012Validator

    return Draft202012Validator(load_schema(), format_checker=Draft202012Validator.FORMAT_CHECKER)


def _deref(node: Any, root: dict[str, Any]) -> Any:
    while isinstance(node, dict) and "$ref" in node:
        node = root["$defs"][node["$ref"].rsplit("/", 1)[-1]]
    return node


def _schema_nodes(schema_path: Sequence[str | int]) -> list[Any]:
    """The schema nodes along ``schema_path`` (``$ref``s followed), starting with the root."""
    root = load_schema()
    nodes: list[Any] = [root]
    node: Any = root
    for part in schema_path:
        if isinstance(node, dict) and part not in node:
            node = _deref(node, root)
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            break
        nodes.append(node)
    return nodes


def _ignores_x_keys(schema_path: Sequence[str | int]) -> bool:
    """Whether the mapping whose ``propertyNames`` failed lets ``x-`` keys through."""
    parts = list(schema_path)
    if "propertyNames" not in parts:
        return False
    at = len(parts) - 1 - parts[::-1].index("propertyNames")
    nodes = _schema_nodes(parts[:at])
    if len(nodes) <= at:
        return False
    owner = _deref(nodes[at], load_schema())
    return isinstance(owner, dict) and "^x-" in owner.get("patternProperties", {})


def _alternatives(schema_path: Sequence[str | int]) -> list[str]:
    """The types an ``if: {type: T}`` / ``else:`` chain accepted before the ``type`` error at its end.

    ``model: 5`` fails the ``type: object`` of the ``else`` branch, but a string was fine too: the
    message must say "a string or a mapping", not only "a mapping".
    """
    root = load_schema()
    nodes = _schema_nodes(schema_path[:-1])
    if len(nodes) < len(schema_path):
        return []
    found: list[str] = []
    i = len(schema_path) - 1
    while i > 0 and schema_path[i - 1] == "else":
        condition = _deref(nodes[i - 1], root).get("if")
        if not (isinstance(condition, dict) and set(condition) == {"type"}):
            break
        found.append(condition["type"])
        i -= 1
    return found


def _type_names(types: Iterable[str]) -> str:
    unique = sorted(set(types), key=lambda t: _TYPE_ORDER.index(t) if t in _TYPE_ORDER else len(_TYPE_ORDER))
    names = [_TYPE_NAMES.get(t, t) for t in unique]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def suggest(word: str, candidates: Iterable[str]) -> str | None:
    """The closest candidate to ``word``, if one is close enough to be a likely typo."""
    matches = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return matches[0] if matches else None


#: How a module reference's pattern begins (``python:`` sources, python hooks, ``module:function``).
_MODULE_PATTERN = "^[A-Za-z_][A-Za-z0-9_]*"


def _module_for_path(value: Any, pattern: str) -> str | None:
    """The message for a file path written where a module name goes (``python: ./my_tools.py``).

    It names the module that path would be (``my_tools``, ``pkg.tools:add``) when that is one;
    None when the value does not look like a path to a Python file.
    """
    if not isinstance(value, str) or not pattern.startswith(_MODULE_PATTERN):
        return None
    file, colon, function = value.partition(":")
    if not (file.endswith(".py") or "/" in file or "\\" in file):
        return None
    parts = [p for p in file.replace("\\", "/").removesuffix(".py").split("/") if p not in ("", ".")]
    name = ".".join(parts) + (colon + function if colon else "")
    message = f"expected a module name, not a file path ({_describe(value)})"
    if parts and all(part.isidentifier() for part in parts) and re.fullmatch(pattern, name):
        return f"{message}: did you mean `{name}`?"
    return message + ": modules are imported from the agent file's folder first, then sys.path"


def _describe(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 40 else text[:37] + '..."'


def _kind_keys(schema: dict[str, Any]) -> list[str]:
    """The kind key of each ``oneOf`` branch (the one property every branch requires)."""
    root = load_schema()
    kinds = []
    for branch in schema.get("oneOf", []):
        target = branch
        if "$ref" in branch:
            target = root["$defs"][branch["$ref"].rsplit("/", 1)[-1]]
        kinds.append(target.get("required", [""])[0])
    return kinds


def _misplaced(key: str, path: PathKey, mapping: Any) -> str | None:
    """Why a key that is valid elsewhere in a team file is not valid here."""
    if key == "version" and len(path) == 2 and path[0] == "agents":
        return "a team file has one `version`, at its top, not one per agent"
    return None


class _Mapper:
    def __init__(self, sources: SourceMap, prefix: PathKey) -> None:
        self.sources = sources
        self.prefix = prefix

    def at(self, path: Sequence[str | int]) -> PathKey:
        return (*self.prefix, *path)

    def convert(self, error: Any) -> list[ConfigError]:
        path = self.at(error.absolute_path)
        v = error.validator
        if "propertyNames" in error.absolute_schema_path and isinstance(error.instance, str):
            if error.instance.startswith("x-") and _ignores_x_keys(list(error.absolute_schema_path)):
                return []
            key_path = (*path, error.instance)
            rule = error.validator_value if v == "pattern" else error.message
            return [
                error_at(
                    f"invalid name '{error.instance}': must match {rule}",
                    self.sources.value(key_path),
                    key_path,
                    key=True,
                )
            ]
        where = self.sources.value(path)
        if v == "additionalProperties":
            allowed = list(error.schema.get("properties", {}))
            extras = [
                k
                for k in error.instance
                if k not in allowed and not (isinstance(k, str) and k.startswith("x-"))
            ]
            out = []
            for key in extras:
                misplaced = _misplaced(key, path, error.instance)
                close = None if misplaced else suggest(key, allowed)
                message = f"unknown key '{key}'" + (f" (did you mean '{close}'?)" if close else "")
                out.append(
                    error_at(
                        f"{message}: {misplaced}" if misplaced else message,
                        self.sources.value((*path, key)),
                        (*path, key),
                        key=True,
                        hint=None if close or misplaced else "allowed here: " + ", ".join(allowed),
                    )
                )
            return out
        if v == "required":
            missing = [k for k in error.validator_value if k not in error.instance]
            return [error_at(f"missing required key '{k}'", where, path) for k in missing]
        if v == "oneOf":
            if isinstance(error.instance, dict):
                return self.one_of(error, path)
            if error.schema.get("type") == "object":
                return []  # the sibling `type: object` error already says it
        if v == "enum":
            options = [str(o) for o in error.validator_value]
            close = suggest(error.instance, options) if isinstance(error.instance, str) else None
            message = f"{_describe(error.instance)} is not one of: {', '.join(options)}"
            if close:
                message += f" (did you mean '{close}'?)"
            return [error_at(message, where, path)]
        if v == "type":
            expected = error.validator_value
            names = [expected] if isinstance(expected, str) else list(expected)
            wanted = _type_names([*_alternatives(list(error.absolute_schema_path)), *names])
            return [error_at(f"expected {wanted}, got {_describe(error.instance)}", where, path)]
        if v == "format" and error.validator_value == "regex":
            return [error_at(f"{_describe(error.instance)} is not a valid regular expression", where, path)]
        if v == "const":
            return [
                error_at(
                    f"must be {_describe(error.validator_value)}, got {_describe(error.instance)}",
                    where,
                    path,
                )
            ]
        if v == "pattern":
            module = _module_for_path(error.instance, str(error.validator_value))
            if module is not None:
                return [error_at(module, where, path, hint=error.schema.get("description"))]
            return [
                error_at(
                    f"{_describe(error.instance)} does not match the pattern {error.validator_value}",
                    where,
                    path,
                    hint=error.schema.get("description"),
                )
            ]
        if v in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
            words = {
                "minimum": "at least",
                "exclusiveMinimum": "greater than",
                "maximum": "at most",
                "exclusiveMaximum": "less than",
            }
            return [
                error_at(
                    f"{_describe(error.instance)} is out of range: must be {words[v]} "
                    f"{error.validator_value}",
                    where,
                    path,
                )
            ]
        if v in ("minLength", "minItems", "minProperties") and error.validator_value == 1:
            return [error_at("must not be empty", where, path)]
        return [error_at(error.message, where, path)]

    def one_of(self, error: Any, path: PathKey) -> list[ConfigError]:
        """Tool sources and hooks: pick the branch by the kind key the entry has."""
        kinds = _kind_keys(error.schema)
        what = "hook" if "command" in kinds else "tool entry"
        present = [k for k in kinds if k in error.instance]
        where = self.sources.value(path)
        if not present:
            unknown = [k for k in error.instance if k not in kinds]
            guesses = [g for g in (suggest(k, kinds) for k in unknown) if g]
            message = f"{what} has no kind: it needs exactly one of {', '.join(kinds)}"
            if guesses:
                message += f" (did you mean '{guesses[0]}'?)"
            return [error_at(message, where, path)]
        if len(present) > 1:
            return [
                error_at(
                    f"{what} has {len(present)} kinds ({', '.join(present)}): use exactly one",
                    where,
                    path,
                    hint=f"split it into {counted(len(present), 'entry', 'entries')}",
                )
            ]
        branch = kinds.index(present[0])
        sub = [e for e in error.context if e.relative_schema_path and e.relative_schema_path[0] == branch]
        out: list[ConfigError] = []
        for e in sub:
            out.extend(self.convert(e))
        return out or [error_at(error.message, where, path)]


def schema_errors(data: Any, sources: SourceMap, prefix: PathKey = ()) -> list[ConfigError]:
    """Every schema violation in ``data`` as located ``ConfigError``s, in file order."""
    mapper = _Mapper(sources, prefix)
    out: list[ConfigError] = []
    for error in _validator().iter_errors(data):
        out.extend(mapper.convert(error))
    # a value of the wrong type gets that one error, not also "out of range" or "too short"
    mistyped = {e.path for e in out if e.message.startswith("expected ")}
    out = [e for e in out if e.path not in mistyped or e.message.startswith("expected ")]
    return sort_errors(out)


def sort_errors(errors: Iterable[ConfigError]) -> list[ConfigError]:
    """Errors deduplicated and ordered by file, line, column."""
    unique: dict[tuple[str, int, int, str, str], ConfigError] = {}
    for e in errors:
        unique.setdefault((e.file, e.line, e.column, e.path, e.message), e)
    return sorted(unique.values(), key=lambda e: (e.file, e.line, e.column, e.path))


def resolve_pointer(root: Any, ref: str) -> Any:
    """The node a local reference (``#/a/b~1c/0``, JSON Pointer in a URI fragment) names in ``root``.

    Raises ``LookupError`` when it names nothing. ``#`` alone is the root.
    """
    pointer = unquote(ref[1:] if ref.startswith("#") else ref)
    parts = pointer.split("/")[1:] if pointer.startswith("/") else [pointer] if pointer else []
    node: Any = root
    for raw in parts:
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise LookupError(ref)
    return node
