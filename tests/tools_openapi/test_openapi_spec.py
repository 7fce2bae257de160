"""OpenAPI documents: loading (file, URL, cache), refusing bad input, $ref resolution and conversion."""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from runner.errors import ConfigError
from runner.tools.base import Tool
from runner.tools.openapi import load_source
from runner.tools.openapi_convert import convert_operations
from runner.tools.openapi_spec import OpenApiDocument, load_document, parse_document
from runner.tools.sources import SourceContext

from .conftest import MakeSource, RunningServer, WriteDoc, closed_port

NAME_PATTERN = r"^[a-zA-Z0-9_-]{1,64}$"


def doc(paths: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "paths": paths, **extra}


def ok(**fields: Any) -> dict[str, Any]:
    return {"responses": {"200": {"description": "ok"}}, **fields}


def convert(document: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """The plans of a document by tool name."""
    plans = convert_operations(OpenApiDocument(document, "file:///t/openapi.yaml", "test"), **kwargs)
    return {plan.name: plan for plan in plans}


async def load_tools(spec: Any, ctx: SourceContext) -> dict[str, Tool]:
    async with AsyncExitStack() as stack:
        loaded = await load_source(spec, ctx, stack)
    return {tool.name: tool for tool in loaded.tools}


# ---- loading -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["api/openapi.yaml", "api/openapi.json"])
async def test_file_is_read_relative_to_the_agent_file(
    name: str, write_doc: WriteDoc, make_source: MakeSource, source_ctx: SourceContext, tmp_path: Path
) -> None:
    (tmp_path / "api").mkdir()
    write_doc(doc({"/pets": {"get": ok(operationId="listPets")}}), name)
    tools = await load_tools(make_source(name, id="shop", base_url="http://127.0.0.1:9"), source_ctx)
    assert list(tools) == ["listPets"]
    assert tools["listPets"].source_kind == "openapi"
    assert tools["listPets"].source_id == "shop"


async def test_missing_file_is_config_error(make_source: MakeSource, source_ctx: SourceContext) -> None:
    with pytest.raises(ConfigError, match=r"openapi source 'shop': cannot read .*nope\.yaml: file not found"):
        await load_document(make_source("nope.yaml", id="shop"), source_ctx)


async def test_unreachable_url_is_config_error_naming_the_source(
    make_source: MakeSource, source_ctx: SourceContext
) -> None:
    url = f"http://127.0.0.1:{closed_port()}/openapi.json"
    with pytest.raises(ConfigError) as caught:
        await load_document(make_source(url, id="shop"), source_ctx)
    assert caught.value.message.startswith(f"openapi source 'shop': cannot fetch {url}")
    assert caught.value.hint and "server running" in caught.value.hint


async def test_error_status_of_the_document_url_is_config_error(
    petstore: RunningServer, make_source: MakeSource, source_ctx: SourceContext
) -> None:
    with pytest.raises(ConfigError, match=r"missing\.json answered HTTP 404 Not Found"):
        await load_document(make_source(f"{petstore.url}/missing.json"), source_ctx)


async def test_fetched_document_is_cached_until_the_ttl_or_a_refresh(
    petstore: RunningServer, make_source: MakeSource, source_ctx: SourceContext
) -> None:
    spec = make_source(petstore.document_url)
    first = await load_document(spec, source_ctx)
    second = await load_document(spec, source_ctx)
    assert first.data == second.data and first.url == petstore.document_url
    assert petstore.shop.document_fetches == 1
    assert len(list((source_ctx.cache_dir / "openapi").glob("*.json"))) == 1
    source_ctx.refresh = True
    await load_document(spec, source_ctx)
    assert petstore.shop.document_fetches == 2
    source_ctx.refresh = False
    source_ctx.openapi_cache_ttl_s = 0
    await load_document(spec, source_ctx)
    assert petstore.shop.document_fetches == 3


async def test_stale_cache_is_used_when_the_server_is_down(
    make_source: MakeSource, source_ctx: SourceContext, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"http://127.0.0.1:{closed_port()}/openapi.json"
    document = doc({"/pets": {"get": ok(operationId="listPets")}})
    cache = source_ctx.cache_dir / "openapi" / f"{hashlib.sha256(url.encode()).hexdigest()[:32]}.json"
    cache.parent.mkdir(parents=True)
    cache.write_text(json.dumps({"url": url, "fetched_at": time.time() - 7200, "document": document}))
    with caplog.at_level(logging.WARNING, logger="tests.openapi"):
        loaded = await load_document(make_source(url), source_ctx)
    assert loaded.data == document
    assert "using the copy cached" in caplog.text


# ---- refusing what is not OpenAPI 3 --------------------------------------------------------------


def test_swagger_2_is_refused_with_a_hint() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_document('{"swagger": "2.0", "paths": {}}', label="old", where="api.json")
    assert caught.value.message == (
        "openapi source 'old': api.json is a Swagger 2.0 document; only OpenAPI 3.0 and 3.1 are supported"
    )
    assert caught.value.hint and "swagger2openapi" in caught.value.hint


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('{"name": "not an api", "items": [1, 2]}', "it has no 'openapi' field"),
        ("- just\n- a list\n", "its top level is not a mapping"),
        ("hello", "its top level is not a mapping"),
        ("openapi: 2.5\npaths: {}\n", "declares OpenAPI 2.5"),
    ],
)
def test_documents_that_are_not_openapi_3_are_refused(text: str, reason: str) -> None:
    with pytest.raises(ConfigError, match=f"openapi source 'x': doc is not an OpenAPI|{reason}") as caught:
        parse_document(text, label="x", where="doc")
    assert reason in caught.value.message


