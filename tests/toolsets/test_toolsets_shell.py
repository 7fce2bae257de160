"""The ``shell`` toolset: runs commands, reports exit codes, kills whole process groups, cuts output."""

from __future__ import annotations

import asyncio
import os
import re
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest

from runner.agentfile.config import AgentConfig, ToolSourceConfig
from runner.errors import ConfigError, ToolError
from runner.tools.base import RunContext, Tool
from runner.tools.builtin import load_source
from runner.tools.sources import SourceContext

#: Prints the command's process group (the reaper's, on Linux; the shell's elsewhere).
_PGID = "ps -o pgid= -p $$ | tr -d ' '"


def _group_alive(pgid: int) -> bool:
    """Whether any process of group ``pgid`` still runs (zombies count as gone)."""
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        return True
    for stat in proc.glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            return True
    return False


async def _gone(pgid: int, within_s: float = 3.0) -> bool:
    """Wait (bounded) until group ``pgid`` has no live process."""
    deadline = time.monotonic() + within_s
    while _group_alive(pgid):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


async def _wait_for_file(path: Path, within_s: float = 5.0) -> str:
    deadline = time.monotonic() + within_s
    while not (path.exists() and path.read_text().strip()):
        assert time.monotonic() < deadline, f"{path} never appeared"
        await asyncio.sleep(0.01)
    return path.read_text().strip()


@pytest.fixture
async def shell(load_builtin: Any) -> Tool:
    """The shell tool in ``tmp_path/ws`` with a 1 s timeout."""
    tools = await load_builtin("shell", {"cwd": "ws", "timeout_s": 1})
    tool: Tool = tools["shell"]
    return tool


async def test_runs_a_command_in_the_working_folder(shell: Tool, run_ctx: RunContext, tmp_path: Path) -> None:
    output = await shell.call({"command": "pwd; echo out; echo err >&2"}, run_ctx)
    assert output == f"{(tmp_path / 'ws').resolve()}\nout\nerr\n[exit code 0]"


async def test_non_zero_exit_is_a_tool_error_with_the_output(shell: Tool, run_ctx: RunContext) -> None:
    with pytest.raises(ToolError) as caught:
        await shell.call({"command": "echo failing; exit 3"}, run_ctx)
    assert caught.value.message == "failing\n[exit code 3]"


async def test_a_command_that_never_ends_is_killed_at_the_timeout(shell: Tool, run_ctx: RunContext) -> None:
    with pytest.raises(ToolError) as caught:
        await shell.call({"command": f"{_PGID}; sleep 60"}, run_ctx)
    assert caught.value.message.startswith("Command timed out after 1 s and was killed")
    pgid = int(re.findall(r"^(\d+)$", caught.value.message, re.MULTILINE)[0])
    assert await _gone(pgid)


async def test_background_processes_end_with_the_command(shell: Tool, run_ctx: RunContext) -> None:
    output = await shell.call({"command": "sleep 60 & echo $!"}, run_ctx)
    pid = int(output.splitlines()[0])
    assert await _gone(pid)


async def test_a_cancelled_call_kills_the_process_group(
    shell: Tool, run_ctx: RunContext, tmp_path: Path
) -> None:
    pid_file = tmp_path / "ws" / "pid"
    task: asyncio.Future[Any] = asyncio.ensure_future(
        shell.call({"command": f"{_PGID} > pid; sleep 60; sleep 60"}, run_ctx)
    )
    pgid = int(await _wait_for_file(pid_file))
    assert _group_alive(pgid)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await _gone(pgid)


async def test_closing_the_session_kills_a_running_command(tmp_path: Path, run_ctx: RunContext) -> None:
    spec = ToolSourceConfig(kind="builtin", target="shell", base_dir=tmp_path, options={"timeout_s": 30})
    stack = AsyncExitStack()
    agent = AgentConfig(name="tester", path=tmp_path / "agent.yaml")
    loaded = await load_source(spec, SourceContext(agent=agent), stack)
    task: asyncio.Future[Any] = asyncio.ensure_future(
        loaded.tools[0].call({"command": f"{_PGID} > pid; sleep 60; sleep 60"}, run_ctx)
    )
    pgid = int(await _wait_for_file(tmp_path / "pid"))
    await stack.aclose()
    assert await _gone(pgid)
    with pytest.raises(ToolError, match="killed by signal 9"):
        await asyncio.wait_for(task, 5)


