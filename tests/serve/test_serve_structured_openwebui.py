"""Structured output through the Open WebUI pipe: the same answers as ``runner serve`` gives.

The pipe is called the way Open WebUI calls it (``pipe(body)``); a streamed answer is a
``StreamingResponse`` Open WebUI passes through untouched, read here as its bytes and by the real
``openai`` SDK (see tests/serve/test_serve_openwebui.py for that contract).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from starlette.responses import StreamingResponse

from runner.integrations.openwebui import Pipe
from runner.store.transcript import sessions_dir
from tests.serve.structured_common import ADD_TOOLS, QUESTION, SUM, SUM_OUTPUT


def add_then_answer(body: dict[str, Any]) -> dict[str, Any]:
    if body["messages"][-1]["role"] == "user":
        return {"tool_calls": [{"id": "call_add", "name": "add", "arguments": {"a": 2, "b": 3}}]}
    return {"content": "Done: " + json.dumps(SUM)}


async def stream_bytes(result: Any) -> bytes:
    assert isinstance(result, StreamingResponse)
    return b"".join([p if isinstance(p, bytes) else p.encode() async for p in result.body_iterator])


def sdk_client(raw: bytes) -> openai.OpenAI:
    """An openai client that reads ``raw`` as Open WebUI's answer."""

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=raw, headers={"content-type": "text/event-stream"})

    return openai.OpenAI(
        api_key="k",
        base_url="http://openwebui.test/api",
        http_client=httpx.Client(transport=httpx.MockTransport(handler)),
        max_retries=0,
    )


def sdk_content(raw: bytes) -> str:
    chunks = sdk_client(raw).chat.completions.create(model="m", messages=QUESTION, stream=True)
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


def make_pipe(agent_files: Any, home: Path) -> Pipe:
    pipe = Pipe()
    pipe.valves = Pipe.Valves(AGENT_PATHS=str(agent_files.root), RUNNER_HOME=str(home))
    return pipe


@pytest.mark.parametrize("stream", [False, True])
async def test_the_pipe_answers_an_agent_with_output_with_the_json_text(
    scripted: Callable[..., Any],
    agent_files: Any,
    home: Path,
    stream: bool,
    check_stream: Any,
    check_whole: Any,
) -> None:
    server = scripted(add_then_answer)
    agent_files.write("summer", server, SUM_OUTPUT, tools=ADD_TOOLS)
    pipe = make_pipe(agent_files, home)
    result = await pipe.pipe({"model": "runner.summer", "messages": QUESTION, "stream": stream})
    if stream:
        raw = await stream_bytes(result)
        content = check_stream(raw).content
        assert sdk_content(raw) == content
    else:
        check_whole(result)
        content = result["choices"][0]["message"]["content"]
    assert json.loads(content) == SUM  # the JSON alone: no tool block, no prose
    assert [t["function"]["name"] for t in server.requests[0]["tools"]] == ["add"]
    assert server.requests[0]["response_format"]["type"] == "json_schema"
    (path,) = sessions_dir(home).glob("*.jsonl")
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert [r["data"] for r in records if r.get("event") == "output"] == [{"value": SUM}]


@pytest.mark.parametrize("stream", [False, True])
async def test_the_pipe_honours_a_response_format_in_its_body(
    scripted: Callable[..., Any], agent_files: Any, home: Path, stream: bool, check_stream: Any
) -> None:
    server = scripted(add_then_answer)
    agent_files.write("helper", server, tools=ADD_TOOLS)
    pipe = make_pipe(agent_files, home)
    schema = {"type": "object", "properties": {"total": {"type": "integer"}}}
    body = {
        "model": "runner.helper",
        "messages": QUESTION,
        "stream": stream,
        "response_format": {"type": "json_schema", "json_schema": {"name": "Total", "schema": schema}},
    }
    result = await pipe.pipe(body)
    if stream:
        content = check_stream(await stream_bytes(result)).content
    else:
        content = result["choices"][0]["message"]["content"]
    assert json.loads(content) == SUM
    assert server.requests[0]["response_format"]["json_schema"]["name"] == "Total"


async def test_the_pipe_refuses_a_bad_response_format(
    scripted: Callable[..., Any], agent_files: Any, home: Path
) -> None:
    server = scripted([])
    agent_files.write("helper", server)
    pipe = make_pipe(agent_files, home)
    body = {
        "model": "helper",
        "messages": QUESTION,
        "response_format": {"type": "json_schema", "json_schema": {}},
    }
    with pytest.raises(RuntimeError, match=r"runner: 'response_format.json_schema.name' must match"):
        await pipe.pipe(body)
    assert server.requests == []


@pytest.mark.parametrize("stream", [False, True])
async def test_the_pipe_reports_an_answer_that_never_validates(
    scripted: Callable[..., Any], agent_files: Any, home: Path, stream: bool
) -> None:
    server = scripted([{"content": "no JSON here"}], repeat=True)
    agent_files.write("summer", server, SUM_OUTPUT)
    pipe = make_pipe(agent_files, home)
    body = {"model": "summer", "messages": QUESTION, "stream": stream}
    if not stream:
        with pytest.raises(
            RuntimeError, match=r"runner: the answer did not match the output schema after 3 tries"
        ):
            await pipe.pipe(body)
        return
    raw = await stream_bytes(await pipe.pipe(body))
    assert raw.endswith(b"data: [DONE]\n\n") and b'"code":"output_invalid"' in raw
    with pytest.raises(openai.APIError, match="the answer did not match the output schema after 3 tries"):
        list(sdk_client(raw).chat.completions.create(model="m", messages=QUESTION, stream=True))