def test_invalid_yaml_names_the_line() -> None:
    with pytest.raises(
        ConfigError, match=r"'x': api\.yaml is not valid YAML \(line 3, column 1\): found char"
    ):
        parse_document("openapi: 3.1.0\npaths:\n\t/a: {}\n", label="x", where="api.yaml")


def test_invalid_json_names_the_line() -> None:
    with pytest.raises(ConfigError, match=r"'x': api\.json is not valid JSON \(line 2, column \d+"):
        parse_document('{"openapi": "3.1.0",\n "paths": {,}}', label="x", where="api.json")


async def test_invalid_document_from_a_file_names_the_source(
    write_doc: WriteDoc, make_source: MakeSource, source_ctx: SourceContext
) -> None:
    write_doc('{"openapi": "3.0.0", "paths": ', "broken.json")
    with pytest.raises(ConfigError, match=r"^openapi source 'broken': .*broken\.json is not valid JSON"):
        await load_document(make_source("broken.json", id="broken"), source_ctx)


def test_document_without_operations_is_config_error() -> None:
    with pytest.raises(ConfigError, match="the document defines no operations"):
        convert(doc({}, webhooks={}))


def test_yaml_dates_stay_strings() -> None:
    text = "openapi: 3.0.3\npaths: {}\ncomponents: {schemas: {D: {example: 2024-01-31}}}\n"
    data = parse_document(text, label="x", where="d.yaml")
    assert data["components"]["schemas"]["D"]["example"] == "2024-01-31"


# ---- names and descriptions ----------------------------------------------------------------------


def test_operation_without_operation_id_is_named_from_method_and_path() -> None:
    plans = convert(doc({"/pets/{petId}": {"get": ok(), "delete": ok()}, "/": {"post": ok()}}))
    assert list(plans) == ["get_pets_petId", "delete_pets_petId", "post"]


def test_operation_ids_are_sanitized_shortened_and_unique() -> None:
    long_id = "a" * 80
    plans = convert(
        doc(
            {
                "/a": {"get": ok(operationId="find pet by id"), "post": ok(operationId="pets.create")},
                "/b": {"get": ok(operationId="find pet by id"), "put": ok(operationId=long_id)},
            }
        )
    )
    assert list(plans)[:3] == ["find_pet_by_id", "pets_create", "find_pet_by_id_2"]
    assert all(re.match(NAME_PATTERN, name) for name in plans)
    assert len(list(plans)[3]) == 64


def test_description_is_summary_then_description() -> None:
    plans = convert(
        doc(
            {
                "/a": {
                    "get": ok(operationId="a", summary="List pets.", description="Newest first."),
                    "post": ok(operationId="b", deprecated=True),
                    "put": ok(operationId="c", description="x" * 3000),
                }
            }
        )
    )
    assert plans["a"].description == "List pets.\n\nNewest first."
    assert plans["b"].description == "(deprecated) POST /a"
    assert len(plans["c"].description) == 1024 and plans["c"].description.endswith("…")


