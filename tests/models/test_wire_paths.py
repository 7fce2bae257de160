"""One behaviour suite, run against both real paths: litellm and the httpx fast path (SPEC section 14)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from runner.agentfile.config import ModelConfig
from runner.errors import ModelError
from runner.models.base import (
    Completed,
    Model,
    ReasoningDelta,
    Reply,
    Request,
    StreamEvent,
    TextDelta,
    ToolCallReady,
    Usage,
)
from runner.models.factory import build_request
from runner.models.resilient import ResilientModel
from runner.testing import ScriptedServer

Serve = Callable[..., ScriptedServer]
Connect = Callable[..., Model]

MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "weather",
        "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def request(stream: bool, **params: Any) -> Request:
    return Request(model="openai/scripted-model", messages=list(MESSAGES), params=params, stream=stream)


async def collect(model: Model, req: Request) -> list[StreamEvent]:
    return [event async for event in model.stream(req)]


async def test_complete_returns_text_usage_and_strips_the_provider_prefix(
    serve: Serve, connect: Connect
) -> None:
    server = serve([{"content": "Hello!", "usage": {"prompt_tokens": 11, "completion_tokens": 3}}])
    reply = await connect(server.base_url).complete(request(stream=False))
    assert reply.content == "Hello!"
    assert reply.tool_calls == ()
    assert reply.finish_reason == "stop"
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens, reply.usage.total_tokens) == (11, 3, 14)
    body = server.requests[0]
    assert body["model"] == "scripted-model"
    assert body["messages"] == MESSAGES
    assert not body.get("stream")
    assert server.headers[0]["authorization"] == "Bearer sk-test"


async def test_stream_yields_text_in_pieces_then_one_completed_reply(serve: Serve, connect: Connect) -> None:
    content = "Streaming works, piece by piece."
    server = serve([{"content": content, "usage": {"prompt_tokens": 7, "completion_tokens": 5}}])
    events = await collect(connect(server.base_url), request(stream=True))
    pieces = [event.text for event in events if isinstance(event, TextDelta)]
    assert len(pieces) >= 2
    assert "".join(pieces) == content
    assert isinstance(events[-1], Completed)
    assert sum(isinstance(event, Completed) for event in events) == 1
    reply = events[-1].reply
    assert reply.content == content
    assert reply.usage.total_tokens == 12
    assert server.requests[0]["stream"] is True
    assert server.requests[0]["stream_options"] == {"include_usage": True}


async def test_stream_reports_reasoning_but_the_message_leaves_it_out(serve: Serve, connect: Connect) -> None:
    server = serve([{"reasoning": "The user greets me.", "content": "Hello."}])
    events = await collect(connect(server.base_url), request(stream=True))
    thoughts = "".join(event.text for event in events if isinstance(event, ReasoningDelta))
    assert thoughts == "The user greets me."
    reply = events[-1].reply  # type: ignore[union-attr]
    assert reply.reasoning == "The user greets me."
    assert reply.message() == {"role": "assistant", "content": "Hello."}


async def test_stream_merges_fragmented_arguments_of_several_tool_calls(
    serve: Serve, connect: Connect
) -> None:
    calls = [
        {"id": "call_a", "name": "weather", "arguments": {"city": "Vancouver", "units": "metric"}},
        {"id": "call_b", "name": "time", "arguments": {"timezone": "America/Vancouver"}},
    ]
    server = serve([{"content": "Checking.", "tool_calls": calls}])
    req = Request("openai/scripted-model", list(MESSAGES), tools=[WEATHER_TOOL], stream=True)
    events = await collect(connect(server.base_url), req)
    ready = [event for event in events if isinstance(event, ToolCallReady)]
    assert [event.index for event in ready] == [0, 1]
    assert [(e.call.id, e.call.name, json.loads(e.call.arguments)) for e in ready] == [
        ("call_a", "weather", {"city": "Vancouver", "units": "metric"}),
        ("call_b", "time", {"timezone": "America/Vancouver"}),
    ]
    reply = events[-1].reply  # type: ignore[union-attr]
    assert reply.tool_calls == tuple(event.call for event in ready)
    assert reply.finish_reason == "tool_calls"
    assert reply.message()["tool_calls"][1]["function"]["name"] == "time"
    assert server.requests[0]["tools"] == [WEATHER_TOOL]


async def test_first_tool_call_is_ready_before_the_stream_ends(serve: Serve, connect: Connect) -> None:
    calls = [{"name": "a", "arguments": {"n": 1}}, {"name": "b", "arguments": {"n": 2, "pad": "x" * 30}}]
    server = serve([{"tool_calls": calls, "chunk_delay_s": 0.04}])
    seen: list[tuple[float, StreamEvent]] = []
    async for event in connect(server.base_url).stream(request(stream=True)):
        seen.append((time.perf_counter(), event))
    first_ready = next(at for at, event in seen if isinstance(event, ToolCallReady))
    completed = seen[-1][0]
    # Four more chunks follow the first call's last fragment, 40 ms apart.
    assert completed - first_ready > 0.1


async def test_complete_returns_tool_calls(serve: Serve, connect: Connect) -> None:
    server = serve([{"tool_calls": [{"id": "call_1", "name": "weather", "arguments": {"city": "Oslo"}}]}])
    reply = await connect(server.base_url).complete(request(stream=False))
    assert [(c.id, c.name, json.loads(c.arguments)) for c in reply.tool_calls] == [
        ("call_1", "weather", {"city": "Oslo"})
    ]
    assert reply.message()["content"] is None


async def test_tool_call_without_id_gets_a_generated_one(serve: Serve, connect: Connect) -> None:
    no_ids = [{"id": None, "name": "a", "arguments": {}}, {"id": None, "name": "b", "arguments": {"x": 1}}]
    server = serve([{"tool_calls": no_ids}, {"tool_calls": no_ids}])
    model = connect(server.base_url)
    streamed = (await collect(model, request(stream=True)))[-1].reply  # type: ignore[union-attr]
    completed = await model.complete(request(stream=False))
    for reply in (streamed, completed):
        ids = [call.id for call in reply.tool_calls]
        assert [call.name for call in reply.tool_calls] == ["a", "b"]
        assert all(ids) and len(set(ids)) == 2
        assert json.loads(reply.tool_calls[0].arguments) == {}


@pytest.mark.parametrize("stream", [True, False])
async def test_usage_of_several_calls_adds_up(serve: Serve, connect: Connect, stream: bool) -> None:
    server = serve(
        [
            {"content": "one", "usage": {"prompt_tokens": 10, "completion_tokens": 2}},
            {"content": "two", "usage": {"prompt_tokens": 20, "completion_tokens": 4}},
        ]
    )
    model = connect(server.base_url)
    total = Usage()
    for _ in range(2):
        if stream:
            reply: Reply = (await collect(model, request(stream=True)))[-1].reply  # type: ignore[union-attr]
        else:
            reply = await model.complete(request(stream=False))
        total += reply.usage
    assert (total.prompt_tokens, total.completion_tokens, total.total_tokens) == (30, 6, 36)
    assert total.cost_usd is None  # litellm knows no price for a scripted model


async def test_spec_parameters_reach_the_server_but_timeout_does_not(serve: Serve, connect: Connect) -> None:
    server = serve([{"content": "ok"}])
    spec = ModelConfig(id="openai/scripted-model", temperature=0.2, max_tokens=64, params={"seed": 7})
    await connect(server.base_url).complete(build_request(spec, list(MESSAGES), stream=False))
    body = server.requests[0]
    assert (body["temperature"], body["max_tokens"], body["seed"]) == (0.2, 64, 7)
    assert "timeout" not in body


@pytest.mark.parametrize("stream", [True, False])
async def test_server_error_then_recovery_through_resilient_model(
    serve: Serve, connect: Connect, stream: bool
) -> None:
    server = serve([{"status": 500, "error": "overloaded"}, {"content": "recovered"}])
    model = ResilientModel(connect(server.base_url), retries=2, backoff_s=0.001)
    if stream:
        reply = (await collect(model, request(stream=True)))[-1].reply  # type: ignore[union-attr]
    else:
        reply = await model.complete(request(stream=False))
    assert reply.content == "recovered"
    assert len(server.requests) == 2  # the client library made no retries of its own


@pytest.mark.parametrize("stream", [True, False])
async def test_rate_limit_that_never_ends_raises_model_error_with_status(
    serve: Serve, connect: Connect, stream: bool
) -> None:
    server = serve([{"status": 429, "error": "slow down"}], repeat=True)
    model = ResilientModel(connect(server.base_url), retries=2, backoff_s=0.001)
    with pytest.raises(ModelError) as caught:
        if stream:
            await collect(model, request(stream=True))
        else:
            await model.complete(request(stream=False))
    assert caught.value.status == 429
    assert caught.value.retryable
    assert "slow down" in caught.value.message and "429" in caught.value.message
    assert "litellm." not in caught.value.message  # the wrapper's class-name prefixes are dropped
    assert len(server.requests) == 3


async def test_bad_request_is_not_retried(serve: Serve, connect: Connect) -> None:
    server = serve([{"status": 400, "error": "messages: bad role"}], repeat=True)
    model = ResilientModel(connect(server.base_url), retries=3, backoff_s=0.001)
    with pytest.raises(ModelError) as caught:
        await model.complete(request(stream=False))
    assert (caught.value.status, caught.value.retryable) == (400, False)
    assert len(server.requests) == 1


async def test_authentication_error_hints_at_the_api_key(serve: Serve, connect: Connect) -> None:
    server = serve([{"status": 401, "error": "invalid api key"}])
    with pytest.raises(ModelError) as caught:
        await connect(server.base_url).complete(request(stream=False))
    assert caught.value.status == 401
    assert not caught.value.retryable
    assert caught.value.hint is not None and "api_key" in caught.value.hint


async def test_fallbacks_are_tried_in_order(serve: Serve, connect: Connect) -> None:
    order: list[str] = []

    def answer(name: str, reply: dict[str, Any]) -> Callable[[dict[str, Any]], dict[str, Any]]:
        def script(body: dict[str, Any]) -> dict[str, Any]:
            order.append(name)
            return reply

        return script

    primary = serve(answer("primary", {"status": 503, "error": "down"}))
    first = serve(answer("first", {"status": 404, "error": "no such model"}))
    second = serve(answer("second", {"content": "from the second fallback"}))
    model = ResilientModel(
        connect(primary.base_url),
        [connect(first.base_url, "openai/first"), connect(second.base_url, "openai/second")],
        retries=1,
        backoff_s=0.001,
    )
    reply = await model.complete(request(stream=False))
    assert reply.content == "from the second fallback"
    assert order == ["primary", "primary", "first", "second"]
    assert second.requests[0]["model"] == "second"
    assert model.last_model == "openai/second"


@pytest.mark.parametrize("stream", [True, False])
async def test_connection_refused_is_a_retryable_model_error(
    connect: Connect, closed_port: int, stream: bool
) -> None:
    model = connect(f"http://127.0.0.1:{closed_port}/v1")
    with pytest.raises(ModelError) as caught:
        if stream:
            await collect(model, request(stream=True))
        else:
            await model.complete(request(stream=False))
    assert caught.value.retryable
    assert caught.value.status is None


async def test_model_that_cannot_stream_is_asked_without_streaming(serve: Serve, connect: Connect) -> None:
    def script(body: dict[str, Any]) -> dict[str, Any]:
        if body.get("stream"):
            return {"status": 400, "error": "Streaming is not supported for this model"}
        return {"content": "whole answer"}

    server = serve(script)
    model = ResilientModel(connect(server.base_url), retries=2, backoff_s=0.001)
    for _ in range(2):
        events = await collect(model, request(stream=True))
        assert [type(event) for event in events] == [TextDelta, Completed]
        assert events[-1].reply.content == "whole answer"  # type: ignore[union-attr]
    # First a refused stream, then non-streamed requests only.
    assert [bool(body.get("stream")) for body in server.requests] == [True, False, False]


@pytest.mark.parametrize("stream", [True, False])
async def test_timeout_is_a_retryable_model_error(serve: Serve, connect: Connect, stream: bool) -> None:
    server = serve([{"content": "too late", "delay_s": 1.0}])
    model = connect(server.base_url)
    with pytest.raises(ModelError) as caught:
        if stream:
            await collect(model, request(stream=True, timeout=0.2))
        else:
            await model.complete(request(stream=False, timeout=0.2))
    assert caught.value.retryable
    assert caught.value.status is None


@pytest.mark.parametrize("stream", [True, False])
async def test_the_models_own_timeout_applies(serve: Serve, connect: Connect, stream: bool) -> None:
    """``model.timeout_s`` bounds each request on both paths (no per-request ``timeout`` given)."""
    server = serve([{"content": "too late", "delay_s": 1.5}])
    model = connect(server.base_url, timeout_s=0.3)
    with pytest.raises(ModelError) as caught:
        if stream:
            await collect(model, request(stream=True))
        else:
            await model.complete(request(stream=False))
    assert caught.value.retryable


async def test_stopping_a_stream_early_leaves_the_model_usable(serve: Serve, connect: Connect) -> None:
    server = serve([{"content": "a long answer, " * 5, "chunk_delay_s": 0.02}, {"content": "next"}])
    model = connect(server.base_url)
    stream = model.stream(request(stream=True))
    first = await anext(stream)
    await stream.aclose()  # type: ignore[attr-defined]
    assert isinstance(first, TextDelta)
    assert (await model.complete(request(stream=False))).content == "next"
