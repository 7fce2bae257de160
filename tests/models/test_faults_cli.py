"""Model faults end to end: the installed `runner` command against llmock and the scripted server.

What a user sees: the exit code, what stderr says (a wait announced, a cut answer called cut, a
missing key named before any request), and what the transcript keeps.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from runner.store.transcript import read_transcript
from tests.cli_run.conftest import Cli, write_agent

# the module's aimock_reset is started once: all its tests on one worker (xdist loadgroup)
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("aimock-cli")]

ANSWER = "All forty-two of them are here today"
TOOLS = '''
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
'''


@pytest.fixture
def cli(request: pytest.FixtureRequest, tmp_path: Path) -> Cli:
    """`runner` in a subprocess, on the fast path unless a test asks for litellm (``@both_paths``).

    Each litellm run pays seconds of import; tests/models/test_fault_servers.py holds litellm to the
    same faults in process (an anthropic model, or none with an ``api_base``, is on litellm anyway).
    """
    path_kind = getattr(request, "param", "fast")
    env = dict(os.environ)
    for name in (
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "OPENAI_BASE_URL",
        "RUNNER_MODEL",
        "RUNNER_DEFAULT_MODEL",
    ):
        env.pop(name, None)
    env.update(
        RUNNER_HOME=str(tmp_path / "home"),
        RUNNER_FAST_PATH="1" if path_kind == "fast" else "0",
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        NO_COLOR="1",
        TEST_API_KEY="sk-test",
    )
    return Cli(home=tmp_path / "home", cwd=tmp_path, env=env)


#: Run a test on the fast path and on litellm.
both_paths = pytest.mark.parametrize("cli", ["fast", "litellm"], indirect=True)


def agent(
    model: str, base_url: str | None, *, retries: int = 2, limits: str = "", tools: bool = False
) -> str:
    text = f"version: 1\nname: faults\nmodel:\n  id: {model}\n  retries: {retries}\n"
    if base_url:
        text += f"  api_base: {base_url}\n  api_key: ${{TEST_API_KEY}}\n"
    text += "prompts:\n  system: Answer.\n"
    if tools:
        text += "tools:\n  - python: tools_mod\n"
    if limits:
        text += f"limits:\n{limits}"
    return text


def test_retry_after_is_waited_for_and_said_on_stderr(cli: Cli, llmock: Any, tmp_path: Path) -> None:
    llmock.rate_limit(retry_after=1).reply(ANSWER)
    path = write_agent(tmp_path / "a", agent("openai/faulty", llmock.base_url()))
    result = cli("run", str(path), "-p", "How many?")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ANSWER
    assert "retrying in 1.0 s as the server asked (Retry-After) (1 of 2)" in result.stderr
    first, second = llmock.requests
    assert second.started_at - first.started_at >= 0.95


@both_paths
def test_a_stream_cut_short_exits_1_and_keeps_the_partial_text_out_of_the_history(
    cli: Cli, llmock: Any, tmp_path: Path
) -> None:
    llmock.reply(ANSWER).truncate(after_chunks=3)
    path = write_agent(tmp_path / "a", agent("openai/faulty", llmock.base_url()))
    result = cli("run", str(path), "-p", "How many?")
    assert result.returncode == 1, result.stderr
    assert "the answer stopped before its end" in result.stderr
    assert "Traceback" not in result.stderr and "Handle with" not in result.stderr
    (transcript,) = cli.transcripts()
    messages = read_transcript(transcript).messages()
    assert messages[-1] == {"role": "user", "content": "How many?"}  # no cut-short assistant message
    assert len(llmock.requests) == 1


def test_anthropic_corrupted_first_event_is_not_an_empty_success(
    cli: Cli, llmock: Any, tmp_path: Path
) -> None:
    llmock.reply(ANSWER).corrupt(after_chunks=0, provider="anthropic")
    model = "anthropic/claude-3-5-haiku-latest"
    path = write_agent(tmp_path / "a", agent(model, llmock.url + "/anthropic", retries=0))
    result = cli("run", str(path), "-p", "How many?")
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "the answer stopped before its end" in result.stderr


def test_a_connection_reset_is_told_without_an_invented_status(
    cli: Cli, aimock_reset: str, tmp_path: Path
) -> None:
    path = write_agent(tmp_path / "a", agent("openai/faulty", aimock_reset + "/v1", retries=0))
    result = cli("run", str(path), "-p", "How many?")
    assert result.returncode == 1
    assert "the connection to the server was closed before an answer arrived" in result.stderr
    for wrong in ("HTTP 500", "Handle with", "InternalServerError", " at 0x", "Traceback"):
        assert wrong not in result.stderr


def test_a_missing_api_key_exits_2_before_any_request(cli: Cli, tmp_path: Path) -> None:
    path = write_agent(tmp_path / "a", agent("openai/gpt-4o-mini", None))
    result = cli("run", str(path), "-p", "hi")
    assert result.returncode == 2, result.stderr
    assert (
        "no API key for openai/gpt-4o-mini: set OPENAI_API_KEY (or use --replay, or a local api_base)"
        in result.stderr
    )
    assert "Missing credentials" not in result.stderr and "retrying" not in result.stderr


def test_max_cost_usd_is_enforced_on_the_fast_path(cli: Cli, serve: Any, tmp_path: Path) -> None:
    big = {"prompt_tokens": 1_000_000, "completion_tokens": 10}
    server = serve(
        [
            {"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}], "usage": big},
            {"content": "3", "usage": big},
        ]
    )
    text = agent("openai/gpt-4o-mini", server.base_url, limits="  max_cost_usd: 0.0001\n", tools=True)
    path = write_agent(tmp_path / "a", text, tools=TOOLS)
    result = cli("run", str(path), "-p", "1+2?")
    assert result.returncode == 3, result.stderr
    assert "limits.max_cost_usd" in result.stderr
    assert len(server.requests) == 1  # the second step never ran


def test_an_unpriced_model_says_once_that_the_cost_limit_cannot_be_enforced(
    cli: Cli, serve: Any, tmp_path: Path
) -> None:
    server = serve([{"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]}, {"content": "3"}])
    text = agent("openai/my-local-llama", server.base_url, limits="  max_cost_usd: 0.0001\n", tools=True)
    path = write_agent(tmp_path / "a", text, tools=TOOLS)
    result = cli("run", str(path), "-p", "1+2?")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "3"
    assert result.stderr.count("unpriced: cost limit cannot be enforced") == 1


@pytest.fixture
def serve(scripted_server: Any) -> Any:
    """Scripted servers on 127.0.0.1 (the runner pytest plugin's ``scripted_server``)."""
    return scripted_server