# ---- parameters and bodies -----------------------------------------------------------------------


def test_path_level_and_operation_parameters_merge_the_operation_winning() -> None:
    plans = convert(
        doc(
            {
                "/pets/{petId}": {
                    "parameters": [
                        {"name": "petId", "in": "path", "required": True, "schema": {"type": "integer"}},
                        {
                            "name": "limit",
                            "in": "query",
                            "description": "path level",
                            "schema": {"type": "integer"},
                        },
                    ],
                    "get": ok(
                        operationId="show",
                        parameters=[
                            {
                                "name": "limit",
                                "in": "query",
                                "description": "operation level",
                                "schema": {"type": "string"},
                            },
                            {
                                "name": "X-Request-Id",
                                "in": "header",
                                "required": True,
                                "schema": {"type": "string"},
                            },
                            {"name": "session", "in": "cookie", "schema": {"type": "string"}},
                            {"name": "petId", "in": "query", "schema": {"type": "boolean"}},
                        ],
                    ),
                }
            }
        )
    )
    plan = plans["show"]
    assert plan.parameters == {
        "type": "object",
        "properties": {
            "petId": {"type": "integer"},
            "limit": {"type": "string", "description": "operation level"},
            "X-Request-Id": {"type": "string"},
            "session": {"type": "string"},
            "query_petId": {"type": "boolean"},
        },
        "required": ["petId", "X-Request-Id"],
    }
    assert [(p.prop, p.name, p.location) for p in plan.params] == [
        ("petId", "petId", "path"),
        ("limit", "limit", "query"),
        ("X-Request-Id", "X-Request-Id", "header"),
        ("session", "session", "cookie"),
        ("query_petId", "petId", "query"),
    ]


def test_authorization_and_configured_headers_are_not_offered_to_the_model() -> None:
    header = {"in": "header", "schema": {"type": "string"}}
    plans = convert(
        doc(
            {
                "/a": {
                    "get": ok(
                        operationId="a",
                        parameters=[
                            {"name": "Authorization", **header},
                            {"name": "X-Api-Key", **header},
                            {"name": "X-Trace", **header},
                        ],
                    )
                }
            }
        ),
        fixed_headers=["x-api-key"],
    )
    assert list(plans["a"].parameters["properties"]) == ["X-Trace"]


def test_undeclared_template_variable_becomes_a_required_string() -> None:
    plan = convert(doc({"/files/{name}": {"get": ok(operationId="f")}}))["f"]
    assert plan.parameters["properties"] == {"name": {"type": "string"}}
    assert plan.parameters["required"] == ["name"]


def test_object_body_properties_are_merged_with_their_required_list() -> None:
    body = {
        "required": True,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/NewPet"}}},
    }
    document = doc(
        {
            "/pets": {
                "post": ok(
                    operationId="create",
                    requestBody=body,
                    parameters=[{"name": "dryRun", "in": "query", "schema": {"type": "boolean"}}],
                )
            }
        },
        components={
            "schemas": {
                "NewPet": {
                    "type": "object",
                    "required": ["name"],
                    "properties": {
                        "id": {"type": "integer", "readOnly": True},
                        "name": {"type": "string"},
                        "tag": {"type": "string"},
                    },
                }
            }
        },
    )
    plan = convert(document)["create"]
    assert plan.parameters["properties"] == {
        "dryRun": {"type": "boolean"},
        "name": {"type": "string"},
        "tag": {"type": "string"},
    }
    assert plan.parameters["required"] == ["name"]
    assert plan.body is not None and plan.body.prop is None
    assert plan.body.fields == (("name", "name"), ("tag", "tag"))


def test_all_of_body_is_flattened_before_merging() -> None:
    schemas = {
        "NewPet": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}},
        "Pet": {
            "allOf": [
                {"$ref": "#/components/schemas/NewPet"},
                {"type": "object", "required": ["id"], "properties": {"id": {"type": "integer"}}},
            ]
        },
    }
    body = {
        "required": True,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Pet"}}},
    }
    plan = convert(
        doc({"/p": {"put": ok(operationId="put", requestBody=body)}}, components={"schemas": schemas})
    )
    assert plan["put"].parameters["properties"] == {"name": {"type": "string"}, "id": {"type": "integer"}}
    assert plan["put"].parameters["required"] == ["name", "id"]


