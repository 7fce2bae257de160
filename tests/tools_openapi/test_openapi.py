"""OpenAPI tools calling the example pet shop (uvicorn on 127.0.0.1): what is sent, what comes back."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Any

import httpx
import pytest

from runner.errors import ConfigError, ToolError
from runner.runtime.sources import SourceSet
from runner.tools.base import RunContext, Tool
from runner.tools.executor import ParsedCall, execute_calls
from runner.tools.openapi import (
    OpenApiCall,
    Target,
    build_request,
    load_source,
    read_response,
    resolve_target,
)
from runner.tools.openapi_convert import convert_operations
from runner.tools.openapi_spec import OpenApiDocument
from runner.tools.sources import SourceContext

from .conftest import MakeSource, RunningServer, closed_port

CTX = RunContext(session_id="s1", agent="tester")


@pytest.fixture
async def shop_tools(
    petstore: RunningServer, make_source: MakeSource, source_ctx: SourceContext
) -> AsyncIterator[dict[str, Tool]]:
    """The pet shop's tools, loaded from its /openapi.json, with configured headers."""
    spec = make_source(
        petstore.document_url, id="petstore", headers={"Authorization": "Bearer s3cret", "X-Shop-Key": "k-1"}
    )
    async with AsyncExitStack() as stack:
        loaded = await load_source(spec, source_ctx, stack)
        yield {tool.name: tool for tool in loaded.tools}


async def call(tools: dict[str, Tool], name: str, /, **arguments: Any) -> Any:
    return await tools[name].call(arguments, CTX)


async def test_one_tool_per_operation_with_merged_parameters(shop_tools: dict[str, Tool]) -> None:
    assert list(shop_tools) == [
        "listPets",
        "createPet",
        "showPetById",
        "delete_pets_petId",
        "petCard",
        "echo",
        "boom",
        "slow",
    ]
    create = shop_tools["createPet"]
    assert create.description == "Add a pet to the shop"
    assert create.parameters == {
        "type": "object",
        "properties": {
            "X-Owner": {"type": "string", "description": "Who brings the pet in."},
            "name": {"type": "string"},
            "tag": {"type": "string"},
        },
        "required": ["name"],
    }
    assert shop_tools["listPets"].description == (
        "List the pets\n\nNewest last. Filter by tag, and cap the count with limit."
    )
    assert shop_tools["delete_pets_petId"].parameters["required"] == ["petId"]
    assert {t.source_kind for t in shop_tools.values()} == {"openapi"}


async def test_body_header_path_and_query_reach_the_server(
    shop_tools: dict[str, Tool], petstore: RunningServer
) -> None:
    created = await call(shop_tools, "createPet", name="Bella", tag="dog", **{"X-Owner": "Ana"})
    assert created == '{"id":3,"name":"Bella","tag":"dog","owner":"Ana"}'
    assert petstore.shop.pets[3]["owner"] == "Ana"
    listed = json.loads(await call(shop_tools, "listPets", tag="dog", limit=5))
    assert [pet["name"] for pet in listed] == ["Rex", "Bella"]
    assert json.loads(await call(shop_tools, "listPets", limit=1)) == [petstore.shop.pets[1]]
    assert json.loads(await call(shop_tools, "showPetById", petId=2))["name"] == "Tom"


async def test_header_parameters_and_configured_headers_are_really_sent(shop_tools: dict[str, Tool]) -> None:
    seen = json.loads(await call(shop_tools, "echo", value="v", q="a b&c=d", **{"X-Trace": "t-42"}))
    assert seen["raw_path"] == "/api/echo/v"
    assert seen["query"] == [["q", "a b&c=d"]]
    assert seen["headers"]["x-trace"] == "t-42"
    assert seen["headers"]["authorization"] == "Bearer s3cret"
    assert seen["headers"]["x-shop-key"] == "k-1"


@pytest.mark.parametrize(
    ("value", "raw"),
    [
        ("../", "..%2F"),
        ("..", "%2E%2E"),
        (".", "%2E"),
        ("../../openapi.json", "..%2F..%2Fopenapi.json"),
        ("x?admin=1", "x%3Fadmin%3D1"),
        ("x#frag", "x%23frag"),
        ("//evil.com", "%2F%2Fevil.com"),
        ("http://evil.com/x", "http%3A%2F%2Fevil.com%2Fx"),
        ("%2e%2e", "%252e%252e"),
        ("a b/é", "a%20b%2F%C3%A9"),
    ],
)
async def test_path_parameters_cannot_leave_the_path_or_the_host(
    value: str, raw: str, shop_tools: dict[str, Tool]
) -> None:
    seen = json.loads(await call(shop_tools, "echo", value=value))
    assert seen["raw_path"] == f"/api/echo/{raw}"
    assert seen["query"] == []
    assert seen["value"] == value  # the server decodes exactly what the model wrote


async def test_not_found_is_a_tool_error_with_status_and_body(shop_tools: dict[str, Tool]) -> None:
    with pytest.raises(ToolError) as caught:
        await call(shop_tools, "showPetById", petId=999)
    assert str(caught.value) == (
        'GET /api/pets/999 answered HTTP 404 Not Found: {"code":404,"message":"pet 999 not found"}'
    )


