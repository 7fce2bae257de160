"""Schema hygiene: turn any tool's parameter schema into one every model API accepts.

Applied to every source (python, openapi, mcp, ...). The rules come from Open WebUI's
``clean_openai_tool_schema`` (seed 003) plus what providers reject in practice:

- local ``$ref`` s are inlined by ``tools/refs.py`` (a cycle becomes ``{"type": "object"}`` with a
  description, within the limits every source shares), and ``$defs`` / ``definitions`` are dropped;
- ``anyOf`` / ``oneOf`` ``[X, {"type": "null"}]`` collapses to ``X``; ``type: [X, "null"]`` to ``X``;
- ``default: null`` and ``null`` enum members are dropped;
- Python-ish type names are normalised (``str`` -> ``string``, ``int`` -> ``integer``, ...);
- a property without a type gets one (``object`` with properties, ``array`` with items, the type of
  its enum values, else ``string``);
- ``$schema``, ``$id``, ``$comment``, ``title``, ``nullable``, ``discriminator`` and similar keys are
  removed; properties whose names start with ``__`` are removed;
- the root is always ``{"type": "object", "properties": {...}}`` and ``required`` only lists
  properties that exist.

Output key order follows the input, so the same input always gives byte-identical JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runner.tools.refs import SUBSCHEMA_KEYS, SUBSCHEMA_LIST_KEYS, RefInliner

__all__ = ["clean_schema", "inline_refs"]

_TYPE_ALIASES = {
    "str": "string",
    "int": "integer",
    "float": "number",
    "bool": "boolean",
    "dict": "object",
    "list": "array",
    "tuple": "array",
    "None": "null",
    "NoneType": "null",
    "none": "null",
}
# Keys that carry no validation meaning and that some providers refuse.
_DROPPED_KEYS = frozenset(
    {
        "$schema",
        "$id",
        "$comment",
        "$anchor",
        "$dynamicAnchor",
        "$dynamicRef",
        "$vocabulary",
        "$defs",
        "definitions",
        "title",
        "nullable",
        "discriminator",
    }
)
_SCHEMA_MAP_KEYS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})
_COMBINATORS = ("anyOf", "oneOf", "allOf")
_NULL_SCHEMA = {"type": "null"}


def inline_refs(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Return a copy of ``schema`` with every local ``$ref`` replaced by its target (``tools/refs.py``)."""
    result = RefInliner(schema).inline(schema)
    return result if isinstance(result, dict) else {}


def clean_schema(schema: Mapping[str, Any] | None) -> dict[str, Any]:
    """Return a self-contained, provider-safe object schema for a tool's parameters."""
    root = inline_refs(schema) if isinstance(schema, Mapping) else {}
    cleaned = _clean(root, is_property=False)
    if cleaned.get("type") != "object":
        cleaned = {"type": "object", "properties": {}}
    result: dict[str, Any] = {"type": "object"}
    for key, value in cleaned.items():
        if key != "type":
            result[key] = value
    properties = result.get("properties")
    if not isinstance(properties, dict):
        properties = {}
    result["properties"] = properties
    required = result.pop("required", None)
    if isinstance(required, list):
        names = [name for name in dict.fromkeys(required) if isinstance(name, str) and name in properties]
        if names:
            result["required"] = names
    # Keep "type" and "properties" first: stable and easy to read in `runner tools --json`.
    ordered: dict[str, Any] = {"type": "object", "properties": properties}
    ordered.update((k, v) for k, v in result.items() if k not in ordered)
    return ordered


def _clean(node: Mapping[str, Any], *, is_property: bool) -> dict[str, Any]:
    """Clean one schema node; ``is_property`` says it is the value of a ``properties`` entry."""
    node = _collapse_nullable(node)
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROPPED_KEYS or (key == "default" and value is None):
            continue
        if key == "type":
            normalised = _normalise_type(value)
            if normalised is not None:
                out[key] = normalised
        elif key == "enum" and isinstance(value, list):
            members = [member for member in value if member is not None]
            out[key] = members or value
        elif key in SUBSCHEMA_KEYS:
            out[key] = _clean(value, is_property=False) if isinstance(value, Mapping) else value
        elif key in SUBSCHEMA_LIST_KEYS and isinstance(value, list):
            out[key] = [
                _clean(item, is_property=False) if isinstance(item, Mapping) else item for item in value
            ]
        elif key == "properties" and isinstance(value, Mapping):
            out[key] = {
                name: _clean(sub if isinstance(sub, Mapping) else {}, is_property=True)
                for name, sub in value.items()
                if not str(name).startswith("__")
            }
        elif key in _SCHEMA_MAP_KEYS and isinstance(value, Mapping):
            out[key] = {name: _clean(sub, is_property=False) for name, sub in value.items()}
        else:
            out[key] = value
    if "required" in out and isinstance(out.get("properties"), dict) and isinstance(out["required"], list):
        props = out["properties"]
        out["required"] = [name for name in dict.fromkeys(out["required"]) if name in props]
        if not out["required"]:
            del out["required"]
    if "type" not in out:
        inferred = _infer_type(out, is_property=is_property)
        if inferred is not None:
            out = {"type": inferred, **out}
    return out


def _collapse_nullable(node: Mapping[str, Any]) -> Mapping[str, Any]:
    """``anyOf/oneOf [X, null]`` -> X merged with the node's other keys; drop null from wider unions."""
    for key in ("anyOf", "oneOf"):
        options = node.get(key)
        if not isinstance(options, list):
            continue
        kept = [opt for opt in options if opt != _NULL_SCHEMA]
        if len(kept) == len(options) or not kept:
            continue
        rest = {k: v for k, v in node.items() if k != key}
        if len(kept) == 1 and isinstance(kept[0], Mapping):
            merged = dict(kept[0])
            merged.update(rest)
            return _collapse_nullable(merged)
        return {key: kept, **rest}
    return node


def _normalise_type(value: Any) -> Any:
    if isinstance(value, str):
        return _TYPE_ALIASES.get(value, value)
    if isinstance(value, list):
        names = list(dict.fromkeys(_TYPE_ALIASES.get(v, v) for v in value if isinstance(v, str)))
        non_null = [name for name in names if name != "null"]
        if len(non_null) == 1:
            return non_null[0]
        return non_null or None
    return None


def _infer_type(node: Mapping[str, Any], *, is_property: bool) -> str | None:
    if "properties" in node:
        return "object"
    if "items" in node or "prefixItems" in node:
        return "array"
    values = node["enum"] if isinstance(node.get("enum"), list) else None
    if values is None and "const" in node:
        values = [node["const"]]
    if values:
        kinds = {_json_type(v) for v in values}
        if kinds == {"integer", "number"}:
            return "number"
        return kinds.pop() if len(kinds) == 1 else None
    if any(key in node for key in (*_COMBINATORS, "not", "$ref")):
        return None
    return "string" if is_property else None


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null"