def test_body_whose_names_clash_with_parameters_becomes_one_body_property() -> None:
    body = {
        "description": "The pet.",
        "required": True,
        "content": {
            "application/json": {
                "schema": {"type": "object", "required": ["id"], "properties": {"id": {"type": "integer"}}}
            }
        },
    }
    plan = convert(
        doc(
            {
                "/pets/{id}": {
                    "put": ok(
                        operationId="update",
                        requestBody=body,
                        parameters=[
                            {"name": "id", "in": "path", "required": True, "schema": {"type": "integer"}}
                        ],
                    )
                }
            }
        )
    )["update"]
    assert plan.parameters["properties"]["body"] == {
        "type": "object",
        "required": ["id"],
        "properties": {"id": {"type": "integer"}},
        "description": "The pet.",
    }
    assert plan.parameters["required"] == ["id", "body"]
    assert plan.body is not None and plan.body.prop == "body"


def test_array_and_text_bodies_are_one_body_property() -> None:
    array = {"content": {"application/json": {"schema": {"type": "array", "items": {"type": "string"}}}}}
    text = {"required": True, "content": {"text/plain": {}}}
    plans = convert(
        doc(
            {
                "/a": {
                    "post": ok(operationId="a", requestBody=array),
                    "put": ok(operationId="t", requestBody=text),
                }
            }
        )
    )
    assert plans["a"].parameters["properties"]["body"] == {"type": "array", "items": {"type": "string"}}
    assert "required" not in plans["a"].parameters
    assert plans["t"].parameters["properties"]["body"] == {"type": "string"}
    assert plans["t"].body is not None and plans["t"].body.media_type == "text/plain"


def test_operation_with_only_an_unsupported_required_body_is_skipped_with_a_warning() -> None:
    upload = {"required": True, "content": {"multipart/form-data": {"schema": {"type": "object"}}}}
    warnings: list[str] = []
    plans = convert(
        doc({"/up": {"post": ok(operationId="upload", requestBody=upload), "get": ok(operationId="list")}}),
        warn=warnings.append,
    )
    assert list(plans) == ["list"]
    assert warnings == [
        "openapi source 'test': POST /up skipped (its request body has no JSON, form or text media type)"
    ]


def test_openapi_30_boolean_exclusive_bounds_become_numbers() -> None:
    schema = {
        "type": "integer",
        "minimum": 0,
        "exclusiveMinimum": True,
        "maximum": 9,
        "exclusiveMaximum": False,
    }
    plan = convert(
        doc({"/a": {"get": ok(operationId="a", parameters=[{"name": "n", "in": "query", "schema": schema}])}})
    )["a"]
    assert plan.parameters["properties"]["n"] == {"type": "integer", "maximum": 9, "exclusiveMinimum": 0}


# ---- $ref ----------------------------------------------------------------------------------------


def _recursive_document() -> dict[str, Any]:
    schemas = {
        "Node": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "children": {"type": "array", "items": {"$ref": "#/components/schemas/Node"}},
            },
        },
        "A": {"type": "object", "properties": {"b": {"$ref": "#/components/schemas/B"}}},
        "B": {"type": "object", "properties": {"a": {"$ref": "#/components/schemas/A"}}},
        "Loop": {"$ref": "#/components/schemas/Loop"},
    }
    body = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Node"}}}}
    params = [
        {"$ref": "#/components/parameters/Filter"},
        {"name": "loop", "in": "query", "schema": {"$ref": "#/components/schemas/Loop"}},
    ]
    return doc(
        {"/tree": {"post": ok(operationId="tree", requestBody=body, parameters=params)}},
        components={
            "schemas": schemas,
            "parameters": {
                "Filter": {"name": "filter", "in": "query", "schema": {"$ref": "#/components/schemas/A"}}
            },
        },
    )


def test_recursive_schemas_terminate_with_a_generic_object_where_they_recur() -> None:
    plan = convert(_recursive_document())["tree"]
    props = plan.parameters["properties"]
    assert props["children"]["items"] == {"type": "object", "description": "(recursive: Node)"}
    assert props["filter"]["properties"]["b"]["properties"]["a"] == {
        "type": "object",
        "description": "(recursive: A)",
    }
    assert props["loop"] == {"type": "object", "description": "(recursive: Loop)"}
    Draft202012Validator.check_schema(plan.parameters)


