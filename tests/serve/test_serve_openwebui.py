"""The Open WebUI pipe, driven the way Open WebUI calls it: ``pipes()``, then ``pipe(body, ...)``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

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


class Emitter:
    """Collects what the pipe sends to ``__event_emitter__``."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    async def __call__(self, event: dict[str, Any]) -> None:
        self.events.append(event)


async def test_pipe_streams_text_and_details_blocks_and_one_stop(
    pipe: Pipe, check_pipe: Any, home: Path
) -> None:
    assert pipe.pipes() == [{"id": "adder", "name": "adder"}]
    emitter = Emitter()
    body = {"model": "runner.adder", "messages": [{"role": "user", "content": "20+22?"}], "stream": True}
    result = await pipe.pipe(body, __user__={"id": "u1", "name": "Ann"}, __event_emitter__=emitter)
    assert not isinstance(result, dict)
    items = [item async for item in result]
    content, reason, calls = check_pipe(items)
    assert (reason, calls) == ("stop", [])
    assert items[-1] == {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    assert content == (
        "Let me add.\n"
        '<details type="tool_calls" done="true" id="call_add" name="add" '
        'arguments="{&quot;a&quot;: 20, &quot;b&quot;: 22}">\n'
        "<summary>Tool Executed</summary>\n&quot;42&quot;\n</details>\n"
        "It is 42 <b>exactly</b>."
    )
    statuses = [e["data"] for e in emitter.events if e["type"] == "status"]
    assert statuses[0] == {"description": "Running add…", "done": False}
    assert statuses[-1]["done"] is True
    assert len(list(sessions_dir(home).glob("*.jsonl"))) == 1


async def test_pipe_answers_whole_when_not_streaming(pipe: Pipe, check_whole: Any) -> None:
    body = {"model": "adder", "messages": [{"role": "user", "content": "20+22?"}], "stream": False}
    result = await pipe.pipe(body)
    assert isinstance(result, dict)
    (block,) = check_whole(result)
    assert block.result == "42"
    assert result["model"] == "adder"


async def test_pipe_hands_open_webui_its_own_tools_calls(pipe: Pipe, check_pipe: Any) -> None:
    search = {"type": "function", "function": {"name": "web_search", "parameters": {"type": "object"}}}
    body = {
        "model": "runner.adder",
        "messages": [{"role": "user", "content": "search and add"}],
        "stream": True,
        "tools": [search],
    }
    result = await pipe.pipe(body)
    assert not isinstance(result, dict)
    content, reason, calls = check_pipe([item async for item in result])
    assert reason == "tool_calls"
    assert [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == [
        ("call_search", "web_search", {"query": "42"})
    ]
    assert 'name="add"' in content and "web_search" not in content


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


async def _drain(stream: Any) -> list[Any]:
    return [item async for item in stream]


async def test_pipe_raises_for_an_unknown_agent(pipe: Pipe) -> None:
    with pytest.raises(RuntimeError, match="no agent named 'ghost'"):
        await pipe.pipe(
            {"model": "runner.ghost", "messages": [{"role": "user", "content": "hi"}], "stream": True}
        )
