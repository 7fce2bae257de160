"""One ``$ref`` inliner: python, MCP and OpenAPI schemas share its placeholders and its limits."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any, cast

from mcp import types
from pydantic import BaseModel

from runner.tools.mcp import tools_from_listing
from runner.tools.mcp_client import McpClient
from runner.tools.openapi_convert import convert_operations
from runner.tools.openapi_spec import OpenApiDocument
from runner.tools.python import tool_from_function
from runner.tools.refs import MAX_INLINED_NODES, MAX_REF_DEPTH
from runner.tools.schema import inline_refs


class Node(BaseModel):
    """A tree node."""

    name: str
    parent: Node | None = None


def _openapi_parameters(schemas: dict[str, Any], root: str) -> dict[str, Any]:
    """The tool parameters an OpenAPI operation taking ``#/components/schemas/<root>`` as its body gets."""
    body = {"content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{root}"}}}}
    operation = {"operationId": "op", "requestBody": body, "responses": {"200": {"description": "ok"}}}
    data = {
        "openapi": "3.1.0",
        "info": {"title": "t", "version": "1"},
        "paths": {"/op": {"post": operation}},
        "components": {"schemas": schemas},
    }
    (plan,) = convert_operations(OpenApiDocument(data, "file:///t/openapi.json", "test"))
    parameters: dict[str, Any] = plan.parameters
    return parameters


def _mcp_parameters(schemas: dict[str, Any], root: str) -> dict[str, Any]:
    """The parameters of a listed MCP tool whose input schema is ``#/$defs/<root>``."""
    listed = types.Tool(name="op", inputSchema={"$ref": f"#/$defs/{root}", "$defs": schemas})
    (tool,), skipped = tools_from_listing(cast(McpClient, SimpleNamespace(tools=(listed,))), source_id="mcp")
    assert skipped == []
    return tool.parameters


def _chain(length: int) -> dict[str, Any]:
    """Schemas ``D0 -> D1 -> ... -> D<length>``, each holding the next in property ``next``."""
    schemas: dict[str, Any] = {
        f"D{i}": {"type": "object", "properties": {"next": {"$ref": f"#/components/schemas/D{i + 1}"}}}
        for i in range(length)
    }
    schemas[f"D{length}"] = {"type": "object", "properties": {"leaf": {"type": "string"}}}
    return schemas


def _as_defs(schemas: dict[str, Any]) -> dict[str, Any]:
    """The same schemas with their references pointing into ``$defs``."""
    converted: dict[str, Any] = json.loads(json.dumps(schemas).replace("#/components/schemas/", "#/$defs/"))
    return converted


def _nodes(schema: Any) -> int:
    if isinstance(schema, dict):
        return 1 + sum(_nodes(value) for value in schema.values())
    if isinstance(schema, list):
        return sum(_nodes(item) for item in schema)
    return 0


def test_a_recursive_model_gets_the_same_placeholder_from_python_mcp_and_openapi() -> None:
    python = tool_from_function(_take_node).parameters["properties"]["node"]["properties"]["parent"]
    schemas = {
        "Node": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "parent": {"$ref": "#/components/schemas/Node"}},
        }
    }
    openapi = _openapi_parameters(schemas, "Node")["properties"]["parent"]
    mcp = _mcp_parameters(_as_defs(schemas), "Node")["properties"]["parent"]
    assert python == openapi == mcp == {"type": "object", "description": "(recursive: Node)"}


def _take_node(node: Node) -> str:
    """Take a node."""
    return node.name


def test_a_long_reference_chain_is_cut_at_the_same_depth_with_the_same_placeholder() -> None:
    schemas = _chain(MAX_REF_DEPTH + 8)
    openapi = _openapi_parameters(schemas, "D0")
    mcp = _mcp_parameters(_as_defs(schemas), "D0")
    assert openapi == mcp
    node = openapi
    for _ in range(MAX_REF_DEPTH):
        node = node["properties"]["next"]
    assert node == {"type": "object", "description": f"(too deeply nested: D{MAX_REF_DEPTH})"}


def test_mutually_doubling_references_stay_within_the_node_budget() -> None:
    # Each level refers to the next twice: fully inlined, 18 levels are 2**18 copies of the last one.
    levels = 18
    defs: dict[str, Any] = {
        f"L{i}": {
            "type": "object",
            "properties": {"a": {"$ref": f"#/$defs/L{i + 1}"}, "b": {"$ref": f"#/$defs/L{i + 1}"}},
        }
        for i in range(levels)
    }
    defs[f"L{levels}"] = {"type": "string"}
    inlined = inline_refs({"$ref": "#/$defs/L0", "$defs": defs})
    assert _nodes(inlined) <= 3 * MAX_INLINED_NODES
    assert "(too deeply nested: L" in repr(inlined)
    components = json.loads(json.dumps(defs).replace("#/$defs/", "#/components/schemas/"))
    assert _nodes(_openapi_parameters(components, "L0")) <= 3 * MAX_INLINED_NODES


def test_a_reference_to_itself_ends_in_the_placeholder_everywhere() -> None:
    openapi = _openapi_parameters(
        {"Loop": {"$ref": "#/components/schemas/Loop"}, "Box": _box("#/components/schemas/Loop")}, "Box"
    )
    mcp = _mcp_parameters({"Loop": {"$ref": "#/$defs/Loop"}, "Box": _box("#/$defs/Loop")}, "Box")
    assert openapi == mcp
    assert openapi["properties"]["loop"] == {"type": "object", "description": "(recursive: Loop)"}


def _box(ref: str) -> dict[str, Any]:
    return {"type": "object", "properties": {"loop": {"$ref": ref}}}


def test_inlining_shares_nothing_with_the_input() -> None:
    schema = {"type": "object", "properties": {"x": {"$ref": "#/$defs/E"}}, "$defs": {"E": {"enum": ["a"]}}}
    inlined = inline_refs(schema)
    inlined["properties"]["x"]["enum"].append("b")
    assert schema["$defs"]["E"]["enum"] == ["a"]