async def test_server_error_is_a_tool_error_with_status_and_text(shop_tools: dict[str, Tool]) -> None:
    with pytest.raises(ToolError, match=r"^GET /api/boom answered HTTP 500 Internal Server Error: kaboom"):
        await call(shop_tools, "boom")


async def test_text_response_is_returned_as_text(shop_tools: dict[str, Tool]) -> None:
    assert await call(shop_tools, "petCard", petId=1) == "Rex (dog) - pet #1"


async def test_empty_response_says_so(shop_tools: dict[str, Tool], petstore: RunningServer) -> None:
    assert await call(shop_tools, "delete_pets_petId", petId=2) == "HTTP 204 No Content (no content)"
    assert 2 not in petstore.shop.pets


async def test_timeout_is_a_tool_error(
    petstore: RunningServer, make_source: MakeSource, source_ctx: SourceContext
) -> None:
    async with AsyncExitStack() as stack:
        loaded = await load_source(make_source(petstore.document_url, timeout_s=0.2), source_ctx, stack)
        slow = next(tool for tool in loaded.tools if tool.name == "slow")
        with pytest.raises(ToolError, match=r"^GET /api/slow timed out after 0\.2 s$"):
            await slow.call({"seconds": 1}, CTX)


async def test_unreachable_api_at_call_time_is_a_tool_error(
    petstore: RunningServer, make_source: MakeSource, source_ctx: SourceContext
) -> None:
    base = f"http://127.0.0.1:{closed_port()}/v2"
    async with AsyncExitStack() as stack:
        loaded = await load_source(make_source(petstore.document_url, base_url=base), source_ctx, stack)
        with pytest.raises(ToolError, match=r"^GET /v2/pets failed: "):
            await loaded.tools[0].call({}, CTX)


async def test_one_client_per_source_closed_with_the_session(
    petstore: RunningServer, make_source: MakeSource, source_ctx: SourceContext
) -> None:
    async with AsyncExitStack() as stack:
        loaded = await load_source(make_source(petstore.document_url), source_ctx, stack)
        calls = [tool.call for tool in loaded.tools]
        assert all(isinstance(c, OpenApiCall) for c in calls)
        shared = {id(c.client) for c in calls if isinstance(c, OpenApiCall)}
        assert len(shared) == 1
        first = loaded.tools[0].call
        assert isinstance(first, OpenApiCall)
        await first({}, CTX)
        client = first.client.get()
        await loaded.tools[2].call({"petId": 1}, CTX)
        assert first.client.get() is client
    assert client.is_closed
    with pytest.raises(ToolError, match="session has ended"):
        await first({}, CTX)


async def test_full_run_through_registry_and_executor(
    petstore: RunningServer, make_source: MakeSource, source_ctx: SourceContext
) -> None:
    spec = make_source(petstore.document_url, id="petstore", exclude=("boom", "slow"))
    async with AsyncExitStack() as stack:
        sources = await SourceSet.open((spec,), source_ctx)
        stack.push_async_callback(sources.aclose)
        registry = sources.registry()
        assert "boom" not in registry and "createPet" in registry
        calls = [
            ParsedCall("c1", "createPet", '{"name": "Kiki", "tag": "bird", "X-Owner": "Bo"}'),
            ParsedCall("c2", "showPetById", '{"petId": 404}'),
            ParsedCall("c3", "showPetById", '{"petId": "one"}'),
            ParsedCall("c4", "echo", '{"value": "../../admin"}'),
        ]
        results = await execute_calls(
            calls, registry, CTX, max_parallel=4, default_timeout_s=5, output_chars=10_000
        )
    assert [r.is_error for r in results] == [False, True, True, False]
    assert json.loads(results[0].content)["owner"] == "Bo"
    assert "HTTP 404" in results[1].content and "pet 404 not found" in results[1].content
    assert json.loads(results[3].content)["raw_path"] == "/api/echo/..%2F..%2Fadmin"
    assert petstore.shop.pets[3]["name"] == "Kiki"


# ---- base URLs and requests, without a server ----------------------------------------------------


