"""Schema hygiene: every cleaned schema is a valid, self-contained object schema models accept."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from runner.tools.schema import clean_schema, inline_refs


def _schema_nodes(schema: Any) -> list[dict[str, Any]]:
    """Every schema object inside ``schema`` (not property names or enum values)."""
    if not isinstance(schema, dict):
        return []
    nodes = [schema]
    for key in ("items", "additionalProperties", "not"):
        nodes += _schema_nodes(schema.get(key))
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        for sub in schema.get(key, []):
            nodes += _schema_nodes(sub)
    for sub in schema.get("properties", {}).values():
        nodes += _schema_nodes(sub)
    return nodes


def _props(schema: dict[str, Any]) -> dict[str, Any]:
    props: dict[str, Any] = clean_schema({"type": "object", "properties": schema})["properties"]
    return props


def test_any_of_with_null_collapses_to_the_other_type_keeping_outer_keys() -> None:
    props = _props({"n": {"anyOf": [{"type": "integer"}, {"type": "null"}], "description": "count"}})
    assert props["n"] == {"type": "integer", "description": "count"}


def test_one_of_with_null_collapses_too() -> None:
    props = _props({"s": {"oneOf": [{"type": "null"}, {"type": "string", "minLength": 1}]}})
    assert props["s"] == {"type": "string", "minLength": 1}


def test_wider_union_only_loses_its_null_member() -> None:
    props = _props({"v": {"anyOf": [{"type": "integer"}, {"type": "string"}, {"type": "null"}]}})
    assert props["v"] == {"anyOf": [{"type": "integer"}, {"type": "string"}]}


def test_type_list_with_null_becomes_a_single_type() -> None:
    assert _props({"s": {"type": ["string", "null"]}})["s"] == {"type": "string"}


def test_null_defaults_are_dropped_and_other_defaults_kept() -> None:
    props = _props({"a": {"type": "string", "default": None}, "b": {"type": "integer", "default": 0}})
    assert props["a"] == {"type": "string"}
    assert props["b"] == {"type": "integer", "default": 0}


@pytest.mark.parametrize(
    ("python_name", "json_name"),
    [
        ("str", "string"),
        ("int", "integer"),
        ("float", "number"),
        ("bool", "boolean"),
        ("dict", "object"),
        ("list", "array"),
    ],
)
def test_python_type_names_are_normalised(python_name: str, json_name: str) -> None:
    assert _props({"x": {"type": python_name}})["x"]["type"] == json_name


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({}, "string"),
        ({"description": "free text"}, "string"),
        ({"properties": {"a": {"type": "string"}}}, "object"),
        ({"items": {"type": "string"}}, "array"),
        ({"enum": [1, 2, 3]}, "integer"),
        ({"enum": ["a", None]}, "string"),
        ({"const": True}, "boolean"),
    ],
)
def test_a_property_without_type_gets_one(schema: dict[str, Any], expected: str) -> None:
    assert _props({"x": schema})["x"]["type"] == expected


def test_a_union_property_is_not_given_a_type() -> None:
    props = _props({"x": {"anyOf": [{"type": "integer"}, {"type": "string"}]}})
    assert "type" not in props["x"]


def test_null_members_are_removed_from_enums() -> None:
    assert _props({"x": {"enum": ["a", "b", None]}})["x"]["enum"] == ["a", "b"]


def test_root_metadata_keys_are_stripped_but_a_property_named_title_is_kept() -> None:
    cleaned = clean_schema(
        {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": "urn:x",
            "title": "Args",
            "type": "object",
            "properties": {"title": {"type": "string", "title": "Title"}},
        }
    )
    assert cleaned == {"type": "object", "properties": {"title": {"type": "string"}}}


def test_provider_rejected_keywords_are_removed_everywhere() -> None:
    props = _props(
        {"x": {"type": "object", "nullable": True, "discriminator": {"propertyName": "k"}, "$comment": "c"}}
    )
    assert props["x"] == {"type": "object"}


@pytest.mark.parametrize(
    "root", [None, {}, {"type": "string"}, {"type": "array", "items": {}}, {"properties": {}}]
)
def test_root_is_always_an_object_with_properties(root: Any) -> None:
    assert clean_schema(root) == {"type": "object", "properties": {}}


def test_required_lists_only_existing_properties_once() -> None:
    cleaned = clean_schema(
        {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a", "ghost", "a"]}
    )
    assert cleaned["required"] == ["a"]


def test_empty_required_is_omitted() -> None:
    cleaned = clean_schema({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]})
    assert "required" not in cleaned


def test_double_underscore_properties_are_removed_with_their_required_entry() -> None:
    cleaned = clean_schema(
        {
            "type": "object",
            "properties": {"__user__": {"type": "object"}, "q": {"type": "string"}},
            "required": ["__user__", "q"],
        }
    )
    assert list(cleaned["properties"]) == ["q"]
    assert cleaned["required"] == ["q"]


def test_local_refs_are_inlined_and_defs_dropped() -> None:
    cleaned = clean_schema(
        {
            "type": "object",
            "properties": {"p": {"$ref": "#/$defs/Point", "description": "where"}},
            "$defs": {"Point": {"type": "object", "title": "Point", "properties": {"x": {"type": "number"}}}},
        }
    )
    assert cleaned["properties"]["p"] == {
        "type": "object",
        "properties": {"x": {"type": "number"}},
        "description": "where",
    }
    assert "$defs" not in json.dumps(cleaned)


def test_recursive_refs_end_in_an_object_placeholder() -> None:
    schema = {
        "type": "object",
        "properties": {"root": {"$ref": "#/definitions/Node"}},
        "definitions": {
            "Node": {
                "type": "object",
                "properties": {"children": {"type": "array", "items": {"$ref": "#/definitions/Node"}}},
            }
        },
    }
    children = clean_schema(schema)["properties"]["root"]["properties"]["children"]
    assert children["items"]["type"] == "object"
    assert "recursive" in children["items"]["description"]
    assert "$ref" not in json.dumps(clean_schema(schema))


def test_unresolvable_refs_become_described_objects() -> None:
    props = _props({"x": {"$ref": "https://example.com/other.json#/Thing"}})
    assert props["x"]["type"] == "object"
    assert "unresolved" in props["x"]["description"]


def test_inline_refs_resolves_escaped_json_pointers() -> None:
    schema = {"$ref": "#/$defs/a~1b", "$defs": {"a/b": {"type": "integer"}}}
    assert inline_refs(schema) == {"type": "integer"}


def test_cleaning_does_not_mutate_its_input_and_is_deterministic() -> None:
    schema = {
        "title": "T",
        "type": "object",
        "properties": {"a": {"anyOf": [{"$ref": "#/$defs/A"}, {"type": "null"}], "default": None}},
        "$defs": {"A": {"type": "object", "properties": {"k": {"type": "str"}}}},
    }
    original = copy.deepcopy(schema)
    first = json.dumps(clean_schema(schema))
    assert schema == original
    assert json.dumps(clean_schema(copy.deepcopy(schema))) == first


def test_cleaned_schemas_of_known_shapes_are_valid_json_schema() -> None:
    shapes: list[dict[str, Any]] = [
        {"type": "object", "properties": {"a": {"type": ["str", "null"]}, "b": {"enum": [1, None]}}},
        {
            "type": "object",
            "properties": {"c": {"anyOf": [{"$ref": "#/$defs/X"}, {"type": "null"}]}},
            "$defs": {"X": {"type": "dict", "properties": {"y": {"type": "list", "items": {"type": "int"}}}}},
        },
    ]
    for shape in shapes:
        Draft202012Validator.check_schema(clean_schema(shape))


_types = st.sampled_from(["string", "integer", "number", "boolean", "str", "int", "float", "bool", "null"])
_leaf = st.one_of(
    st.builds(lambda t: {"type": t}, _types),
    st.builds(lambda t: {"type": [t, "null"]}, _types),
    st.just({}),
    st.just({"enum": ["a", None]}),
    st.just({"$ref": "#/$defs/Thing"}),
    st.just({"default": None, "title": "x"}),
)
_schemas = st.recursive(
    _leaf,
    lambda inner: st.one_of(
        st.builds(lambda s: {"anyOf": [s, {"type": "null"}]}, inner),
        st.builds(lambda s: {"type": "array", "items": s}, inner),
        st.builds(
            lambda props: {"type": "object", "properties": props, "required": list(props)[:1]},
            st.dictionaries(st.sampled_from(["a", "b", "__c__", "title", "$ref"]), inner, max_size=3),
        ),
    ),
    max_leaves=8,
)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.sampled_from(["p", "q", "__r__", "type"]), _schemas, max_size=4))
def test_any_cleaned_schema_is_valid_self_contained_and_stable(properties: dict[str, Any]) -> None:
    schema = {
        "type": "object",
        "properties": properties,
        "$defs": {"Thing": {"type": "object", "properties": {"t": {"$ref": "#/$defs/Thing"}}}},
    }
    cleaned = clean_schema(schema)
    Draft202012Validator.check_schema(cleaned)
    assert cleaned["type"] == "object"
    assert isinstance(cleaned["properties"], dict)
    assert not any(name.startswith("__") for name in cleaned["properties"])
    assert all("$ref" not in node and "$defs" not in node for node in _schema_nodes(cleaned))
    assert clean_schema(cleaned) == cleaned
