"""A tool or hook that misbehaves (KeyboardInterrupt, sys.exit, a swallowed CancelledError) cannot hang
or kill a run: its call ends at its timeout, is answered, and the run goes on (issue 12)."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tests.cli_run.conftest import Cli, write_agent

ROGUE_TOOLS = '''
import asyncio
import os
import sys


def sync_interrupt() -> str:
    """Raises KeyboardInterrupt from a worker thread."""
    raise KeyboardInterrupt


async def async_interrupt() -> str:
    """Raises KeyboardInterrupt on the event loop."""
    raise KeyboardInterrupt


async def async_exit() -> str:
    """Calls sys.exit on the event loop."""
    sys.exit(3)


def sync_exit() -> str:
    """Calls sys.exit in a worker thread."""
    sys.exit(3)


async def stubborn() -> str:
    """Swallows every cancellation and never ends."""
    if os.environ.get("TOOL_STARTED"):
        open(os.environ["TOOL_STARTED"], "w").close()
    while True:
        try:
            await asyncio.sleep(0.05)
        except asyncio.CancelledError:
            pass
'''

ROGUE_HOOKS = """
import asyncio
import os
import sys
import time


def sync_exit(event):
    sys.exit(1)


async def async_exit(event):
    sys.exit(1)


async def async_interrupt(event):
    raise KeyboardInterrupt


async def stubborn(event):
    while True:
        try:
            await asyncio.sleep(0.05)
        except asyncio.CancelledError:
            pass


def slow_post(event):
    open(os.environ["HOOK_STARTED"], "w").close()
    time.sleep(30)
    return {"messages": ["queued after the hook"]}
