"""The Codex CLI (npm ``@openai/codex``) against ``runner serve``: a custom model provider with
``wire_api = "responses"``, its default tools offered (``web_search`` among them), a temporary
``CODEX_HOME`` and ``HOME`` so nothing of the user's is read or written."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

CODEX = Path(__file__).resolve().parents[1] / "peers" / "node_modules" / ".bin" / "codex"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CODEX.exists(), reason="npm @openai/codex is not installed (tests/peers)"),
]


def codex(served: Any, tmp_path: Path, prompt: str) -> subprocess.CompletedProcess[str]:
    """``codex exec PROMPT`` with a provider at ``served``, in a read-only sandbox."""
    home = tmp_path / "codex-home"
    (home / ".codex").mkdir(parents=True, exist_ok=True)
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "CODEX_HOME": str(home / ".codex"),
        "RUNNER_KEY": "sk-none",
    }
    provider = {
        "name": '"runner"',
        "base_url": f'"{served.base_url}"',
        "wire_api": '"responses"',
        "env_key": '"RUNNER_KEY"',
    }
    overrides = [f"model_providers.runner.{key}={value}" for key, value in provider.items()]
    overrides += ['model_provider="runner"', 'model="helper"']
    command = [str(CODEX), "exec", "--skip-git-repo-check", "-s", "read-only"]
    for override in overrides:
        command += ["-c", override]
    return subprocess.run(
        [*command, prompt],
        env=env,
        cwd=work,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def test_codex_exec_answers_with_the_agents_answer(
    scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any], tmp_path: Path
) -> None:
    server = scripted([{"content": "The answer is 42."}], repeat=True)
    agent_files.write("helper", server, "prompts:\n  system: You answer.")
    lines: list[str] = []
    served = serve_app([agent_files.root], report=lines.append)
    done = codex(served, tmp_path, "What is the answer?")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "The answer is 42."
    offered = {tool["function"]["name"] for tool in server.requests[0]["tools"]}
    assert "exec_command" in offered, "Codex's function tools reach the agent's model as client tools"
    assert any("web_search" in line for line in lines), "its web_search was left out with a warning"


def shell_then_answer(body: dict[str, Any]) -> dict[str, Any]:
    """Ask the client to run a command; then answer with what it printed."""
    results = [m for m in body["messages"] if m["role"] == "tool"]
    if not results:
        return {
            "tool_calls": [
                {"id": "call_shell", "name": "exec_command", "arguments": {"cmd": "echo shell-said-$((6*7))"}}
            ]
        }
    return {
        "content": "Shell output: "
        + ("shell-said-42" if "shell-said-42" in results[-1]["content"] else "missing")
    }


def test_codex_runs_its_shell_as_a_client_tool(
    scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any], tmp_path: Path
) -> None:
    server = scripted(shell_then_answer)
    agent_files.write("helper", server)
    served = serve_app([agent_files.root])
    done = codex(served, tmp_path, "Run the command.")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "Shell output: shell-said-42"
    second = server.requests[-1]["messages"]
    calls = [call for m in second if m["role"] == "assistant" for call in m.get("tool_calls") or ()]
    assert [c["function"]["name"] for c in calls] == ["exec_command"], "Codex resent the call"
    result = next(m for m in second if m["role"] == "tool")
    assert result["tool_call_id"] == "call_shell" and "shell-said-42" in result["content"]


ADD_TOOLS = '''
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
'''


def own_step_then_shell(body: dict[str, Any]) -> dict[str, Any]:
    """The agent's own add and Codex's shell in one step; then an answer saying what came back."""
    results = {m["tool_call_id"]: m["content"] for m in body["messages"] if m["role"] == "tool"}
    if "call_shell" not in results:
        return {
            "tool_calls": [
                {"id": "call_add", "name": "add", "arguments": {"a": 40, "b": 2}},
                {"id": "call_shell", "name": "exec_command", "arguments": {"cmd": "echo shell-ran"}},
            ]
        }
    shell = "shell-ran" if "shell-ran" in results["call_shell"] else "missing"
    return {"content": f"add said {results.get('call_add', 'nothing')}, the shell said {shell}"}


def test_codex_keeps_the_agents_own_tool_step_through_its_history(
    scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any], tmp_path: Path
) -> None:
    # One response holds the agent's own call (an ``mcp_call``) beside Codex's shell call. Codex
    # runs only its shell. It sends ``store: false`` and resends its history without the
    # ``mcp_call`` (it keeps only item types it knows), but with the reasoning items, asking for
    # their ``encrypted_content``: the step rides in one, so the model's next request holds it.
    server = scripted(own_step_then_shell)
    agent_files.write("helper", server, tools=ADD_TOOLS)
    served = serve_app([agent_files.root])
    done = codex(served, tmp_path, "Add and run.")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "add said 42, the shell said shell-ran"
    assert len(server.requests) == 2, "one step with both calls, then the answer"
    second = server.requests[-1]["messages"]
    calls = [
        c["function"]["name"] for m in second if m["role"] == "assistant" for c in m.get("tool_calls") or ()
    ]
    assert sorted(calls) == ["add", "exec_command"], "the agent's step came back once, beside Codex's call"
    results = {m["tool_call_id"]: m["content"] for m in second if m["role"] == "tool"}
    assert results["call_add"] == "42" and "shell-ran" in results["call_shell"]
