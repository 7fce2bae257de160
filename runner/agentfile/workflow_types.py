"""What a workflow step's output is, as far as its agent's ``output:`` schema says (issue 17).

A ``Shape`` is text (an agent without ``output:``), anything (no schema to go by), a JSON Schema
node (with the schema it belongs to, for ``$ref``), or a list of shapes (a ``for_each``'s outputs).
``child(shape, key)`` walks one step of a field path (``properties``, ``items``, ``$ref``,
``anyOf``/``oneOf``/``allOf``) and says why the schema has no such field; ``describe`` writes a shape
the way ``runner render`` shows it (``object{tasks: array}``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from runner.agentfile.validate import resolve_pointer, suggest
from runner.agentfile.yamlsrc import Document, PathKey
from runner.errors import ConfigError

__all__ = [
    "ANY",
    "TEXT",
    "Missing",
    "Shape",
    "agent_shapes",
    "child",
    "describe",
    "is_list",
    "item_of",
    "list_of",
    "of_schema",
    "record_of",
    "what_it_is",
]

#: How many ``$ref``s are followed in a row (a schema that refers to itself in a loop stops here).
_MAX_REFS = 32
#: How deep ``anyOf``/``oneOf``/``allOf`` are looked into (a branch may refer back to its schema).
_MAX_NESTING = 4


@dataclass(frozen=True)
class Shape:
    """The type of a value a template reads."""

    kind: Literal["text", "any", "schema", "list", "record"]
    schema: Any = None
    root: Any = None
    item: Shape | None = None
    #: ``record``: each field's shape (a ``parallel`` step's output: its children's outputs by id).
    fields: tuple[tuple[str, Shape], ...] = ()


ANY = Shape("any")
TEXT = Shape("text")


@dataclass(frozen=True)
class Missing:
    """Why a field path goes nowhere: what the value is, and a close name among its fields."""

    reason: str
    close: str | None = None


def of_schema(schema: Any) -> Shape:
    """The shape of an output schema (a whole one: ``$ref`` resolves inside it)."""
    return Shape("schema", schema=schema, root=schema)


def list_of(item: Shape) -> Shape:
    return Shape("list", item=item)


def record_of(fields: dict[str, Shape]) -> Shape:
    return Shape("record", fields=tuple(fields.items()))


def _resolved(shape: Shape) -> Shape:
    node, seen = shape.schema, 0
    while isinstance(node, Mapping) and isinstance(node.get("$ref"), str) and seen < _MAX_REFS:
        try:
            node = resolve_pointer(shape.root, node["$ref"])
        except LookupError:
            return ANY  # the agent's own check reports the reference
        seen += 1
    if not isinstance(node, Mapping) or not node or seen >= _MAX_REFS:
        return ANY if node is not False else Shape("schema", schema=False, root=shape.root)
    return Shape("schema", schema=node, root=shape.root)


def _types(schema: Mapping[str, Any]) -> set[str] | None:
    declared = schema.get("type")
    if isinstance(declared, str):
        return {declared}
    if isinstance(declared, list):
        return {str(t) for t in declared}
    if "properties" in schema:
        return {"object"}
    if "items" in schema or "prefixItems" in schema:
        return {"array"}
    return None


def _branches(schema: Mapping[str, Any]) -> list[Any]:
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            return list(schema[key])
    return []


def _an(types: set[str]) -> str:
    names = sorted(types)
    word = " or ".join(names)
    return ("an " if names[0][0] in "aeiou" else "a ") + word


def child(shape: Shape, key: str | int, *, seen: frozenset[int] = frozenset()) -> Shape | Missing:
    """The shape of ``value[key]`` for a value of ``shape``, or why there is none.

    ``seen``: the combinators being looked into further up (a branch that leads back to one adds
    nothing, and is left out)."""
    if shape.kind == "any":
        return ANY
    if shape.kind == "text":
        return Missing("is text")
    if shape.kind == "list":
        if isinstance(key, int) or str(key).isdigit():
            return shape.item or ANY
        return Missing("is a list")
    if shape.kind == "record":
        fields = dict(shape.fields)
        if key in fields:
            return fields[str(key)]
        return Missing(f"has no field '{key}'", suggest(str(key), fields))
    here = _resolved(shape)
    if here.kind != "schema":
        return here
    schema = here.schema
    if schema is False:
        return Missing("can have no value")
    branches = _branches(schema) + list(schema.get("allOf") or [])
    if branches and not _types(schema):
        if id(schema) in seen or len(seen) > _MAX_NESTING:
            return ANY
        inner = seen | {id(schema)}
        others = [Shape("schema", schema=b, root=shape.root) for b in branches]
        others = [b for b in others if id(_resolved(b).schema) not in inner]
        results = [child(b, key, seen=inner) for b in others]
        if not results:
            return ANY
        found = [r for r in results if isinstance(r, Shape)]
        if found:
            return found[0]
        misses = [r for r in results if isinstance(r, Missing)]
        return next((m for m in misses if m.close), misses[0])
    types = _types(schema)
    if isinstance(key, int) or (types is not None and "object" not in types and str(key).isdigit()):
        return _index(here, types)
    properties = schema.get("properties")
    props = dict(properties) if isinstance(properties, Mapping) else {}
    if key in props:
        return Shape("schema", schema=props[key], root=shape.root)
    for pattern, sub in (schema.get("patternProperties") or {}).items():
        try:
            if re.search(str(pattern), key):
                return Shape("schema", schema=sub, root=shape.root)
        except re.error:
            return ANY
    extra = schema.get("additionalProperties")
    if isinstance(extra, Mapping):
        return Shape("schema", schema=extra, root=shape.root)
    if types is not None and "object" not in types:
        return Missing(f"is {_an(types)}")
    if props and extra is not True:
        return Missing("has no field '" + key + "'", suggest(key, props))
    if extra is False:
        return Missing("has no fields")
    return ANY


def _index(here: Shape, types: set[str] | None) -> Shape | Missing:
    schema = here.schema
    if types is not None and "array" not in types:
        return Missing(f"is {_an(types)}")
    items = schema.get("items")
    if isinstance(items, Mapping | bool):
        return Shape("schema", schema=items, root=here.root)
    return ANY


def is_list(shape: Shape, *, seen: frozenset[int] = frozenset()) -> bool | None:
    """Whether a value of ``shape`` is a list: True, False, or None when the schema does not say."""
    if shape.kind == "list":
        return True
    if shape.kind in ("text", "record"):
        return False
    if shape.kind == "any":
        return None
    here = _resolved(shape)
    if here.kind != "schema" or here.schema is False or id(here.schema) in seen or len(seen) > _MAX_NESTING:
        return None
    types = _types(here.schema)
    if types is None:
        inner = seen | {id(here.schema)}
        branches = _branches(here.schema)
        answers = {is_list(Shape("schema", schema=b, root=shape.root), seen=inner) for b in branches}
        return True if True in answers else (False if answers == {False} else None)
    return "array" in types


def what_it_is(shape: Shape) -> str:
    """``a string``, ``text``, ``an object``: what a value that is not a list is, for messages."""
    if shape.kind in ("text", "record"):
        return "text" if shape.kind == "text" else "an object"
    here = _resolved(shape)
    types = _types(here.schema) if here.kind == "schema" and isinstance(here.schema, Mapping) else None
    return _an(types) if types else "not a list"


def item_of(shape: Shape) -> Shape:
    """The shape of one item of a list of ``shape`` (what a ``for_each`` binds its ``as`` name to)."""
    found = child(shape, 0)
    return found if isinstance(found, Shape) else ANY


def describe(shape: Shape, depth: int = 1, *, seen: frozenset[int] = frozenset()) -> str:
    """``text``, ``any``, ``string``, ``array[object{title: string}]``, ``object{tasks: array}``.

    ``seen`` holds the schema nodes being described further up: one met again (a ``$ref`` back) is
    ``any``, so a schema that refers to itself is described in a few words."""
    if shape.kind in ("text", "any"):
        return shape.kind
    if shape.kind == "list":
        return f"array[{describe(shape.item or ANY, depth, seen=seen)}]"
    if shape.kind == "record":
        if depth <= 0:
            return "object"
        return (
            "object{" + ", ".join(f"{k}: {describe(v, depth - 1, seen=seen)}" for k, v in shape.fields) + "}"
        )
    here = _resolved(shape)
    if here.kind != "schema":
        return describe(here, depth, seen=seen)
    schema = here.schema
    if schema is False:
        return "nothing"
    if id(schema) in seen or len(seen) > _MAX_NESTING:
        return "any"
    seen = seen | {id(schema)}
    branches = _branches(schema)
    if branches and not _types(schema):
        shown = (describe(Shape("schema", schema=b, root=shape.root), depth, seen=seen) for b in branches)
        return " | ".join(dict.fromkeys(shown))  # each alternative once
    types = _types(schema) or {"any"}
    if types == {"object"} and depth > 0 and isinstance(schema.get("properties"), Mapping):
        fields = ", ".join(
            f"{name}: {describe(Shape('schema', schema=sub, root=shape.root), depth - 1, seen=seen)}"
            for name, sub in schema["properties"].items()
        )
        return f"object{{{fields}}}"
    if types == {"array"} and depth > 0:
        return f"array[{describe(item_of(here), depth - 1, seen=seen)}]"
    return " | ".join(sorted(types))


def agent_shapes(
    doc: Document, bodies: Iterable[tuple[str, PathKey]], sound: Callable[[PathKey], bool]
) -> dict[str, Shape]:
    """The output shape of each agent: its schema, text (no ``output:``), or anything (not readable)."""
    from runner.agentfile import output_schema as out
    from runner.agentfile.build import origin_dir
    from runner.agentfile.config import OutputConfig

    shapes: dict[str, Shape] = {}
    for name, prefix in bodies:
        body: Any = doc.data
        for part in prefix:
            body = body.get(part) if isinstance(body, dict) else None
        value = body.get("output") if isinstance(body, dict) else None
        path = (*prefix, "output")
        if value is None:
            shapes[name] = TEXT
            continue
        shapes[name] = ANY
        if not sound(path) or not isinstance(value, dict):
            continue
        try:
            form = out.output_form(value)
            if form == "inline":
                schema: Any = value
            elif form == "file":
                schema, _ = out.read_schema_file(
                    (origin_dir(doc, path) / value["file"]).resolve(), value["file"]
                )
            else:
                config = OutputConfig(python=value["python"], base_dir=origin_dir(doc, path))
                schema = out.load_output(config).schema
        except ConfigError:
            continue  # the agent's own checks report why
        if not out.schema_problems(schema):
            shapes[name] = of_schema(schema)
    return shapes
