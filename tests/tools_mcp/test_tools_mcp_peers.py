"""MCP sources against real third-party servers on 127.0.0.1: the npm reference server over stdio,
streamable HTTP and legacy SSE, and PyPI's ``mcp-server-time`` over stdio."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import pytest

from runner.agentfile.config import ToolSourceConfig
from runner.errors import ConfigError, ToolError
from runner.tools.base import RunContext, Tool
from runner.tools.mcp import McpLoadedSource, load_source
from runner.tools.sources import SourceContext

# the module's everything_http / everything_sse is started once: all its tests on one worker (xdist loadgroup)
pytestmark = pytest.mark.xdist_group("mcp-everything")


@asynccontextmanager
async def opened(spec: ToolSourceConfig, ctx: SourceContext) -> AsyncIterator[McpLoadedSource]:
    async with AsyncExitStack() as stack:
        yield await load_source(spec, ctx, stack)


def by_name(loaded: McpLoadedSource) -> dict[str, Tool]:
    return {tool.name: tool for tool in loaded.tools}


@pytest.fixture(params=["stdio", "http", "sse"])
def everything_spec(
    request: pytest.FixtureRequest,
    make_spec: Callable[..., ToolSourceConfig],
    everything_stdio: tuple[str, ...],
) -> ToolSourceConfig:
    """The reference server over each transport."""
    if request.param == "stdio":
        return make_spec(*everything_stdio, id="everything")
    peer = request.getfixturevalue("everything_http" if request.param == "http" else "everything_sse")
    return make_spec(peer.url, id="everything")


async def test_lists_reference_server_tools_on_every_transport(
    everything_spec: ToolSourceConfig, source_ctx: SourceContext
) -> None:
    async with opened(everything_spec, source_ctx) as loaded:
        tools = by_name(loaded)
        assert {"echo", "get-sum", "get-tiny-image", "trigger-long-running-operation"} <= set(tools)
        assert tools["get-sum"].parameters["required"] == ["a", "b"]
        assert all("$schema" not in tool.parameters for tool in loaded.tools)
        assert all(tool.source_kind == "mcp" and tool.source_id == "everything" for tool in loaded.tools)
        assert loaded.instructions is not None and "Everything Server" in loaded.instructions
        # a task-only tool cannot be called without MCP task polling: left out, with the reason
        assert "simulate-research-query" not in tools
        assert any(reason.startswith("simulate-research-query:") for reason in loaded.skipped)


async def test_echo_and_sum_over_every_transport(
    everything_spec: ToolSourceConfig, source_ctx: SourceContext, run_ctx: RunContext
) -> None:
    async with opened(everything_spec, source_ctx) as loaded:
        tools = by_name(loaded)
        assert await tools["echo"].call({"message": "hi there"}, run_ctx) == "Echo: hi there"
        assert await tools["get-sum"].call({"a": 2, "b": 40}, run_ctx) == "The sum of 2 and 40 is 42."


async def test_image_is_summarized_and_structured_content_is_compact_json(
    make_spec: Callable[..., ToolSourceConfig],
    everything_stdio: tuple[str, ...],
    source_ctx: SourceContext,
    run_ctx: RunContext,
) -> None:
    async with opened(make_spec(*everything_stdio), source_ctx) as loaded:
        tools = by_name(loaded)
        image = await tools["get-tiny-image"].call({}, run_ctx)
        assert image.splitlines() == [
            "Here's the image you requested:",
            "[image: image/png, 4.0 kB]",
            "The image above is the MCP logo.",
        ]
        structured = await tools["get-structured-content"].call({"location": "Chicago"}, run_ctx)
        assert structured == '{"temperature":36,"conditions":"Light rain / drizzle","humidity":82}'
        links = await tools["get-resource-links"].call({"count": 2}, run_ctx)
        assert "[resource link Text Resource 2: demo://resource/dynamic/text/2 (text/plain)]" in links
        reference = await tools["get-resource-reference"].call(
            {"resourceType": "Blob", "resourceId": 1}, run_ctx
        )
        assert "[resource: demo://resource/dynamic/blob/1 (text/plain, " in reference


async def test_is_error_result_becomes_tool_error(
    make_spec: Callable[..., ToolSourceConfig],
    everything_stdio: tuple[str, ...],
    source_ctx: SourceContext,
    run_ctx: RunContext,
) -> None:
    async with opened(make_spec(*everything_stdio), source_ctx) as loaded:
        with pytest.raises(ToolError, match="expected number"):
            await by_name(loaded)["get-sum"].call({"a": "two", "b": 1}, run_ctx)
        # the session goes on
        assert await by_name(loaded)["echo"].call({"message": "still here"}, run_ctx) == "Echo: still here"


async def test_time_server_answers_over_stdio(
    make_spec: Callable[..., ToolSourceConfig],
    time_server_command: str,
    source_ctx: SourceContext,
    run_ctx: RunContext,
) -> None:
    # a bare name: found on PATH, or (venv not activated) beside the running Python
    async with opened(make_spec("mcp-server-time", id="time"), source_ctx) as loaded:
        tools = by_name(loaded)
        assert set(tools) == {"get_current_time", "convert_time"}
        assert "title" not in tools["convert_time"].parameters
        now = json.loads(await tools["get_current_time"].call({"timezone": "Etc/UTC"}, run_ctx))
        assert now["timezone"] == "Etc/UTC" and "datetime" in now
        converted = json.loads(
            await tools["convert_time"].call(
                {"source_timezone": "Etc/UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}, run_ctx
            )
        )
        assert converted["target"]["datetime"].endswith("21:00:00+09:00")


async def test_twenty_calls_open_one_http_session(
    everything_http: Any,
    make_spec: Callable[..., ToolSourceConfig],
    source_ctx: SourceContext,
    run_ctx: RunContext,
) -> None:
    before = everything_http.stats()["sessions_opened"]
    spec = make_spec(everything_http.url, headers={"X-Test-Token": "secret-42"})
    async with opened(spec, source_ctx) as loaded:
        echo = by_name(loaded)["echo"]
        results = await asyncio.gather(*(echo.call({"message": str(i)}, run_ctx) for i in range(10)))
        for i in range(10, 20):
            results.append(await echo.call({"message": str(i)}, run_ctx))
        assert results == [f"Echo: {i}" for i in range(20)]
        assert loaded.client is not None and loaded.client.sessions_opened == 1
    stats = everything_http.stats()
    assert stats["sessions_opened"] - before == 1
    assert stats["last_test_token"] == "secret-42"


async def test_twenty_calls_use_one_stdio_process(
    make_spec: Callable[..., ToolSourceConfig],
    everything_stdio: tuple[str, ...],
    source_ctx: SourceContext,
    run_ctx: RunContext,
    child_pids: Callable[[], set[int]],
) -> None:
    before = child_pids()
    async with opened(make_spec(*everything_stdio), source_ctx) as loaded:
        started = child_pids() - before
        echo = by_name(loaded)["echo"]
        for i in range(20):
            assert await echo.call({"message": str(i)}, run_ctx) == f"Echo: {i}"
        assert child_pids() - before == started and len(started) == 1
        assert loaded.client is not None and loaded.client.sessions_opened == 1


async def test_call_past_its_timeout_is_tool_error_and_session_survives(
    make_spec: Callable[..., ToolSourceConfig],
    everything_stdio: tuple[str, ...],
    source_ctx: SourceContext,
    run_ctx: RunContext,
) -> None:
    async with opened(make_spec(*everything_stdio, timeout_s=0.5), source_ctx) as loaded:
        tools = by_name(loaded)
        started = asyncio.get_running_loop().time()
        with pytest.raises(ToolError, match=r"timed out after 0\.5 s"):
            await tools["trigger-long-running-operation"].call({"duration": 1.5, "steps": 1}, run_ctx)
        assert asyncio.get_running_loop().time() - started < 3
        assert await tools["echo"].call({"message": "after"}, run_ctx) == "Echo: after"


async def test_call_cancelled_by_its_caller_leaves_the_session_usable(
    make_spec: Callable[..., ToolSourceConfig],
    everything_stdio: tuple[str, ...],
    source_ctx: SourceContext,
    run_ctx: RunContext,
) -> None:
    async with opened(make_spec(*everything_stdio), source_ctx) as loaded:
        tools = by_name(loaded)
        # what the executor's own timeout (or Ctrl+C) does to a call
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(
                tools["trigger-long-running-operation"].call({"duration": 1.5, "steps": 1}, run_ctx), 0.3
            )
        assert await tools["echo"].call({"message": "next"}, run_ctx) == "Echo: next"
        assert loaded.client is not None and loaded.client.sessions_opened == 1


async def test_progress_notifications_reach_on_progress(
    make_spec: Callable[..., ToolSourceConfig],
    everything_stdio: tuple[str, ...],
    source_ctx: SourceContext,
    run_ctx: RunContext,
    progress: Any,
) -> None:
    async with opened(make_spec(*everything_stdio, id="ev"), source_ctx) as loaded:
        result = await by_name(loaded)["trigger-long-running-operation"].call(
            {"duration": 0.3, "steps": 3}, run_ctx
        )
        assert result.startswith("Long running operation completed")
    assert [line for line in progress.lines if "long-running" in line[1]] == [
        ("ev", "trigger-long-running-operation: 1/3"),
        ("ev", "trigger-long-running-operation: 2/3"),
        ("ev", "trigger-long-running-operation: 3/3"),
    ]


async def test_unreachable_http_server_is_config_error(
    make_spec: Callable[..., ToolSourceConfig], source_ctx: SourceContext, unused_port: int
) -> None:
    spec = make_spec(f"http://127.0.0.1:{unused_port}/mcp", index=2)
    with pytest.raises(ConfigError) as raised:
        async with opened(spec, source_ctx):
            pass
    error = raised.value
    assert "could not be reached" in error.message and "cannot reach the server" in error.message
    assert error.path == "tools[2].mcp" and error.file == str(source_ctx.agent.path)


async def test_http_server_that_dies_gives_tool_errors_then_reconnects(
    own_http_peer: Any,
    make_spec: Callable[..., ToolSourceConfig],
    source_ctx: SourceContext,
    run_ctx: RunContext,
) -> None:
    async with opened(make_spec(own_http_peer.url, timeout_s=5), source_ctx) as loaded:
        echo = by_name(loaded)["echo"]
        assert await echo.call({"message": "one"}, run_ctx) == "Echo: one"
        own_http_peer.stop()
        # the call finds the session dead (or, if the loss was seen first, the reconnect refused)
        with pytest.raises(ToolError, match=r"closed the connection during 'echo'|is unavailable"):
            await echo.call({"message": "two"}, run_ctx)
        own_http_peer.start()  # same port
        assert await echo.call({"message": "three"}, run_ctx) == "Echo: three"
        assert loaded.client is not None and loaded.client.sessions_opened == 2


async def test_closing_from_another_task_ends_every_process_cleanly(
    make_spec: Callable[..., ToolSourceConfig],
    everything_stdio: tuple[str, ...],
    everything_http: Any,
    source_ctx: SourceContext,
    run_ctx: RunContext,
    child_pids: Callable[[], set[int]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    before = child_pids()
    stack = AsyncExitStack()
    stdio_source = await load_source(make_spec(*everything_stdio), source_ctx, stack)
    http_source = await load_source(make_spec(everything_http.url), source_ctx, stack)
    assert len(child_pids() - before) == 1
    await by_name(stdio_source)["trigger-long-running-operation"].call({"duration": 0.1, "steps": 1}, run_ctx)
    await by_name(http_source)["echo"].call({"message": "x"}, run_ctx)
    with caplog.at_level(logging.DEBUG):
        await asyncio.create_task(stack.aclose())  # not the task that loaded the sources
    assert child_pids() - before == set()
    problems = [r for r in caplog.records if r.levelno >= logging.WARNING or "cancel scope" in r.getMessage()]
    assert problems == []
    assert not [t for t in asyncio.all_tasks() if t.get_name().startswith("mcp:")]
