"""Renders the agent-file JSON Schema as a Markdown format reference (``docs/format.md``).

The schema is the single source of truth; the reference is generated from it so the two cannot drift
(a test keeps ``docs/format.md`` equal to this module's output). Regenerate it with::

    python -m runner.agentfile.schema_doc > docs/format.md

Every object of ``$defs`` with fixed keys gets a section with a table (key, type, default,
description); a ``oneOf`` of objects gets a section listing its alternatives; other ``$defs`` (a plain
string, a "string or object" choice) are folded into the type column of the tables that use them.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from runner.resources import load_schema

__all__ = ["Schema", "main", "render_markdown"]

Schema = dict[str, Any]

_REF_PREFIX = "#/$defs/"


def render_markdown(schema: Schema) -> str:
    """The Markdown reference of ``schema`` (a draft 2020-12 schema whose objects live in ``$defs``)."""
    defs: dict[str, Schema] = schema.get("$defs", {})
    sections = [name for name, node in defs.items() if _is_section(node)]
    lines = [f"# {schema.get('title', 'Format reference')}", ""]
    lines += [
        "<!-- Generated from schemas/agent.schema.json by `python -m runner.agentfile.schema_doc`;"
        " do not edit by hand. -->",
        "",
    ]
    if "description" in schema:
        lines += [schema["description"], ""]
    lines += _root_choice(schema, defs)
    lines += ["Contents:", ""]
    lines += [f"- [{_title(name, defs[name])}](#{name})" for name in sections]
    lines.append("")
    for name in sections:
        lines += _section(name, defs[name], defs)
    return "\n".join(lines).rstrip("\n") + "\n"


def _is_section(node: Schema) -> bool:
    return "properties" in node or "oneOf" in node


def _title(name: str, node: Schema) -> str:
    return str(node.get("title", name))


def _ref_name(node: Schema) -> str | None:
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith(_REF_PREFIX):
        return ref[len(_REF_PREFIX) :]
    return None


def _resolve(node: Schema, defs: dict[str, Schema]) -> Schema:
    """``node`` with its ``$ref`` chain merged in; keys written next to a ``$ref`` win."""
    name = _ref_name(node)
    if name is None:
        return node
    target = _resolve(defs[name], defs)
    return {**target, **{key: value for key, value in node.items() if key != "$ref"}}


def _root_choice(schema: Schema, defs: dict[str, Schema]) -> list[str]:
    """One sentence for a root ``if: {required: [key]}, then: ..., else: ...``."""
    condition = schema.get("if", {})
    then, otherwise = schema.get("then", {}), schema.get("else", {})
    keys = condition.get("required", [])
    if not keys or not isinstance(then, dict) or not isinstance(otherwise, dict):
        return []
    has = " and ".join(f"`{key}`" for key in keys)
    return [
        f"A file with {has} follows {_type(then, defs)}; any other file follows {_type(otherwise, defs)}.",
        "",
    ]


def _section(name: str, node: Schema, defs: dict[str, Schema]) -> list[str]:
    lines = [f'<a id="{name}"></a>', "", f"## {_title(name, node)}", ""]
    if "description" in node:
        lines += [node["description"], ""]
    if "oneOf" in node:
        lines += ["One of:", ""]
        for branch in node["oneOf"]:
            resolved = _resolve(branch, defs)
            kind = ", ".join(f"`{key}`" for key in resolved.get("required", []))
            lines.append(f"- {_type(branch, defs)}: an entry with {kind}")
        lines.append("")
    properties: dict[str, Schema] = node.get("properties", {})
    if properties:
        required = set(node.get("required", []))
        lines += ["| Key | Type | Default | Description |", "| --- | --- | --- | --- |"]
        for key, prop in properties.items():
            resolved = _resolve(prop, defs)
            default = "required" if key in required else _default(resolved)
            cells = [f"`{key}`", _type(prop, defs), default, resolved.get("description", "")]
            lines.append("| " + " | ".join(_cell(cell) for cell in cells) + " |")
        lines.append("")
    return lines


def _default(node: Schema) -> str:
    return f"`{json.dumps(node['default'], ensure_ascii=False)}`" if "default" in node else ""


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _type(node: Schema, defs: dict[str, Schema]) -> str:
    """A short human description of the values ``node`` accepts, linking to sections."""
    name = _ref_name(node)
    if name is not None:
        target = defs[name]
        if _is_section(target):
            return f"[{_title(name, target)}](#{name})"
        return _type(target, defs)
    if "const" in node:
        return f"`{json.dumps(node['const'])}`"
    if "enum" in node:
        return " or ".join(f"`{json.dumps(value)}`" for value in node["enum"])
    if "if" in node and "then" in node and "else" in node:
        return f"{_type(node['then'], defs)} or {_type(node['else'], defs)}"
    if "oneOf" in node:
        return " or ".join(_type(branch, defs) for branch in node["oneOf"])
    return _plain_type(node, defs)


def _plain_type(node: Schema, defs: dict[str, Schema]) -> str:
    types = node.get("type", "any")
    names = types if isinstance(types, list) else [types]
    words: list[str] = []
    for type_name in names:
        if type_name == "array":
            items = node.get("items")
            words.append(f"list of {_type(items, defs)}" if isinstance(items, dict) else "list")
        elif type_name == "object":
            words.append(_object_type(node, defs))
        elif type_name == "string" and node.get("minLength") == 1:
            words.append("non-empty string")
        else:
            words.append(str(type_name))
    text = " or ".join(words)
    constraints = _constraints(node)
    return f"{text} ({', '.join(constraints)})" if constraints else text


def _object_type(node: Schema, defs: dict[str, Schema]) -> str:
    values = node.get("additionalProperties")
    text = f"mapping of {_type(values, defs)}" if isinstance(values, dict) else "mapping"
    keys = node.get("propertyNames")
    if isinstance(keys, dict):
        pattern = _resolve(keys, defs).get("pattern")
        if pattern:
            text += f", keys matching `{pattern}`"
    if node.get("minProperties"):
        text += f", at least {node['minProperties']} entry"
    return text


def _constraints(node: Schema) -> list[str]:
    found: list[str] = []
    if "pattern" in node:
        found.append(f"matching `{node['pattern']}`")
    if "minLength" in node and node["minLength"] != 1:
        found.append(f"at least {node['minLength']} characters")
    if "minimum" in node and "maximum" in node:
        found.append(f"{node['minimum']} to {node['maximum']}")
    elif "minimum" in node:
        found.append(f"≥ {node['minimum']}")
    elif "maximum" in node:
        found.append(f"≤ {node['maximum']}")
    if "exclusiveMinimum" in node:
        found.append(f"> {node['exclusiveMinimum']}")
    if "format" in node:
        found.append(node["format"])
    return found


def main() -> None:
    """Print the reference of the packaged agent schema."""
    sys.stdout.write(render_markdown(load_schema()))


if __name__ == "__main__":
    main()
