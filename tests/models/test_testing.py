"""The public test helpers: ScriptedModel in process, ScriptedServer over raw HTTP, and its CLI."""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from runner.errors import ModelError
from runner.models.base import Completed, Model, Reply, Request, TextDelta, ToolCall, ToolCallReady
from runner.testing import ScriptedModel, ScriptedServer, text, tool_call, tool_calls

REQUEST = Request(model="scripted", messages=[{"role": "user", "content": "hi"}])


# --- ScriptedModel ---------------------------------------------------------------------------


def test_scripted_model_is_a_model() -> None:
    assert isinstance(ScriptedModel([]), Model)


async def test_scripted_model_answers_in_order_and_records_requests() -> None:
    model = ScriptedModel([tool_call("weather", city="Paris"), "Sunny."])
    first = await model.complete(REQUEST)
    second_request = Request("scripted", [*REQUEST.messages, first.message()])
    second = await model.complete(second_request)
    assert first.tool_calls[0].name == "weather"
    assert json.loads(first.tool_calls[0].arguments) == {"city": "Paris"}
    assert second.content == "Sunny."
    assert model.requests == [REQUEST, second_request]
    model.assert_complete()


async def test_scripted_model_fails_clearly_on_a_call_beyond_the_script() -> None:
    model = ScriptedModel([text("only one")])
    await model.complete(REQUEST)
    with pytest.raises(AssertionError, match=r"unexpected model call #2.*only 1 step"):
        await model.complete(REQUEST)


def test_assert_complete_fails_while_steps_remain() -> None:
    model = ScriptedModel([text("a"), text("b")])
    with pytest.raises(AssertionError, match="2 of 2 scripted step"):
        model.assert_complete()


async def test_scripted_model_streams_text_in_chunks_and_tool_calls_as_ready_events() -> None:
    reply = tool_calls(("a", {"x": 1}), ("b", {}), content="Let me check the weather.")
    model = ScriptedModel([reply])
    events = [event async for event in model.stream(REQUEST)]
    pieces = [event.text for event in events if isinstance(event, TextDelta)]
    assert len(pieces) > 1 and "".join(pieces) == "Let me check the weather."
    assert [(e.index, e.call.name) for e in events if isinstance(e, ToolCallReady)] == [(0, "a"), (1, "b")]
    ids = ("call_1", "call_2")
    numbered = tuple(replace(call, id=id) for call, id in zip(reply.tool_calls, ids, strict=True))
    assert events[-1] == Completed(replace(reply, model="scripted", tool_calls=numbered))


async def test_callable_steps_see_the_request_and_exception_steps_are_raised() -> None:
    def echo(request: Request) -> Reply:
        return text(f"you said {request.messages[-1]['content']}")

    model = ScriptedModel([echo, ModelError("down", retryable=True)])
    assert (await model.complete(REQUEST)).content == "you said hi"
    with pytest.raises(ModelError, match="down"):
        await model.complete(REQUEST)


async def test_tool_call_ids_are_numbered_by_each_model_the_same_way() -> None:
    # Ids come from the model serving the script, not from a counter shared by the process: two models
    # running the same script give the same ids, and a call's id differs from every other in one model.
    script = [tool_calls(("a", {}), ("a", {})), tool_call("b"), "done"]
    first, second = ScriptedModel(script), ScriptedModel(script)
    replies = [await model.complete(REQUEST) for model in (first, second) for _ in "ab"]
    ids = [[call.id for call in reply.tool_calls] for reply in replies]
    assert ids == [["call_1", "call_2"], ["call_3"], ["call_1", "call_2"], ["call_3"]]
    streamed = ScriptedModel(script)
    ready = [e.call.id async for e in streamed.stream(REQUEST) if isinstance(e, ToolCallReady)]
    assert ready == ["call_1", "call_2"]
    assert script[0].finish_reason == "tool_calls"  # type: ignore[union-attr]