"""


def _agent(tmp_path: Path, base_url: str, extra: str) -> Path:
    body = (
        f"version: 1\nname: t\nmodel:\n  id: openai/scripted\n  api_base: {base_url}\n  retries: 0\n"
        "prompts:\n  system: You answer.\n" + extra
    )
    folder = tmp_path / "a"
    path = write_agent(folder, body, tools=ROGUE_TOOLS)
    (folder / "hooks_mod.py").write_text(ROGUE_HOOKS, encoding="utf-8")
    return path


def _tool_result(server: Any) -> str:
    """What the model was told about the call (the last message of the second request)."""
    message = server.requests[1]["messages"][-1]
    assert message["role"] == "tool"
    return str(message["content"])


@pytest.mark.parametrize("tool", ["sync_interrupt", "async_interrupt", "sync_exit", "async_exit"])
def test_a_tool_that_raises_keyboard_interrupt_or_exits_is_an_error_result_and_the_run_goes_on(
    cli: Cli, serve: Any, tmp_path: Path, tool: str
) -> None:
    server = serve([{"tool_calls": [{"name": tool, "arguments": {}}]}, {"content": "went on"}])
    agent = _agent(tmp_path, server.base_url, "tools:\n  - python: tools_mod\n")
    result = cli("run", str(agent), "-p", "go", timeout=30)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "went on"
    assert "Traceback" not in result.stderr
    content = _tool_result(server)
    name = "KeyboardInterrupt" if "interrupt" in tool else "SystemExit"
    assert name in content


def test_an_async_tool_that_swallows_cancellation_ends_at_its_timeout_and_the_run_goes_on(
    cli: Cli, serve: Any, tmp_path: Path
) -> None:
    server = serve([{"tool_calls": [{"name": "stubborn", "arguments": {}}]}, {"content": "went on"}])
    agent = _agent(tmp_path, server.base_url, "tools:\n  - python: tools_mod\n    timeout_s: 1\n")
    started = time.monotonic()
    result = cli("run", str(agent), "-p", "go", timeout=40)
    elapsed = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "went on"
    content = _tool_result(server)
    assert "timed out after 1 s" in content
    assert elapsed < 20  # 1 s timeout, a short grace, process start; unbounded before


def test_a_session_timeout_ends_a_run_whose_tool_swallows_cancellation(
    cli: Cli, serve: Any, tmp_path: Path
) -> None:
    server = serve([{"tool_calls": [{"name": "stubborn", "arguments": {}}]}, {"content": "never"}])
    extra = "tools:\n  - python: tools_mod\nlimits:\n  timeout_s: 1\n"
    agent = _agent(tmp_path, server.base_url, extra)
    result = cli("run", str(agent), "-p", "go", timeout=40)
    assert result.returncode == 3, result.stderr
    assert "timeout_s" in result.stderr


@pytest.mark.parametrize("hook", ["sync_exit", "async_exit", "async_interrupt"])
def test_a_python_hook_that_exits_or_raises_keyboard_interrupt_is_reported_and_the_run_goes_on(
    cli: Cli, serve: Any, tmp_path: Path, hook: str
) -> None:
    server = serve([{"content": "answer"}])
    agent = _agent(tmp_path, server.base_url, f"hooks:\n  turn_pre:\n    - python: hooks_mod:{hook}\n")
    result = cli("run", str(agent), "-p", "go", timeout=30)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "answer"
    assert f"hooks_mod:{hook}" in result.stderr
    assert "Traceback" not in result.stderr


def test_an_async_hook_that_swallows_cancellation_ends_at_its_timeout(
    cli: Cli, serve: Any, tmp_path: Path
) -> None:
    server = serve([{"content": "answer"}])
    extra = "hooks:\n  turn_pre:\n    - python: hooks_mod:stubborn\n      timeout_s: 1\n"
    agent = _agent(tmp_path, server.base_url, extra)
    result = cli("run", str(agent), "-p", "go", timeout=40)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "answer"
    assert "timed out after 1 s" in result.stderr


def _wait_for(path: Path, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def test_ctrl_c_during_a_stubborn_tool_ends_the_run_with_130(cli: Cli, serve: Any, tmp_path: Path) -> None:
    server = serve([{"tool_calls": [{"name": "stubborn", "arguments": {}}]}, {"content": "never"}])
    agent = _agent(tmp_path, server.base_url, "tools:\n  - python: tools_mod\n")
    started = tmp_path / "tool-started"
    proc = cli.popen("run", str(agent), "-p", "go", extra_env={"TOOL_STARTED": str(started)})
    _wait_for(started)  # the tool is running now
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 130, err


def test_ctrl_c_during_a_turn_post_hook_ends_the_run_with_130(cli: Cli, serve: Any, tmp_path: Path) -> None:
    server = serve([{"content": "first"}, {"content": "second"}])
    extra = "hooks:\n  turn_post:\n    - python: hooks_mod:slow_post\n"
    agent = _agent(tmp_path, server.base_url, extra)
    started = tmp_path / "hook-started"
    proc = cli.popen("run", str(agent), "-p", "go", extra_env={"HOOK_STARTED": str(started)})
    _wait_for(started)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 130, err
    assert "second" not in out
    assert len(server.requests) == 1


SURROGATE_TOOLS = '''
def broken() -> str:
    """Returns text with a lone surrogate."""
    return "half \\udcff of it"
'''


@pytest.mark.parametrize("json_output", [False, True])
def test_lone_surrogates_from_the_model_and_a_tool_do_not_crash_the_run(
    cli: Cli, serve: Any, tmp_path: Path, json_output: bool
) -> None:
    server = serve(
        [
            {"content": "look \udcff", "tool_calls": [{"name": "broken", "arguments": {"x": "\ud800"}}]},
            {"content": "done \udcff here", "reasoning": "think \udfff"},
        ]
    )
    folder = tmp_path / "a"
    body = (
        f"version: 1\nname: t\nmodel:\n  id: openai/scripted\n  api_base: {server.base_url}\n  retries: 0\n"
        "prompts:\n  system: You answer.\ntools:\n  - python: tools_mod\n"
    )
    agent = write_agent(folder, body, tools=SURROGATE_TOOLS)
    # "\udcff" in an argument reaches the command as the byte 0xff: not UTF-8
    result = cli("run", str(agent), "-p", "go \udcff", *(["--json"] if json_output else []), timeout=30)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr and "UnicodeEncodeError" not in result.stderr
    assert "done" in result.stdout and "here" in result.stdout
    sent = server.requests[1]["messages"]
    assert sent[1] == {"role": "user", "content": "go \ufffd"}
    assert "half" in sent[-1]["content"] and "of it" in sent[-1]["content"]
    (transcript,) = cli.transcripts()
    transcript.read_text(encoding="utf-8")  # valid UTF-8 throughout
    assert cli("sessions", "show", transcript.stem).returncode == 0


SECRET = "sk-test-Zq81xYv3kLmN0pQr"

SECRET_TOOLS = '''
import os


def leak() -> str:
    """Returns the secret it was given."""
    return "the key is " + os.environ["LEAKED"]


def fail() -> str:
    """Fails with the secret in its message."""
    raise RuntimeError("bad key " + os.environ["LEAKED"])
'''

SECRET_HOOKS = """
import os


def noisy(event):
    raise ValueError("hook saw " + os.environ["LEAKED"])
