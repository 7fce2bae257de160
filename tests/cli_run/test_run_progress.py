"""What `runner run` shows while it waits: a slow tool call's live line on a terminal (issue 23 item 17),
thinking text that ends its own line, and no usage line when no model call reported usage (item 21).

The slow tool blocks on a named pipe until the test writes to it: the test waits for the live line to
appear on the terminal, then lets the tool finish.
"""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.cli_run.conftest import RUNNER, Cli, write_agent

BLOCKING_TOOLS = '''
def add(a: int, b: int) -> int:
    """Add two integers (once the test lets it: it reads the named pipe RELEASE first)."""
    with open(RELEASE) as pipe:
        pipe.read()
    return a + b
'''


def agent_yaml(base_url: str) -> str:
    return (
        f"version: 1\nname: t\nmodel:\n  id: openai/scripted\n  api_base: {base_url}\n  retries: 0\n"
        "prompts:\n  system: You add.\ntools:\n  - python: tools_mod\n"
    )


class Terminal:
    """``runner ARGS`` with stderr on a pseudo-terminal: read what it draws until a pattern shows."""

    def __init__(self, cli: Cli, *args: str) -> None:
        self.leader, follower = pty.openpty()
        env = {**cli.env, "TERM": "xterm", "COLUMNS": "100"}
        self.proc = subprocess.Popen(
            [RUNNER, *args],
            cwd=cli.cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=follower,
        )
        os.close(follower)
        self.screen = ""

    def _read(self) -> bool:
        """Add what the command drew within half a second to ``screen``; False once it closed."""
        ready, _, _ = select.select([self.leader], [], [], 0.5)
        if not ready:
            return self.proc.poll() is None
        try:
            data = os.read(self.leader, 65536)
        except OSError:  # EIO: the command closed its terminal
            return False
        self.screen += data.decode(errors="replace")
        return bool(data)

    def read_until(self, pattern: str, *, timeout: float = 50) -> re.Match[str] | None:
        """Read until ``pattern`` shows (the match), or the command ends or ``timeout`` passes (None)."""
        deadline = time.monotonic() + timeout
        while not (found := re.search(pattern, self.screen)):
            if time.monotonic() > deadline or not self._read():
                return re.search(pattern, self.screen)
        return found

    def close(self) -> tuple[int, str]:
        """Read to the end of what the command draws; its exit code and stdout."""
        deadline = time.monotonic() + 50
        while time.monotonic() < deadline and self._read():
            pass
        assert self.proc.stdout is not None
        stdout = self.proc.stdout.read().decode()
        code = self.proc.wait(timeout=30)
        os.close(self.leader)
        return code, stdout


def _release(pipe: Path) -> None:
    """Let the blocked tool read its pipe (if it is still waiting on it)."""
    try:
        writer = os.open(pipe, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:  # ENXIO: no reader waits any more
        return
    os.write(writer, b"go")
    os.close(writer)


def test_a_slow_tool_call_shows_a_live_running_line(cli: Cli, serve: Any, tmp_path: Path) -> None:
    server = serve([{"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]}, {"content": "3"}])
    folder = tmp_path / "a"
    release = tmp_path / "release"
    os.mkfifo(release)
    agent = write_agent(
        folder, agent_yaml(server.base_url), tools=f"RELEASE = {str(release)!r}\n" + BLOCKING_TOOLS
    )
    terminal = Terminal(cli, "run", str(agent), "-p", "1 + 2?")
    try:
        assert terminal.read_until(r"→ add") is not None, terminal.screen
        # the call runs on after the reply ended, and once it ran a second the terminal says so
        shown = terminal.read_until(r"running add [1-9]\d*\.\d s", timeout=20)
        assert shown is not None, terminal.screen
        assert "running add 0." not in terminal.screen  # nothing for a call's first second
        _release(release)
        assert terminal.read_until(r"← add \(\d+ ms\) 3") is not None, terminal.screen
    finally:
        _release(release)
        code, stdout = terminal.close()
    assert code == 0, terminal.screen
    assert stdout.strip() == "3"


INLINE_CALL = (
    '<think>I should add them.</think><tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>'
)


@pytest.mark.parametrize("mode", ["inline", "native"])
def test_thinking_ends_its_line_before_the_tool_call_off_a_terminal(
    cli: Cli, serve: Any, tmp_path: Path, mode: str
) -> None:
    # issue 23 item 21: with stderr a pipe, "I should add them.→ add {...}" ran into one line
    first: dict[str, Any] = {"content": INLINE_CALL}  # inline: thinking in the text, a <tool_call> block
    if mode == "native":
        call = [{"name": "add", "arguments": {"a": 1, "b": 2}}]
        first = {"reasoning": "I should add them.", "tool_calls": call}
    server = serve([first, {"content": "3"}])
    tools = 'def add(a: int, b: int) -> int:\n    """Add two integers."""\n    return a + b\n'
    body = agent_yaml(server.base_url) + f"function_calling: {mode}\n"
    agent = write_agent(tmp_path / "a", body, tools=tools)
    result = cli("run", str(agent), "-p", "1 + 2?")
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert "I should add them." in lines
    assert lines[lines.index("I should add them.") + 1].startswith("→ add ")


def test_an_error_before_any_model_answer_prints_no_usage_line(cli: Cli, serve: Any, tmp_path: Path) -> None:
    # issue 23 item 21: "usage: 0 prompt + 0 completion = 0 tokens" came before every such error
    server = serve([{"status": 500, "error": "the model is down"}])
    agent = write_agent(
        tmp_path / "a", agent_yaml(server.base_url), tools="def add(a: int) -> int:\n    return a\n"
    )
    result = cli("run", str(agent), "-p", "hi")
    assert result.returncode == 1
    assert "the model is down" in result.stderr
    assert "usage:" not in result.stderr


def test_a_run_that_called_the_model_still_ends_with_its_usage(cli: Cli, serve: Any, tmp_path: Path) -> None:
    server = serve([{"content": "hello", "usage": {"prompt_tokens": 7, "completion_tokens": 2}}])
    agent = write_agent(
        tmp_path / "a", agent_yaml(server.base_url), tools="def add(a: int) -> int:\n    return a\n"
    )
    result = cli("run", str(agent), "-p", "hi")
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines()[-1] == "usage: 7 prompt + 2 completion = 9 tokens"