async def test_ids_skip_those_a_resumed_conversation_already_holds() -> None:
    earlier = ScriptedModel([tool_call("a")])
    said = (await earlier.complete(REQUEST)).message()
    resumed = Request("scripted", [*REQUEST.messages, said, {"role": "tool", "tool_call_id": "call_1"}])
    assert [c.id for c in (await ScriptedModel([tool_call("b")]).complete(resumed)).tool_calls] == ["call_2"]


async def test_a_call_with_its_own_id_keeps_it() -> None:
    own = Reply(content=None, tool_calls=(ToolCall("mine", "a", "{}"),), finish_reason="tool_calls")
    model = ScriptedModel([own, tool_call("b")])
    assert [(await model.complete(REQUEST)).tool_calls[0].id for _ in range(2)] == ["mine", "call_1"]


# --- ScriptedServer over raw HTTP --------------------------------------------------------------


def sse_chunks(response: httpx.Response) -> list[Any]:
    lines = [line for line in response.text.split("\n") if line]
    assert all(line.startswith("data: ") for line in lines)
    assert lines[-1] == "data: [DONE]"
    return [json.loads(line[len("data: ") :]) for line in lines[:-1]]


def post(server: ScriptedServer, **body: Any) -> httpx.Response:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], **body}
    return httpx.post(server.base_url + "/chat/completions", json=body, timeout=10)


def test_server_streams_content_as_sse_chunks_with_usage_when_asked() -> None:
    with ScriptedServer([{"content": "Hello from the server", "usage": {"prompt_tokens": 3}}] * 2) as server:
        response = post(server, stream=True, stream_options={"include_usage": True})
        assert response.headers["content-type"] == "text/event-stream"
        chunks = sse_chunks(response)
        assert all(chunk["object"] == "chat.completion.chunk" for chunk in chunks)
        content = [c["choices"][0]["delta"].get("content") for c in chunks if c["choices"]]
        assert len([piece for piece in content if piece]) >= 2
        assert "".join(piece or "" for piece in content) == "Hello from the server"
        assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
        assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["prompt_tokens"] == 3
        without_usage = sse_chunks(post(server, stream=True))
        assert all("usage" not in chunk for chunk in without_usage)


def test_server_splits_each_tool_call_over_several_chunks() -> None:
    calls = [
        {"id": "c1", "name": "a", "arguments": {"query": "a long query"}},
        {"name": "b", "arguments": {}},
    ]
    with ScriptedServer([{"tool_calls": calls}]) as server:
        chunks = sse_chunks(post(server, stream=True))
    deltas = [item for c in chunks if c["choices"] for item in c["choices"][0]["delta"].get("tool_calls", [])]
    first_call = [item for item in deltas if item["index"] == 0]
    assert len(first_call) >= 3
    assert first_call[0]["id"] == "c1" and first_call[0]["function"]["name"] == "a"
    assert all("id" not in item for item in first_call[1:])
    joined = "".join(item["function"].get("arguments", "") for item in first_call)
    assert json.loads(joined) == {"query": "a long query"}
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_server_answers_non_streamed_requests_in_openai_shape() -> None:
    with ScriptedServer([{"tool_calls": [{"id": "c1", "name": "a", "arguments": {"x": 1}}]}]) as server:
        data = post(server).json()
    assert data["object"] == "chat.completion"
    message = data["choices"][0]["message"]
    assert message["tool_calls"][0] == {
        "id": "c1",
        "type": "function",
        "function": {"name": "a", "arguments": '{"x": 1}'},
    }
    assert (
        data["usage"]["total_tokens"] == data["usage"]["prompt_tokens"] + data["usage"]["completion_tokens"]
    )


def test_server_error_entries_answer_an_openai_error_body() -> None:
    with ScriptedServer([{"status": 503, "error": "try later"}]) as server:
        response = post(server)
    assert response.status_code == 503
    assert response.json()["error"]["message"] == "try later"


def test_server_lists_its_model_and_records_bodies_and_headers() -> None:
    with ScriptedServer([{"content": "x"}], model="tiny") as server:
        assert httpx.get(server.base_url + "/models").json()["data"][0]["id"] == "tiny"
        httpx.post(server.base_url + "/chat/completions", json={"messages": []}, headers={"X-Test": "1"})
        assert server.requests == [{"messages": []}]
        assert server.headers[0]["x-test"] == "1"