async def test_long_output_is_cut_in_the_middle_with_a_note(load_builtin: Any, run_ctx: RunContext) -> None:
    tools = await load_builtin("shell", {"output_chars": 1000})
    output = await tools["shell"].call({"command": "seq 1 20000"}, run_ctx)
    head, note, tail = output.partition("\n[... ")[0], output.split("\n")[0], output.rsplit("\n", 2)
    assert head.startswith("1\n2\n3\n")
    assert "characters cut; the output limit is 1000 ...]" in output
    assert tail[-2:] == ["20000", "[exit code 0]"]
    assert note == "1"
    assert len(output) < 1200


async def test_env_option_sets_variables_and_inherit_env_false_drops_the_rest(
    load_builtin: Any, run_ctx: RunContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RUNNER_TEST_VALUE", "plain")
    inherit = await load_builtin("shell", {"env": {"GREETING": "hello", "PORT": 8080}})
    output = await inherit["shell"].call({"command": 'echo "$GREETING $PORT $RUNNER_TEST_VALUE"'}, run_ctx)
    assert output.startswith("hello 8080 plain\n")
    isolated = await load_builtin("shell", {"env": {"GREETING": "hi"}, "inherit_env": False})
    output = await isolated["shell"].call({"command": 'echo "$GREETING [$RUNNER_TEST_VALUE]"'}, run_ctx)
    assert output.startswith("hi []\n")


async def test_secret_looking_variables_are_withheld_unless_named_or_asked_for(
    load_builtin: Any, run_ctx: RunContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A command the model writes must not read the agent's API keys from the runner's environment."""
    for name in ("OPENAI_API_KEY", "GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD"):
        monkeypatch.setenv(name, f"value-of-{name}")
    command = 'echo "[$OPENAI_API_KEY][$GITHUB_TOKEN][$AWS_SECRET_ACCESS_KEY][$DB_PASSWORD][$HOME]"'
    default = await load_builtin("shell")
    output = await default["shell"].call({"command": command}, run_ctx)
    assert output.startswith("[][][][][/")
    named = await load_builtin("shell", {"env": {"GITHUB_TOKEN": "given"}})
    output = await named["shell"].call({"command": command}, run_ctx)
    assert output.startswith("[][given][][][/")
    everything = await load_builtin("shell", {"inherit_secrets": True})
    output = await everything["shell"].call({"command": command}, run_ctx)
    assert output.startswith(
        "[value-of-OPENAI_API_KEY][value-of-GITHUB_TOKEN][value-of-AWS_SECRET_ACCESS_KEY][value-of-DB_PASSWORD]"
    )


async def test_inherit_secrets_must_be_a_boolean(load_builtin: Any) -> None:
    with pytest.raises(ConfigError) as caught:
        await load_builtin("shell", {"inherit_secrets": "yes"})
    assert caught.value.path == "tools[0].with.inherit_secrets"
    assert "option 'inherit_secrets': 'yes' is not of type 'boolean'" in caught.value.message


async def test_confirm_defaults_to_true_and_confirm_false_turns_it_off(load_builtin: Any) -> None:
    assert (await load_builtin("shell"))["shell"].confirm is True
    assert (await load_builtin("shell", confirm=True))["shell"].confirm is True
    assert (await load_builtin("shell", confirm=False))["shell"].confirm is False


async def test_the_tool_timeout_leaves_room_for_the_shell_timeout(load_builtin: Any) -> None:
    tool = (await load_builtin("shell", {"timeout_s": 120}))["shell"]
    assert tool.timeout_s is not None and tool.timeout_s > 120
    assert "killed after 120 s" in tool.description
