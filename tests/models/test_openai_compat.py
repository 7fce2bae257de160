"""What only the httpx fast path does (the shared behaviour is in test_wire_paths.py)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from typing import Any

import httpx
import pytest

from runner.errors import ModelError
from runner.models.base import Completed, EncodedRun, Request, TextDelta, ToolCallReady
from runner.models.openai_compat import OpenAICompatModel, spliced_body
from runner.testing import ScriptedServer

REQUEST = Request(model="m", messages=[{"role": "user", "content": "hi"}])


def mock_model(handler: Any, **options: Any) -> OpenAICompatModel:
    return OpenAICompatModel(
        "openai/m", api_base="http://test/v1", transport=httpx.MockTransport(handler), **options
    )


def sse(*chunks: Any) -> bytes:
    return (
        b"".join(b"data: " + json.dumps(chunk).encode() + b"\n\n" for chunk in chunks) + b"data: [DONE]\n\n"
    )


async def test_stream_answered_with_plain_json_still_gives_events() -> None:
    completion = {"model": "m", "choices": [{"message": {"content": "whole"}, "finish_reason": "stop"}]}
    model = mock_model(lambda request: httpx.Response(200, json=completion))
    events = [event async for event in model.stream(REQUEST)]
    assert events[0] == TextDelta("whole")
    assert isinstance(events[-1], Completed) and events[-1].reply.content == "whole"


async def test_error_chunk_in_the_middle_of_a_stream_raises_model_error() -> None:
    body = sse(
        {"choices": [{"delta": {"content": "par"}}]},
        {"error": {"message": "engine crashed", "code": 500}},
    )
    model = mock_model(
        lambda request: httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})
    )
    with pytest.raises(ModelError, match="engine crashed") as caught:
        async for _ in model.stream(REQUEST):
            pass
    assert caught.value.retryable


async def test_garbled_stream_chunk_raises_model_error() -> None:
    body = b"data: {not json\n\n"
    model = mock_model(
        lambda request: httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})
    )
    with pytest.raises(ModelError, match="stream chunk that is not JSON"):
        async for _ in model.stream(REQUEST):
            pass


async def test_tool_calls_stream_without_index_or_ids_are_still_merged() -> None:
    body = sse(
        {"choices": [{"delta": {"tool_calls": [{"function": {"name": "a", "arguments": '{"x"'}}]}}]},
        {"choices": [{"delta": {"tool_calls": [{"function": {"arguments": ": 1}"}}]}}]},
        {"choices": [{"delta": {}, "finish_reason": "tool_calls"}]},
    )
    model = mock_model(
        lambda request: httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})
    )
    events = [event async for event in model.stream(REQUEST)]
    ready = [event.call for event in events if isinstance(event, ToolCallReady)]
    assert [(call.name, call.arguments) for call in ready] == [("a", '{"x": 1}')]
    assert ready[0].id.startswith("call_")


async def test_request_body_headers_and_parameters() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"choices": [{"message": {"content": "ok"}}]})

    model = mock_model(handler)
    params = {
        "timeout": 5,
        "drop_params": True,
        "extra_headers": {"X-Trace": "1"},
        "extra_body": {"top_k": 3},
    }
    await model.complete(Request("m", [{"role": "user", "content": "hi"}], params=params))
    body = json.loads(seen[0].content)
    assert str(seen[0].url) == "http://test/v1/chat/completions"
    assert body == {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "top_k": 3,
        "stream": False,
    }
    assert seen[0].headers["x-trace"] == "1"
    assert "authorization" not in seen[0].headers


async def test_non_json_error_body_is_reported_with_its_status() -> None:
    model = mock_model(lambda request: httpx.Response(502, text="<html>bad gateway</html>"))
    with pytest.raises(ModelError, match=r"HTTP 502.*bad gateway") as caught:
        await model.complete(REQUEST)
    assert caught.value.retryable


def test_one_model_object_works_across_event_loops() -> None:
    with ScriptedServer([{"content": "one"}, {"content": "two"}]) as server:
        model = OpenAICompatModel("openai/m", api_base=server.base_url + "/")
        first = asyncio.run(model.complete(REQUEST))
        second = asyncio.run(model.complete(REQUEST))
    assert (first.content, second.content) == ("one", "two")


async def test_streams_read_to_their_end_reuse_one_connection() -> None:
    with ScriptedServer([{"content": "one"}, {"content": "two"}, {"content": "three"}]) as server:
        model = OpenAICompatModel("openai/scripted", api_base=server.base_url)
        for _ in range(3):
            events = [event async for event in model.stream(REQUEST)]
            assert isinstance(events[-1], Completed)
        await model.aclose()
    assert len(server.peers) == 3 and len(set(server.peers)) == 1  # one connection for the three


async def test_a_stream_held_open_after_done_still_ends() -> None:
    with ScriptedServer([{"content": "late end", "linger_s": 5.0}, {"content": "next"}]) as server:
        model = OpenAICompatModel("openai/scripted", api_base=server.base_url)
        events = [event async for event in model.stream(REQUEST)]
        assert events[-1].reply.content == "late end"  # type: ignore[union-attr]
        again = [event async for event in model.stream(REQUEST)]  # on a new connection
        assert again[-1].reply.content == "next"  # type: ignore[union-attr]
        await model.aclose()
    assert len(set(server.peers)) == 2


MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "sys \u2603"},
    {"role": "user", "content": 'héllo "quoted"\n'},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}}
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "2"},
    {"role": "user", "content": "next"},
]


def _run(start: int, end: int) -> EncodedRun:
    part = tuple(dict(m) for m in MESSAGES[start:end])  # the originals: equal, not the same objects
    return EncodedRun(start, part, json.dumps(list(part), ensure_ascii=False, separators=(",", ":"))[1:-1])


async def _sent(request: Request) -> list[bytes]:
    bodies: list[bytes] = []

    def handler(http: httpx.Request) -> httpx.Response:
        bodies.append(http.content)
        message = {"role": "assistant", "content": "ok"}
        return httpx.Response(200, json={"choices": [{"message": message, "finish_reason": "stop"}]})

    model = mock_model(handler)
    await model.complete(request)
    await model.aclose()
    return bodies


@pytest.mark.parametrize(("start", "end"), [(0, 5), (1, 4), (0, 1), (4, 5), (2, 3)])
async def test_messages_encoded_already_make_the_same_body(start: int, end: int) -> None:
    tools = [{"type": "function", "function": {"name": "add"}}]
    plain = Request(model="m", messages=MESSAGES, tools=tools, params={"temperature": 0.5})
    spliced = replace(plain, encoded=_run(start, end))
    assert spliced_body({"model": "m", "messages": MESSAGES, "x": 1}, _run(start, end)) == json.dumps(
        {"model": "m", "messages": MESSAGES, "x": 1}, ensure_ascii=False, separators=(",", ":")
    )
    assert await _sent(spliced) == await _sent(plain)


async def test_messages_changed_since_they_were_encoded_are_encoded_again() -> None:
    run = _run(1, 4)
    changed = [*MESSAGES[:2], {"role": "assistant", "content": "compressed"}, *MESSAGES[3:]]
    assert not run.holds(changed) and not run.holds(MESSAGES[:3]) and run.holds(MESSAGES)
    (body,) = await _sent(Request(model="m", messages=changed, encoded=run))
    assert json.loads(body)["messages"] == changed
    override = {"extra_body": {"messages": [{"role": "user", "content": "mine"}]}}
    (body,) = await _sent(Request(model="m", messages=MESSAGES, params=override, encoded=run))
    assert json.loads(body)["messages"] == [{"role": "user", "content": "mine"}]