def test_server_beyond_its_script_answers_400_and_fails_assert_complete() -> None:
    with ScriptedServer([{"content": "one"}]) as server:
        assert post(server).status_code == 200
        response = post(server)
        assert response.status_code == 400
        assert "script exhausted after" in response.json()["error"]["message"]
        assert "--repeat" in response.json()["error"]["message"]
        with pytest.raises(AssertionError, match="after the script ended"):
            server.assert_complete()


def test_server_repeat_cycles_and_callable_scripts_answer_dynamically() -> None:
    with ScriptedServer([{"content": "a"}, {"content": "b"}], repeat=True) as server:
        answers = [post(server).json()["choices"][0]["message"]["content"] for _ in range(5)]
        server.assert_complete()
    assert answers == ["a", "b", "a", "b", "a"]
    with ScriptedServer(lambda body: {"content": str(len(body["messages"]))}) as server:
        assert post(server).json()["choices"][0]["message"]["content"] == "1"


def test_closed_server_releases_its_port() -> None:
    server = ScriptedServer([])
    server.close()
    with pytest.raises(httpx.ConnectError):
        httpx.get(server.base_url + "/models", timeout=2)


# --- python -m runner.testing serve ----------------------------------------------------------


def test_the_serve_cli_is_not_a_name_of_the_testing_package() -> None:
    import runner.testing
    from runner.testing.server import main

    assert "main" not in runner.testing.__all__ and not hasattr(runner.testing, "main")
    assert callable(main)  # what python -m runner.testing serve runs (below)


def test_cli_serves_a_yaml_script_until_interrupted(tmp_path: Path) -> None:
    script = tmp_path / "script.yaml"
    script.write_text("- content: from the CLI\n", encoding="utf-8")
    proc = subprocess.Popen(
        [sys.executable, "-m", "runner.testing", "serve", str(script)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert proc.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(proc.stdout, selectors.EVENT_READ)
            assert selector.select(timeout=20), "the CLI printed no base URL"
        base_url = proc.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")
        response = httpx.post(base_url + "/chat/completions", json={"messages": []}, timeout=10)
        assert response.json()["choices"][0]["message"]["content"] == "from the CLI"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()


def test_cli_reports_a_bad_script_without_a_traceback(tmp_path: Path) -> None:
    script = tmp_path / "bad.json"
    script.write_text('{"not": "a list"}', encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "runner.testing", "serve", str(script)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert "a script is a list" in result.stderr
    assert "Traceback" not in result.stderr


def test_close_with_a_kept_alive_connection_releases_the_port_and_a_second_close_is_a_no_op() -> None:
    server = ScriptedServer([{"content": "hi"}])
    with httpx.Client(base_url=server.base_url) as client:  # its connection stays open, idle
        body = {"model": "scripted", "messages": [{"role": "user", "content": "x"}]}
        assert client.post("/chat/completions", json=body).status_code == 200
        assert server.open_connections == 1
        server.close()
        server.close()
        with pytest.raises(httpx.ConnectError):
            httpx.get(server.url + "/v1/models", timeout=2)


def test_stoppable_server_stops_when_shut_down_before_it_serves_and_serves_again_after() -> None:
    import threading
    from http.server import BaseHTTPRequestHandler

    from runner.testing.server import StoppableHTTPServer

    class Hello(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: object) -> None:
            pass

    server = StoppableHTTPServer(("127.0.0.1", 0), Hello)
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        early = threading.Thread(target=server.shutdown)
        early.start()  # asked to stop before serving: serve_forever returns at once, as the standard one
        server.serve_forever()
        early.join(timeout=10)
        assert not early.is_alive()
        for _ in range(2):  # the wake-up of one stop is not left to end the next serve at once
            serving = threading.Thread(target=server.serve_forever)
            serving.start()
            assert httpx.get(url, timeout=5).text == "ok"
            assert httpx.get(url, timeout=5).text == "ok"
            server.shutdown()
            serving.join(timeout=10)
            assert not serving.is_alive()
    finally:
        server.server_close()
