"""MCP sources against the scripted stdio server: pagination, schema repair, list_changed, mixed
content, JSON-RPC errors, a server that dies mid-call, and servers that fail to start."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from runner.agentfile.config import ToolSourceConfig
from runner.errors import ConfigError, ToolError
from runner.tools.base import RunContext, Tool
from runner.tools.mcp import McpLoadedSource, SchemaProblem, load_source
from runner.tools.sources import SourceContext

FakeServer = tuple[tuple[str, ...], Path]


@asynccontextmanager
async def opened(spec: ToolSourceConfig, ctx: SourceContext) -> AsyncIterator[McpLoadedSource]:
    async with AsyncExitStack() as stack:
        yield await load_source(spec, ctx, stack)


def by_name(loaded: McpLoadedSource) -> dict[str, Tool]:
    return {tool.name: tool for tool in loaded.tools}


@pytest.fixture
def fake_spec(make_spec: Callable[..., ToolSourceConfig], fake_server: FakeServer) -> ToolSourceConfig:
    command, log = fake_server
    return make_spec(*command, env={"FAKE_MCP_LOG": str(log)}, id="fake")


def initializations(fake_server: FakeServer) -> int:
    log = fake_server[1]
    return len(log.read_text().splitlines()) if log.exists() else 0


async def test_listing_follows_cursors_and_repairs_or_skips_bad_schemas(
    fake_spec: ToolSourceConfig, source_ctx: SourceContext
) -> None:
    async with opened(fake_spec, source_ctx) as loaded:
        # four pages of two tools; 'bad_schema' (type: string) cannot take an arguments object
        assert [tool.name for tool in loaded.tools] == [
            "echo", "no_type", "fail", "rpc_error", "crash", "add_tool", "mixed",
        ]  # fmt: skip
        tools = by_name(loaded)
        assert tools["no_type"].parameters == {"type": "object", "properties": {}}
        assert tools["echo"].parameters == {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        }
        assert loaded.schema_problems == [
            SchemaProblem("no_type", "inputSchema has no type", "repaired"),
            SchemaProblem("bad_schema", "inputSchema is not an object schema ('string')", "skipped"),
        ]
        assert loaded.skipped == ["bad_schema: inputSchema is not an object schema ('string')"]
        assert loaded.instructions == "Prefer echo for repeating text."
        assert loaded.source_id == "fake"


async def test_server_id_names_the_source_when_the_file_gives_none(
    make_spec: Callable[..., ToolSourceConfig], fake_server: FakeServer, source_ctx: SourceContext
) -> None:
    async with opened(make_spec(*fake_server[0]), source_ctx) as loaded:
        assert {tool.source_id for tool in loaded.tools} == {"scripted"}  # from serverInfo "fake/scripted"


async def test_is_error_and_json_rpc_errors_become_tool_errors(
    fake_spec: ToolSourceConfig, source_ctx: SourceContext, run_ctx: RunContext
) -> None:
    async with opened(fake_spec, source_ctx) as loaded:
        tools = by_name(loaded)
        with pytest.raises(ToolError, match=r"^it broke$"):
            await tools["fail"].call({}, run_ctx)
        with pytest.raises(ToolError, match="answered with an error: bad arguments for rpc_error"):
            await tools["rpc_error"].call({}, run_ctx)
        assert await tools["echo"].call({"text": "fine"}, run_ctx) == "fine"


async def test_mixed_content_is_summarized(
    fake_spec: ToolSourceConfig, source_ctx: SourceContext, run_ctx: RunContext
) -> None:
    async with opened(fake_spec, source_ctx) as loaded:
        text = await by_name(loaded)["mixed"].call({}, run_ctx)
    assert text.splitlines() == [
        "intro",
        "[audio: audio/wav, 3.0 kB]",
        "[resource: mem://b (application/zip, 1.5 kB)]",
        "[resource: mem://t (text/plain, 6 B)]",
        "inside",
        "[resource link x.csv: file:///x.csv (2.0 kB)]",
        '{"rows":3}',
    ]


async def test_list_changed_relists_and_rebuilds_tools_in_place(
    fake_spec: ToolSourceConfig, source_ctx: SourceContext, run_ctx: RunContext, progress: Any
) -> None:
    async with opened(fake_spec, source_ctx) as loaded:
        tools_list = loaded.tools
        old_echo = by_name(loaded)["echo"]
        assert await by_name(loaded)["add_tool"].call({}, run_ctx) == "added"
        async with asyncio.timeout(10):
            while loaded.version == 0:
                await asyncio.sleep(0.01)
        assert loaded.tools is tools_list and "late" in by_name(loaded)
        assert await by_name(loaded)["late"].call({}, run_ctx) == "late tool works"
        assert await old_echo.call({"text": "old callable"}, run_ctx) == "old callable"
        assert loaded.client is not None and loaded.client.sessions_opened == 1
    assert ("fake", "tools changed (+late)") in progress.lines


async def test_twenty_calls_initialize_once(
    fake_spec: ToolSourceConfig, fake_server: FakeServer, source_ctx: SourceContext, run_ctx: RunContext
) -> None:
    async with opened(fake_spec, source_ctx) as loaded:
        echo = by_name(loaded)["echo"]
        answers = await asyncio.gather(*(echo.call({"text": str(i)}, run_ctx) for i in range(20)))
        assert answers == [str(i) for i in range(20)]
    assert initializations(fake_server) == 1


async def test_server_dying_mid_call_is_tool_error_then_one_reconnect(
    fake_spec: ToolSourceConfig,
    fake_server: FakeServer,
    source_ctx: SourceContext,
    run_ctx: RunContext,
    progress: Any,
) -> None:
    async with opened(fake_spec, source_ctx) as loaded:
        tools = by_name(loaded)
        with pytest.raises(ToolError, match=r"closed the connection during 'crash'.*crashing on purpose"):
            await tools["crash"].call({}, run_ctx)
        assert await tools["echo"].call({"text": "back"}, run_ctx) == "back"
        assert await tools["echo"].call({"text": "again"}, run_ctx) == "again"
        assert loaded.client is not None and loaded.client.sessions_opened == 2
    assert initializations(fake_server) == 2
    assert ("fake", "connection lost; reconnecting") in progress.lines


async def test_concurrent_calls_share_one_reconnect_attempt(
    fake_spec: ToolSourceConfig, fake_server: FakeServer, source_ctx: SourceContext, run_ctx: RunContext
) -> None:
    async with opened(fake_spec, source_ctx) as loaded:
        tools = by_name(loaded)
        with pytest.raises(ToolError):
            await tools["crash"].call({}, run_ctx)
        answers = await asyncio.gather(*(tools["echo"].call({"text": str(i)}, run_ctx) for i in range(5)))
        assert answers == [str(i) for i in range(5)]
    assert initializations(fake_server) == 2


async def test_failed_reconnect_is_tool_error_not_a_crash(
    make_spec: Callable[..., ToolSourceConfig],
    fake_server: FakeServer,
    source_ctx: SourceContext,
    run_ctx: RunContext,
) -> None:
    script = fake_server[1].parent / "once.py"
    marker = fake_server[1].parent / "started-once"
    # serves the first time, then fails at start-up like a server whose config broke meanwhile
    script.write_text(
        "import os, runpy, sys\n"
        f"marker = {str(marker)!r}\n"
        "if os.path.exists(marker):\n"
        "    sys.exit('fatal: second start refused')\n"
        "open(marker, 'w').close()\n"
        f"sys.argv = [{str(fake_server[0][1])!r}]\n"
        f"runpy.run_path({str(fake_server[0][1])!r}, run_name='__main__')\n"
    )
    async with opened(make_spec(fake_server[0][0], str(script), id="once"), source_ctx) as loaded:
        tools = by_name(loaded)
        with pytest.raises(ToolError):
            await tools["crash"].call({}, run_ctx)
        with pytest.raises(ToolError, match=r"unavailable .*reconnect failed.*second start refused"):
            await tools["echo"].call({"text": "x"}, run_ctx)


async def test_unknown_command_is_config_error(
    make_spec: Callable[..., ToolSourceConfig], source_ctx: SourceContext
) -> None:
    spec = make_spec("no-such-mcp-server-command", "--flag", index=3)
    with pytest.raises(ConfigError) as raised:
        async with opened(spec, source_ctx):
            pass
    assert raised.value.message.endswith(
        "could not be started: command not found: no-such-mcp-server-command"
    )
    assert raised.value.path == "tools[3].mcp"


async def test_server_exiting_at_once_reports_its_stderr_tail(
    make_spec: Callable[..., ToolSourceConfig], fake_server: FakeServer, source_ctx: SourceContext
) -> None:
    with pytest.raises(ConfigError) as raised:
        async with opened(make_spec(*fake_server[0], "--exit-now", id="broken"), source_ctx):
            pass
    error = raised.value
    assert error.message == (
        "MCP server 'broken' could not be started: "
        "the server exited (or closed its output) before answering initialize"
    )
    assert (
        error.hint is not None and error.hint.splitlines()[-1].strip() == "fatal: missing setting FAKE_TOKEN"
    )


async def test_server_that_never_answers_hits_the_start_up_timeout(
    make_spec: Callable[..., ToolSourceConfig], source_ctx: SourceContext
) -> None:
    silent = ("-c", "import sys; sys.stdin.read()")  # reads forever, never answers, exits on EOF
    source_ctx.default_timeout_s = 0.5
    with pytest.raises(ConfigError, match=r"could not be started: no answer within 0.5 s"):
        async with opened(make_spec(sys.executable, *silent), source_ctx):
            pass
