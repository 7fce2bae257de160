"""The Open WebUI pipe, driven the way Open WebUI calls it: ``pipes()``, then ``pipe(body, ...)``.

``open_webui_stream`` is Open WebUI's contract for a streamed pipe answer, as its
``generate_function_chat_completion`` (backend/open_webui/functions.py) implements it: a
``StreamingResponse`` is passed through as it is; an async generator's items are turned into
events (strings wrapped in a chunk template, dicts sent as they are) and Open WebUI adds its own
final ``finish_reason: "stop"`` chunk and ``[DONE]`` (0.12). What comes out is then read by the real
``openai`` SDK, as a client of Open WebUI's ``/api/chat/completions`` would.
"""

from __future__ import annotations

import asyncio
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

ADD_TOOLS = '''
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
'''

SLOW_TOOLS = '''
import asyncio
import pathlib

MARKS = pathlib.Path(r"{marks}")


async def slow() -> str:
    """Wait for a long time."""
    try:
        await asyncio.sleep(30)
    except asyncio.CancelledError:
        (MARKS / "cancelled").write_text("1")
        raise
    return "finished"
'''


def reply(body: dict[str, Any]) -> dict[str, Any]:
    last = body["messages"][-1]
    if last["role"] == "user":
        calls = [{"id": "call_add", "name": "add", "arguments": {"a": 20, "b": 22}}]
        if any(t["function"]["name"] == "web_search" for t in body.get("tools", [])):
            calls.append({"id": "call_search", "name": "web_search", "arguments": {"query": "42"}})
        return {"content": "Let me add.", "tool_calls": calls}
    return {"content": "It is 42 <b>exactly</b>."}


@pytest.fixture
def pipe(scripted: Callable[..., Any], agent_files: Any, home: Path) -> Pipe:
    server = scripted(reply)
    agent_files.write("adder", server, tools=ADD_TOOLS)
    instance = Pipe()
    instance.valves = Pipe.Valves(AGENT_PATHS=str(agent_files.root), RUNNER_HOME=str(home))
    return instance


async def open_webui_stream(result: Any, model: str) -> bytes:
    """The event stream Open WebUI makes of what ``pipe()`` returned (see the module docstring)."""
    if isinstance(result, StreamingResponse):
        return b"".join(
            [part if isinstance(part, bytes) else part.encode() async for part in result.body_iterator]
        )
    assert not isinstance(result, dict)
    events = []
    async for line in result:
        if isinstance(line, dict):
            events.append(f"data: {json.dumps(line)}\n\n")
        else:
            template = {"id": f"{model}-x", "object": "chat.completion.chunk", "created": 1, "model": model}
            chunk = {**template, "choices": [{"index": 0, "delta": {"content": line}, "finish_reason": None}]}
            events.append(f"data: {json.dumps(chunk)}\n\n")
    final = {"id": f"{model}-x", "object": "chat.completion.chunk", "created": 1, "model": model}
    final["choices"] = [{"index": 0, "delta": {"content": ""}, "finish_reason": "stop"}]
    events += [f"data: {json.dumps(final)}\n\n", "data: [DONE]"]
    return "".join(events).encode()


def sdk_stream(raw: bytes) -> list[Any]:
    """The chunks the ``openai`` SDK reads from ``raw`` (served as Open WebUI would serve it)."""

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=raw, headers={"content-type": "text/event-stream"})

    client = openai.OpenAI(
        api_key="k",
        base_url="http://openwebui.test/api",
        http_client=httpx.Client(transport=httpx.MockTransport(handler)),
    )
    return list(
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}], stream=True)
    )