"""


def _secret_agent(tmp_path: Path, base_url: str) -> Path:
    folder = tmp_path / "a"
    body = (
        f"version: 1\nname: t\nmodel:\n  id: openai/scripted\n  api_base: {base_url}\n  retries: 0\n"
        "prompts:\n  system: 'Use the key ${SERVICE_TOKEN}.'\ntools:\n  - python: tools_mod\n"
        "hooks:\n  turn_pre:\n    - python: hooks_mod:noisy\n"
    )
    path = write_agent(folder, body, tools=SECRET_TOOLS)
    (folder / "hooks_mod.py").write_text(SECRET_HOOKS, encoding="utf-8")
    return path


@pytest.mark.parametrize("json_output", [False, True])
def test_secrets_are_redacted_on_stderr_and_stdout_too(
    cli: Cli, serve: Any, tmp_path: Path, json_output: bool
) -> None:
    server = serve(
        [
            {
                "reasoning": f"I will print {SECRET} now",
                "tool_calls": [{"name": "leak", "arguments": {}}, {"name": "fail", "arguments": {}}],
            },
            {"content": f"Your key: {SECRET}. Also {SECRET[:6]}, not all of it."},
        ]
    )
    agent = _secret_agent(tmp_path, server.base_url)
    env = {"SERVICE_TOKEN": SECRET, "LEAKED": SECRET}
    result = cli("run", str(agent), "-p", "go", *(["--json"] if json_output else []), extra_env=env)
    assert result.returncode == 0, result.stderr
    assert SECRET not in result.stdout and SECRET not in result.stderr
    assert SECRET[6:14] not in result.stdout + result.stderr  # not even split across streamed pieces
    assert "***" in result.stdout and ("***" in result.stderr or json_output)
    assert f"Also {SECRET[:6]}, not all of it." in result.stdout  # a mere prefix is written at the end
    assert "hook saw ***" in (result.stdout if json_output else result.stderr)
    # what is sent is never redacted: the model got the real key in the system prompt and results
    first, second = server.requests
    assert SECRET in first["messages"][0]["content"]
    assert any(SECRET in str(m.get("content")) for m in second["messages"] if m["role"] == "tool")


def test_after_resume_the_model_gets_the_real_secret_of_the_system_prompt(
    cli: Cli, serve: Any, tmp_path: Path
) -> None:
    server = serve([{"content": "one"}, {"content": "two"}])
    folder = tmp_path / "a"
    body = (
        f"version: 1\nname: t\nmodel:\n  id: openai/scripted\n  api_base: {server.base_url}\n  retries: 0\n"
        "prompts:\n  system: 'Use the key ${SERVICE_TOKEN}.'\n"
    )
    agent = write_agent(folder, body)
    env = {"SERVICE_TOKEN": SECRET}
    assert cli("run", str(agent), "-p", "first", extra_env=env).returncode == 0
    (transcript,) = cli.transcripts()
    assert SECRET not in transcript.read_text()
    resumed = cli("resume", transcript.stem, "-p", "second", extra_env=env)
    assert resumed.returncode == 0, resumed.stderr
    system = server.requests[1]["messages"][0]
    assert system["role"] == "system" and SECRET in system["content"]


PRINTING_TOOLS = '''
import asyncio


def chatty() -> str:
    """Prints while it works."""
    print("debug: sync tool working")
    return "result"


async def chatty_async() -> str:
    """Prints while it works, on the event loop."""
    print("debug: async tool working")
    await asyncio.sleep(0)
    return "result"
'''

PRINTING_HOOKS = """
def noisy(event):
    print("debug: hook ran")
"""


@pytest.mark.parametrize("json_output", [False, True])
def test_what_tools_and_hooks_print_goes_to_stderr_and_stdout_stays_clean(
    cli: Cli, serve: Any, tmp_path: Path, json_output: bool
) -> None:
    calls = [{"name": "chatty", "arguments": {}}, {"name": "chatty_async", "arguments": {}}]
    server = serve([{"tool_calls": calls}, {"content": "the answer"}])
    folder = tmp_path / "a"
    body = (
        f"version: 1\nname: t\nmodel:\n  id: openai/scripted\n  api_base: {server.base_url}\n  retries: 0\n"
        "prompts:\n  system: You answer.\ntools:\n  - python: tools_mod\n"
        "hooks:\n  turn_pre:\n    - python: hooks_mod:noisy\n"
    )
    agent = write_agent(folder, body, tools=PRINTING_TOOLS)
    (folder / "hooks_mod.py").write_text(PRINTING_HOOKS, encoding="utf-8")
    result = cli("run", str(agent), "-p", "go", *(["--json"] if json_output else []))
    assert result.returncode == 0, result.stderr
    assert "debug:" not in result.stdout
    for line in ("debug: sync tool working", "debug: async tool working", "debug: hook ran"):
        assert line in result.stderr
    if json_output:
        import json

        assert all(json.loads(line) for line in result.stdout.splitlines())
    else:
        assert result.stdout.strip() == "the answer"


@pytest.mark.parametrize("json_output", [False, True])
def test_a_model_error_body_holding_a_secret_is_redacted(
    cli: Cli, serve: Any, tmp_path: Path, json_output: bool
) -> None:
    server = serve([{"status": 400, "error": f"invalid key {SECRET} for this model"}], repeat=True)
    body = (
        f"version: 1\nname: t\nmodel:\n  id: openai/scripted\n  api_base: {server.base_url}\n"
        "  api_key: ${SERVICE_TOKEN}\n  retries: 0\nprompts:\n  system: You answer.\n"
    )
    agent = write_agent(tmp_path / "a", body)
    args = ["run", str(agent), "-p", "go", *(["--json"] if json_output else [])]
    result = cli(*args, extra_env={"SERVICE_TOKEN": SECRET})
    assert result.returncode == 1
    assert SECRET not in result.stdout + result.stderr
    assert "invalid key ***" in (result.stdout if json_output else result.stderr)
