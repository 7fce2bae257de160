"""``runner mcp PATH...`` driven by the official ``mcp`` client over stdio, in both protocol generations."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from runner.store.transcript import read_transcript, sessions_dir
from tests.mcp_server.conftest import (
    END_HOOK,
    MODES,
    ROOT,
    SLOW_TOOLS,
    Agents,
    check_structured,
    echo,
    runner_env,
    tool_then_answer,
    wait_for,
)

TEAM = """\
version: 1
agents:
  writer:
    model:
      id: openai/scripted
      api_base: {base}
      api_key: ${{SCRIPTED_API_KEY:-sk-test}}
      retries: 0
    prompts: {{system: Write.}}
workflow:
  name: pipeline
  steps:
    - id: draft
      agent: writer
      input: "{{{{ input }}}}"
"""


@pytest.mark.parametrize("mode", MODES)
async def test_each_agent_and_workflow_is_a_tool_described_honestly(
    mode: str, agents: Agents, scripted_server: Callable[..., Any], stdio: Callable[..., Any]
) -> None:
    server = scripted_server(echo, repeat=True)
    agents.write("helper", server, "description: Answers questions about the weather.")
    agents.write("doer", server, "description: Does things.", tools="def act() -> str:\n    return 'done'\n")
    (agents.root / "team.yaml").write_text(TEAM.format(base=server.base_url), encoding="utf-8")
    async with Client(stdio([agents.root]), mode=mode) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert client.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
    assert {"helper", "doer", "pipeline", "writer"} <= set(tools)
    helper, doer, pipeline = tools["helper"], tools["doer"], tools["pipeline"]
    assert helper.description == "Answers questions about the weather."
    assert helper.input_schema["required"] == ["message"]
    assert set(helper.input_schema["properties"]) == {"message", "session_id"}
    assert set(pipeline.input_schema["properties"]) == {"message"}  # a workflow runs once per call
    assert "draft" in (pipeline.description or "")
    for tool in (helper, doer, pipeline):
        assert tool.output_schema is not None
        assert set(tool.output_schema["required"]) == {"response", "session_id"}
    # read-only only when the agent has no tools at all; with a tool, no hint (MCP's defaults)
    assert helper.annotations is not None and helper.annotations.read_only_hint is True
    assert helper.annotations.destructive_hint is False
    assert doer.annotations is not None and doer.annotations.read_only_hint is None


@pytest.mark.parametrize("mode", MODES)
async def test_a_call_answers_and_its_session_id_continues_the_conversation(
    mode: str, agents: Agents, scripted_server: Callable[..., Any], stdio: Callable[..., Any], home: Path
) -> None:
    agents.write("helper", scripted_server(echo, repeat=True))
    async with Client(stdio([agents.root]), mode=mode) as client:
        (tool,) = (await client.list_tools()).tools
        first = await client.call_tool("helper", {"message": "my name is Ada"})
        data = check_structured(tool, first)
        assert data["response"] == first.content[0].text == "heard: my name is Ada"
        again = await client.call_tool("helper", {"message": "who am I?", "session_id": data["session_id"]})
        more = check_structured(tool, again)
    assert more["session_id"] == data["session_id"]
    assert more["response"] == "heard: my name is Ada | who am I?"
    transcript = read_transcript(sessions_dir(home) / f"{data['session_id']}.jsonl")
    assert [m["content"] for m in transcript.messages() if m["role"] == "user"] == [
        "my name is Ada",
        "who am I?",
    ]


@pytest.mark.parametrize("mode", MODES)
async def test_bad_calls_are_error_results_that_say_what_is_wrong(
    mode: str, agents: Agents, scripted_server: Callable[..., Any], stdio: Callable[..., Any]
) -> None:
    server = scripted_server(echo, repeat=True)
    agents.write("helper", server)
    async with Client(stdio([agents.root]), mode=mode) as client:
        not_text = await client.call_tool("helper", {"message": 42})
        missing = await client.call_tool("helper", {})
        extra = await client.call_tool("helper", {"message": "hi", "model": "gpt-9"})
        unknown = await client.call_tool(
            "helper", {"message": "hi", "session_id": "20990101-000000-000000000000"}
        )
        odd = await client.call_tool("helper", {"message": "hi", "session_id": "../../etc/passwd"})
        with pytest.raises(MCPError) as raised:
            await client.call_tool("nobody", {"message": "hi"})
        still = await client.call_tool("helper", {"message": "still here?"})
    assert not_text.is_error and "arguments.message must be a string" in not_text.content[0].text
    assert "it is a number" in not_text.content[0].text
    assert missing.is_error and "it is missing" in missing.content[0].text
    assert extra.is_error and "'model'" in extra.content[0].text
    for result in (unknown, odd):
        assert result.is_error and "no conversation" in result.content[0].text
    assert unknown.content[0].text.replace("20990101-000000-000000000000", "ID") == odd.content[
        0
    ].text.replace("../../etc/passwd", "ID")  # one answer for every miss
    assert raised.value.code == -32602 and "unknown tool 'nobody'" in raised.value.message
    assert "helper" in raised.value.message  # names what is served
    assert not still.is_error and still.content[0].text == "heard: still here?"
    assert len(server.requests) == 1  # no bad call reached the model


async def test_a_limit_or_a_failed_run_is_an_error_result_that_says_why(
    agents: Agents, scripted_server: Callable[..., Any], stdio: Callable[..., Any]
) -> None:
    looping = scripted_server(tool_then_answer("act"), repeat=True)
    agents.write("looper", looping, "limits:\n  max_steps: 1", tools="def act() -> str:\n    return 'done'\n")
    failing = scripted_server([{"status": 400, "error": "the prompt is not allowed"}], repeat=True)
    agents.write("fragile", failing)
    async with Client(stdio([agents.root])) as client:
        limited = await client.call_tool("looper", {"message": "go"})
        failed = await client.call_tool("fragile", {"message": "go"})
    assert limited.is_error
    text = limited.content[0].text
    assert text.startswith("looper stopped (limit): ") and "max_steps" in text
    assert "session_id 2" in text  # the conversation can be looked at (runner sessions show)
    assert failed.is_error
    assert failed.content[0].text.startswith("fragile failed: the model failed")
    assert "127.0.0.1" not in failed.content[0].text  # the model's endpoint stays hidden


async def test_a_structured_agent_answers_its_own_schema_with_the_session_id(
    agents: Agents, scripted_server: Callable[..., Any], stdio: Callable[..., Any]
) -> None:
    server = scripted_server([{"content": json.dumps({"city": "Oslo", "temp": 3})}], repeat=True)
    schema = """\
        output:
          type: object
          properties:
            city: {type: string}
            temp: {type: integer}
          required: [city, temp]
          additionalProperties: false
        """
    agents.write("weather", server, schema)
    async with Client(stdio([agents.root])) as client:
        (tool,) = (await client.list_tools()).tools
        result = await client.call_tool("weather", {"message": "weather in Oslo?"})
    assert tool.output_schema is not None
    assert tool.output_schema["properties"]["response"]["required"] == ["city", "temp"]
    data = check_structured(tool, result)
    assert data["response"] == {"city": "Oslo", "temp": 3}
    assert json.loads(result.content[0].text) == {"city": "Oslo", "temp": 3}


async def test_a_workflow_tool_runs_the_workflow(
    agents: Agents, scripted_server: Callable[..., Any], stdio: Callable[..., Any]
) -> None:
    server = scripted_server(echo, repeat=True)
    (agents.root / "team.yaml").write_text(TEAM.format(base=server.base_url), encoding="utf-8")
    steps: list[str] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        steps.append(message or "")

    async with Client(stdio([agents.root])) as client:
        tool = next(t for t in (await client.list_tools()).tools if t.name == "pipeline")
        result = await client.call_tool("pipeline", {"message": "a poem"}, progress_callback=progress)
        refused = await client.call_tool("pipeline", {"message": "more", "session_id": "x"})
    data = check_structured(tool, result)
    assert data["response"] == "heard: a poem" and data["session_id"]
    assert "workflow step draft (writer)" in steps
    assert refused.is_error and "takes only message" in refused.content[0].text


async def test_progress_and_cancel_over_stdio(
    agents: Agents, scripted_server: Callable[..., Any], stdio: Callable[..., Any], marks: Path, home: Path
) -> None:
    """A progress notification per step and tool call; cancelling the call (the client sends
    notifications/cancelled) stops the run: the tool sees its cancellation, the session closes."""
    server = scripted_server(tool_then_answer("slow"), repeat=True)
    agents.write("sleeper", server, tools=SLOW_TOOLS.format(marks=marks), hooks=END_HOOK.format(marks=marks))
    seen: list[str] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        seen.append(message or "")

    async with Client(stdio([agents.root])) as client:
        with anyio.move_on_after(60) as scope:
            async with anyio.create_task_group() as group:
                group.start_soon(
                    lambda: client.call_tool("sleeper", {"message": "wait"}, progress_callback=progress)
                )
                await anyio.to_thread.run_sync(
                    lambda: wait_for(lambda: (marks / "started").exists(), what="the tool")
                )
                while "tool slow" not in seen:  # the notification of the tool call, then cancel
                    await anyio.sleep(0.01)
                group.cancel_scope.cancel()
        assert not scope.cancelled_caught
        await anyio.to_thread.run_sync(
            lambda: wait_for(lambda: (marks / "session_end").exists(), what="the end")
        )
        cancelled = (marks / "session_end").read_text()
        (marks / "release").write_text("1")
        after = await client.call_tool("sleeper", {"message": "again"})
    assert after.content[0].text == "the tool said released"  # the server goes on serving
    assert (marks / "cancelled").exists()
    assert seen[:2] == ["step 1 of turn 1", "tool slow"]
    results = [
        m
        for m in read_transcript(sessions_dir(home) / f"{cancelled}.jsonl").messages()
        if m["role"] == "tool"
    ]
    assert results and "cancelled" in results[0]["content"]


def test_stdout_carries_the_protocol_only(
    agents: Agents, scripted_server: Callable[..., Any], home: Path
) -> None:
    """Every line on stdout is a JSON-RPC message, even when a tool prints; the rest is on stderr."""
    server = scripted_server(tool_then_answer("noisy"), repeat=True)
    agents.write(
        "talker", server, tools="def noisy() -> str:\n    print('PRINTED BY A TOOL')\n    return 'ok'\n"
    )
    requests = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "talker", "arguments": {"message": "hi"}},
        },
    ]
    process = subprocess.Popen(
        [sys.executable, "-m", "runner", "mcp", str(agents.root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=runner_env(home),
        cwd=ROOT,
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write("".join(json.dumps(r) + "\n" for r in requests))
    process.stdin.flush()
    lines = [json.loads(process.stdout.readline()) for _ in range(2)]
    process.stdin.close()  # the client goes: the server ends cleanly
    assert process.wait(timeout=30) == 0  # stdin closed: a clean exit
    assert process.stderr is not None
    rest, errors = process.stdout.read(), process.stderr.read()
    assert [line.get("id") for line in lines] == [1, 2], errors
    assert lines[1]["result"]["content"][0]["text"] == "the tool said ok"
    assert rest == ""
    stdout = "".join(json.dumps(line) for line in lines) + rest
    assert "PRINTED BY A TOOL" not in stdout
    assert "PRINTED BY A TOOL" in errors  # a tool's print goes to stderr
    assert "runner mcp: 1 tool over stdio: talker" in errors


def test_a_client_that_vanishes_mid_run_stops_it(
    agents: Agents, scripted_server: Callable[..., Any], home: Path, marks: Path
) -> None:
    """The client closes stdin while a tool runs: the run stops, its tool is cancelled, the session
    closes (its transcript kept), and the process exits cleanly."""
    server = scripted_server(tool_then_answer("slow"), repeat=True)
    agents.write("sleeper", server, tools=SLOW_TOOLS.format(marks=marks), hooks=END_HOOK.format(marks=marks))
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "sleeper", "arguments": {"message": "wait"}},
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "runner", "mcp", str(agents.root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=runner_env(home),
        cwd=ROOT,
    )
    assert process.stdin is not None
    try:
        process.stdin.write(
            json.dumps(init)
            + "\n"
            + json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
            + "\n"
        )
        process.stdin.write(json.dumps(call) + "\n")
        process.stdin.flush()
        wait_for(lambda: (marks / "started").exists(), timeout=30, what="the tool")
        process.stdin.close()
        assert process.wait(timeout=30) == 0
    finally:
        process.kill()
    assert (marks / "cancelled").exists() and (marks / "session_end").exists()
    session_id = (marks / "session_end").read_text()
    results = [
        m
        for m in read_transcript(sessions_dir(home) / f"{session_id}.jsonl").messages()
        if m["role"] == "tool"
    ]
    assert results and "cancelled" in results[0]["content"]