def _document(url: str, **extra: Any) -> OpenApiDocument:
    data = {"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "paths": {}, **extra}
    return OpenApiDocument(data, url, "shop")


@pytest.mark.parametrize(
    ("server", "document_url", "root"),
    [
        ("/api", "http://127.0.0.1:8080/openapi.json", "http://127.0.0.1:8080/api"),
        ("v2/", "http://h.test/specs/openapi.json", "http://h.test/specs/v2"),
        ("https://api.test/v1/", "file:///tmp/openapi.yaml", "https://api.test/v1"),
        (None, "http://h.test:9000/docs/openapi.json", "http://h.test:9000"),
    ],
)
def test_base_url_resolves_against_the_document_url(server: str | None, document_url: str, root: str) -> None:
    assert resolve_target(server, document=_document(document_url)).root == root


def test_base_url_keeps_its_own_query() -> None:
    target = resolve_target("https://api.test/v1?api-version=2", document=_document("file:///x.yaml"))
    assert target == Target("https://api.test/v1", (("api-version", "2"),))


def test_file_document_without_an_absolute_server_is_config_error() -> None:
    with pytest.raises(
        ConfigError, match=r"'shop': cannot tell where to send calls: servers\[0\]\.url '/api'"
    ) as caught:
        resolve_target("/api", document=_document("file:///tmp/openapi.yaml"), where="servers[0].url")
    assert caught.value.hint and "base_url" in caught.value.hint


def test_server_variables_take_their_defaults() -> None:
    servers = [
        {
            "url": "https://{region}.api.test/{version}",
            "variables": {"region": {"default": "eu"}, "version": {"default": "v3", "enum": ["v3"]}},
        }
    ]
    document = _document("file:///x.yaml", servers=servers, paths={"/a": {"get": {"operationId": "a"}}})
    plan = convert_operations(document)[0]
    assert plan.server_url == "https://eu.api.test/v3"


def test_request_styles_for_arrays_objects_and_cookies() -> None:
    paths = {
        "/items/{ids}": {
            "post": {
                "operationId": "find",
                "parameters": [
                    {
                        "name": "ids",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "array", "items": {"type": "integer"}},
                    },
                    {"name": "tag", "in": "query", "schema": {"type": "array", "items": {"type": "string"}}},
                    {
                        "name": "csv",
                        "in": "query",
                        "explode": False,
                        "schema": {"type": "array", "items": {"type": "string"}},
                    },
                    {"name": "filter", "in": "query", "style": "deepObject", "schema": {"type": "object"}},
                    {"name": "flag", "in": "query", "schema": {"type": "boolean"}},
                    {"name": "session", "in": "cookie", "schema": {"type": "string"}},
                    {
                        "name": "X-Ids",
                        "in": "header",
                        "schema": {"type": "array", "items": {"type": "integer"}},
                    },
                ],
                "requestBody": {
                    "content": {
                        "application/x-www-form-urlencoded": {
                            "schema": {"type": "object", "properties": {"note": {"type": "string"}}}
                        }
                    }
                },
            }
        }
    }
    plan = convert_operations(_document("http://h.test/o.json", paths=paths))[0]
    request = build_request(
        plan,
        Target("http://h.test/api"),
        {
            "ids": [1, 2],
            "tag": ["a", "b"],
            "csv": ["x", "y"],
            "filter": {"color": "red"},
            "flag": True,
            "session": "s 1",
            "X-Ids": [3, 4],
            "note": "hi there",
        },
    )
    assert request.url == "http://h.test/api/items/1,2"
    assert request.params == (
        ("tag", "a"),
        ("tag", "b"),
        ("csv", "x,y"),
        ("filter[color]", "red"),
        ("flag", "true"),
    )
    assert request.headers == {
        "X-Ids": "3,4",
        "Cookie": "session=s%201",
        "Content-Type": "application/x-www-form-urlencoded",
    }
    assert request.content == b"note=hi+there"


def test_header_values_cannot_inject_lines() -> None:
    paths = {
        "/a": {
            "get": {
                "operationId": "a",
                "parameters": [{"name": "X-Note", "in": "header", "schema": {"type": "string"}}],
            }
        }
    }
    plan = convert_operations(_document("http://h.test/o.json", paths=paths))[0]
    with pytest.raises(ToolError, match="must not contain line breaks"):
        build_request(plan, Target("http://h.test"), {"X-Note": "a\r\nX-Admin: 1"})


def test_empty_path_parameter_is_refused() -> None:
    paths = {"/pets/{id}": {"get": {"operationId": "a"}}}
    plan = convert_operations(_document("http://h.test/o.json", paths=paths))[0]
    with pytest.raises(ToolError, match="path parameter 'id' must not be empty"):
        build_request(plan, Target("http://h.test"), {"id": ""})


def test_long_error_bodies_are_cut_to_about_500_characters() -> None:
    response = httpx.Response(502, text="e" * 2000)
    with pytest.raises(ToolError) as caught:
        read_response(response, "GET /x")
    assert str(caught.value) == "GET /x answered HTTP 502 Bad Gateway: " + "e" * 500 + "…"


@pytest.mark.parametrize(
    ("response", "text"),
    [
        (httpx.Response(200, json={"a": [1, 2], "b": "é"}), '{"a":[1,2],"b":"é"}'),
        (
            httpx.Response(200, content=b'{"a": 1}', headers={"content-type": "application/problem+json"}),
            '{"a":1}',
        ),
        (httpx.Response(200, content=b"<a/>", headers={"content-type": "application/xml"}), "<a/>"),
        (
            httpx.Response(200, content=b"\x89PNG", headers={"content-type": "image/png"}),
            "(binary response: image/png, 4 bytes)",
        ),
    ],
)
def test_responses_become_text(response: httpx.Response, text: str) -> None:
    assert read_response(response, "GET /x") == text
