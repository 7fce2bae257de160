"""An MCP server that writes lines that are not JSON-RPC on its stdout: one warning line each, no
traceback, and the session goes on (issue 12)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest

from runner.agentfile.config import ToolSourceConfig
from runner.tools.base import RunContext
from runner.tools.mcp import load_source
from runner.tools.sources import SourceContext

NOISY_SERVER = Path(__file__).resolve().parent / "noisy_mcp_server.py"
RUNNER = str(Path(sys.executable).parent / "runner")
WARNING = "ignored a line of its output that is not JSON-RPC"


def _echo_three_times(body: dict[str, Any]) -> dict[str, Any]:
    done = sum(1 for message in body["messages"] if message["role"] == "tool")
    if done < 3:
        return {"tool_calls": [{"name": "echo", "arguments": {"text": f"ping {done}"}}]}
    results = [m["content"] for m in body["messages"] if m["role"] == "tool"]
    return {"content": "echoed: " + " | ".join(results)}


@pytest.mark.slow
def test_junk_on_stdout_gives_one_warning_line_each_and_no_traceback_through_runner_run(
    scripted_server: Callable[..., Any], tmp_path: Path
) -> None:
    model = scripted_server(_echo_three_times)
    log = tmp_path / "junk.log"
    agent = tmp_path / "agent.yaml"
    agent.write_text(
        textwrap.dedent(
            f"""\
            version: 1
            name: noisy
            model:
              id: openai/scripted
              api_base: {model.base_url}
              api_key: ${{SCRIPTED_API_KEY:-sk-test}}
              retries: 0
            tools:
              - mcp:
                  command: {sys.executable}
                  args: [{NOISY_SERVER}]
                  env: {{NOISY_MCP_LOG: {log}}}
            """
        )
    )
    env = {**os.environ, "RUNNER_HOME": str(tmp_path / "home")}
    done = subprocess.run(
        [RUNNER, "run", str(agent), "-p", "echo thrice"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=50,
    )
    assert done.returncode == 0, done.stderr
    answer = done.stdout.split("echoed: ", 1)[1]  # every call answered: the session went on
    assert [part.split("\n")[0] for part in answer.split(" | ")] == ["ping 0", "ping 1", "ping 2"]
    junk_lines = len(log.read_text().splitlines())
    assert junk_lines >= 6  # one first, then one after each answer (initialize, list, 3 calls)
    assert "Traceback" not in done.stderr
    warnings = [line for line in done.stderr.splitlines() if WARNING in line]
    assert 1 <= len(warnings) <= junk_lines
    assert all(len(line) < 400 for line in warnings)  # the 100 KB junk line is quoted in part
    assert "Failed to parse JSONRPC" not in done.stderr  # the SDK's own report is not shown as well


async def test_junk_reports_stop_after_ten_lines_of_one_connection(
    make_spec: Callable[..., ToolSourceConfig],
    source_ctx: SourceContext,
    run_ctx: RunContext,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    spec = make_spec(sys.executable, str(NOISY_SERVER), env={"NOISY_MCP_LOG": str(tmp_path / "junk.log")})
    with caplog.at_level(logging.WARNING):
        async with AsyncExitStack() as stack:
            loaded = await load_source(spec, source_ctx, stack)
            (echo,) = loaded.tools
            for n in range(12):
                assert (await echo.call({"text": f"n{n}"}, run_ctx)).startswith(f"n{n}")
    assert not [record for record in caplog.records if record.exc_info], "a traceback was logged"
    reports = [record.getMessage() for record in caplog.records if WARNING in record.getMessage()]
    assert len(reports) == 10
    assert reports[-1].endswith("(further such lines are not reported)")
    assert len((tmp_path / "junk.log").read_text().splitlines()) > 10