class Emitter:
    """Collects what the pipe sends to ``__event_emitter__``."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    async def __call__(self, event: dict[str, Any]) -> None:
        self.events.append(event)


async def test_pipe_streams_text_and_details_blocks_and_one_stop(
    pipe: Pipe, check_stream: Any, home: Path
) -> None:
    assert pipe.pipes() == [{"id": "adder", "name": "adder"}]
    emitter = Emitter()
    body = {"model": "runner.adder", "messages": [{"role": "user", "content": "20+22?"}], "stream": True}
    result = await pipe.pipe(body, __user__={"id": "u1", "name": "Ann"}, __event_emitter__=emitter)
    raw = await open_webui_stream(result, "runner.adder")
    checked = check_stream(raw)  # whole chunks, one finish_reason, [DONE]
    assert (checked.finish_reason, checked.tool_calls) == ("stop", [])
    assert checked.content == (
        "Let me add.\n"
        '<details type="tool_calls" done="true" id="call_add" name="add" '
        'arguments="{&quot;a&quot;: 20, &quot;b&quot;: 22}">\n'
        "<summary>Tool Executed</summary>\n&quot;42&quot;\n</details>\n"
        "It is 42 <b>exactly</b>."
    )
    finishes = [
        c.choices[0].finish_reason for c in sdk_stream(raw) if c.choices and c.choices[0].finish_reason
    ]
    assert finishes == ["stop"]  # once: Open WebUI adds nothing to a StreamingResponse
    statuses = [e["data"] for e in emitter.events if e["type"] == "status"]
    assert statuses[0] == {"description": "Running add…", "done": False}
    assert statuses[-1]["done"] is True
    assert len(list(sessions_dir(home).glob("*.jsonl"))) == 1


async def test_pipe_sends_the_usage_chunk_include_usage_asks_for(pipe: Pipe, check_stream: Any) -> None:
    body = {
        "model": "runner.adder",
        "messages": [{"role": "user", "content": "20+22?"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    raw = await open_webui_stream(await pipe.pipe(body), "runner.adder")
    usage = check_stream(raw).usage
    assert usage is not None and usage["total_tokens"] > 0
    (last,) = [c for c in sdk_stream(raw) if c.usage is not None]
    assert last.usage.total_tokens == usage["total_tokens"]


async def test_pipe_answers_whole_when_not_streaming(pipe: Pipe, check_whole: Any) -> None:
    body = {"model": "adder", "messages": [{"role": "user", "content": "20+22?"}], "stream": False}
    result = await pipe.pipe(body)
    assert isinstance(result, dict)
    (block,) = check_whole(result)
    assert block.result == "42"
    assert result["model"] == "adder"


async def test_pipe_hands_open_webui_its_own_tools_calls(pipe: Pipe, check_stream: Any) -> None:
    search = {"type": "function", "function": {"name": "web_search", "parameters": {"type": "object"}}}
    body = {
        "model": "runner.adder",
        "messages": [{"role": "user", "content": "search and add"}],
        "stream": True,
        "tools": [search],
    }
    raw = await open_webui_stream(await pipe.pipe(body), "runner.adder")
    checked = check_stream(raw)
    assert checked.finish_reason == "tool_calls"
    calls = checked.tool_calls
    assert [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == [
        ("call_search", "web_search", {"query": "42"})
    ]
    assert 'name="add"' in checked.content and "web_search" not in checked.content
    # the openai SDK keeps the call (it skips chunks that are not whole chat.completion.chunk objects)
    sdk_calls = [t for c in sdk_stream(raw) if c.choices for t in c.choices[0].delta.tool_calls or ()]
    assert [t.function.name for t in sdk_calls] == ["web_search"]


async def test_pipe_stopped_by_open_webui_cancels_the_running_tool(
    scripted: Callable[..., Any], agent_files: Any, tmp_path: Path, home: Path
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    server = scripted([{"content": "Waiting.", "tool_calls": [{"name": "slow", "arguments": {}}]}])
    agent_files.write("sleeper", server, tools=SLOW_TOOLS.format(marks=marks))
    pipe = Pipe()
    pipe.valves = Pipe.Valves(AGENT_PATHS=str(agent_files.root), RUNNER_HOME=str(home))
    emitter = Emitter()
    body = {"model": "sleeper", "messages": [{"role": "user", "content": "wait"}], "stream": True}
    result = await pipe.pipe(body, __event_emitter__=emitter)
    assert not isinstance(result, dict)
    consumer = asyncio.create_task(_drain(result))  # how Open WebUI reads a pipe's stream
    async with asyncio.timeout(10):
        while not emitter.events:  # the status line says the tool runs
            await asyncio.sleep(0.01)
    consumer.cancel()  # the user pressed Stop
    with pytest.raises(asyncio.CancelledError):
        await consumer
    assert (marks / "cancelled").exists()
    assert emitter.events[0]["data"]["description"] == "Running slow…"


async def _drain(result: Any) -> bytes:
    return await open_webui_stream(result, "sleeper")


async def test_pipe_raises_for_an_unknown_agent(pipe: Pipe) -> None:
    with pytest.raises(RuntimeError, match="The model 'ghost' does not exist under "):
        await pipe.pipe(
            {"model": "runner.ghost", "messages": [{"role": "user", "content": "hi"}], "stream": True}
        )