async def test_recursive_document_loads_as_tools(
    write_doc: WriteDoc, make_source: MakeSource, source_ctx: SourceContext
) -> None:
    write_doc({**_recursive_document(), "servers": [{"url": "http://127.0.0.1:9/v1"}]}, "tree.json")
    tools = await load_tools(make_source("tree.json"), source_ctx)
    assert list(tools) == ["tree"]


def test_dangling_ref_is_config_error() -> None:
    body = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Missing"}}}}
    with pytest.raises(ConfigError, match=r"'test': \$ref '#/components/schemas/Missing' points to nothing"):
        convert(doc({"/a": {"post": ok(operationId="a", requestBody=body)}}))


def test_external_ref_is_config_error_with_a_hint() -> None:
    params = [{"$ref": "common.yaml#/components/parameters/Limit"}]
    with pytest.raises(ConfigError, match=r"external \$ref 'common\.yaml#/.*' is not supported") as caught:
        convert(doc({"/a": {"get": ok(operationId="a", parameters=params)}}))
    assert caught.value.hint and "bundle" in caught.value.hint


def test_parameter_ref_cycle_is_config_error() -> None:
    document = doc(
        {"/a": {"get": ok(operationId="a", parameters=[{"$ref": "#/components/parameters/P"}])}},
        components={
            "parameters": {
                "P": {"$ref": "#/components/parameters/Q"},
                "Q": {"$ref": "#/components/parameters/P"},
            }
        },
    )
    with pytest.raises(ConfigError, match=r"\$ref cycle: #/components/parameters/P -> .*Q -> .*P"):
        convert(document)


def test_refs_with_escaped_pointers_resolve() -> None:
    document = doc(
        {
            "/a/b": {
                "get": ok(
                    operationId="a", parameters=[{"name": "x", "in": "query", "schema": {"type": "integer"}}]
                )
            },
            "/c": {"$ref": "#/paths/~1a~1b"},
        }
    )
    plans = convert(document)
    assert list(plans) == ["a", "a_2"]
    assert plans["a_2"].path == "/c"


# ---- scale and validity --------------------------------------------------------------------------


def generated_document(operations: int) -> dict[str, Any]:
    """A document with ``operations`` operations over shared components (used by the benchmark too)."""
    paths: dict[str, Any] = {}
    for i in range(operations // 2):
        item_ref = {"$ref": f"#/components/schemas/Item{i % 20}"}
        paths[f"/things{i}/{{thingId}}"] = {
            "parameters": [{"$ref": "#/components/parameters/ThingId"}],
            "get": ok(
                operationId=f"getThing{i}",
                summary=f"Get thing {i}",
                parameters=[
                    {
                        "name": "fields",
                        "in": "query",
                        "schema": {"type": "array", "items": {"type": "string"}},
                    }
                ],
            ),
            "put": ok(
                operationId=f"putThing{i}",
                requestBody={"required": True, "content": {"application/json": {"schema": item_ref}}},
            ),
        }
    schemas = {
        f"Item{n}": {
            "type": "object",
            "required": ["name"],
            "properties": {
                "name": {"type": "string"},
                "size": {"type": "integer", "minimum": 0},
                "owner": {"$ref": "#/components/schemas/Owner"},
                "parent": {"$ref": f"#/components/schemas/Item{n}"},
            },
        }
        for n in range(20)
    }
    schemas["Owner"] = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "email": {"type": "string"}},
    }
    return doc(
        paths,
        components={
            "schemas": schemas,
            "parameters": {
                "ThingId": {"name": "thingId", "in": "path", "required": True, "schema": {"type": "integer"}}
            },
        },
    )


def test_a_thousand_operations_convert() -> None:
    plans = convert(generated_document(1000))
    assert len(plans) == 1000
    assert plans["putThing499"].parameters["required"] == ["thingId", "name"]
    assert plans["putThing499"].parameters["properties"]["parent"]["description"] == "(recursive: Item19)"


def test_every_converted_schema_is_valid_json_schema() -> None:
    published = (Path(__file__).parent / "specs" / "petstore-expanded.yaml").read_text(encoding="utf-8")
    documents = [
        _recursive_document(),
        generated_document(40),
        parse_document(published, label="petstore", where="petstore-expanded.yaml"),
    ]
    for document in documents:
        for plan in convert(document).values():
            Draft202012Validator.check_schema(plan.parameters)
            assert plan.parameters["type"] == "object"
