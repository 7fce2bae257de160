"""Failures that retrying cannot fix say so: ``x-should-retry: false`` (issue 23, item 14).

The openai SDK retries every 5xx twice by default, so a served workflow that fails on a bad step
ran three times for one SDK call, at three times the cost. The SDK honours ``x-should-retry``:
these tests use its default ``max_retries`` against the app on uvicorn (127.0.0.1) and count the
runs. A failure that may pass later (the model overloaded, 429, a timeout) stays retryable.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import openai
import pytest

from runner.testing import ScriptedServer
from tests.workflow.helpers import events

TEAM = """version: 1
agents:
  first:
    model: {{id: openai/first, api_base: '{base}', retries: 0}}
  broken:
    model: {{id: openai/broken, api_base: '{base}', retries: 0}}
workflow:
  name: fragile
  steps:
    - {{id: warmup, agent: first}}
    - {{id: crash, agent: broken}}
"""


def sdk(served: Any) -> openai.OpenAI:
    """The openai SDK with its default retries (two), through the checking transport."""
    client = openai.OpenAI(base_url=served.base_url, api_key="sk-none", http_client=served.http())
    assert client.max_retries == 2
    return client


def workflow_runs(home: Path) -> list[dict[str, Any]]:
    """The ``workflow_end`` of every workflow transcript: one per run."""
    return [e for p in (home / "sessions").glob("*.jsonl") for e in events(p, "workflow_end")]


class Counting:
    """A scripted answer per model id, counting the requests of each."""

    def __init__(self, answers: dict[str, Callable[[int], dict[str, Any]]]) -> None:
        self.answers = answers
        self.calls: dict[str, int] = {}
        self.lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        model = str(body["model"])
        with self.lock:
            self.calls[model] = count = self.calls.get(model, 0) + 1
        return self.answers[model](count)


def test_a_failing_served_workflow_runs_once_for_one_sdk_call(
    scripted: Callable[..., ScriptedServer], agent_files: Any, serve_app: Callable[..., Any], home: Path
) -> None:
    script = Counting(
        {
            "first": lambda n: {"content": "warm"},
            "broken": lambda n: {"status": 400, "error": "this request is malformed"},
        }
    )
    server = scripted(script)
    (agent_files.root / "team.yaml").write_text(TEAM.format(base=server.base_url), encoding="utf-8")
    served = serve_app([agent_files.root])
    with pytest.raises(openai.APIStatusError) as failed:
        sdk(served).chat.completions.create(model="fragile", messages=[{"role": "user", "content": "go"}])
    assert failed.value.status_code == 502
    assert failed.value.response.headers.get("x-should-retry") == "false"
    assert script.calls == {"first": 1, "broken": 1}
    assert len(workflow_runs(home)) == 1


def test_a_workflow_stopped_at_its_limit_is_not_retried(
    scripted: Callable[..., ScriptedServer], agent_files: Any, serve_app: Callable[..., Any], home: Path
) -> None:
    script = Counting({"first": lambda n: {"content": "warm"}, "broken": lambda n: {"content": "x"}})
    server = scripted(script)
    text = TEAM.format(base=server.base_url).replace(
        "  name: fragile\n", "  name: fragile\n  limits: {max_steps: 1}\n"
    )
    (agent_files.root / "team.yaml").write_text(text, encoding="utf-8")
    served = serve_app([agent_files.root])
    with pytest.raises(openai.APIStatusError) as stopped:
        sdk(served).chat.completions.create(model="fragile", messages=[{"role": "user", "content": "go"}])
    assert stopped.value.status_code == 502 and isinstance(stopped.value.body, dict)
    assert stopped.value.body["code"] == "workflow_limit"
    assert stopped.value.response.headers.get("x-should-retry") == "false"
    assert script.calls == {"first": 1} and len(workflow_runs(home)) == 1


def test_a_workflow_whose_model_was_overloaded_stays_retryable(
    scripted: Callable[..., ScriptedServer], agent_files: Any, serve_app: Callable[..., Any], home: Path
) -> None:
    script = Counting(
        {
            "first": lambda n: {"content": "warm"},
            "broken": lambda n: {"status": 503, "error": "overloaded"} if n == 1 else {"content": "fine"},
        }
    )
    server = scripted(script)
    (agent_files.root / "team.yaml").write_text(TEAM.format(base=server.base_url), encoding="utf-8")
    served = serve_app([agent_files.root])
    answer = sdk(served).chat.completions.create(
        model="fragile", messages=[{"role": "user", "content": "go"}]
    )
    assert answer.choices[0].message.content == "fine"
    assert script.calls == {"first": 2, "broken": 2}  # the SDK ran it again, as it should
    assert sorted(e["exit_code"] for e in workflow_runs(home)) == [0, 1]  # it failed, then passed


@pytest.fixture
def agent(scripted: Callable[..., ScriptedServer], agent_files: Any, serve_app: Callable[..., Any]) -> Any:
    def start(answer: Callable[[int], dict[str, Any]]) -> tuple[Any, Counting, list[str]]:
        script = Counting({"scripted": answer})
        agent_files.write("helper", scripted(script))
        lines: list[str] = []
        return serve_app([agent_files.root], report=lines.append), script, lines

    return start


def test_an_agent_whose_model_refuses_the_request_is_asked_once(agent: Any) -> None:
    served, script, _ = agent(lambda n: {"status": 400, "error": "invalid model parameters"})
    with pytest.raises(openai.APIStatusError) as failed:
        sdk(served).chat.completions.create(model="helper", messages=[{"role": "user", "content": "hi"}])
    assert failed.value.status_code == 502
    assert failed.value.response.headers.get("x-should-retry") == "false"
    assert script.calls == {"scripted": 1}


def test_an_agent_whose_model_is_rate_limited_stays_retryable(agent: Any) -> None:
    served, script, _ = agent(
        lambda n: {"status": 429, "error": "slow down"} if n == 1 else {"content": "ok"}
    )
    answer = sdk(served).chat.completions.create(model="helper", messages=[{"role": "user", "content": "hi"}])
    assert answer.choices[0].message.content == "ok"
    assert script.calls == {"scripted": 2}


def test_the_access_line_cuts_a_long_error_at_a_word(agent: Any) -> None:
    words = " ".join(f"word{n:03d}" for n in range(60))
    served, _, lines = agent(lambda n: {"status": 400, "error": words})
    with pytest.raises(openai.APIStatusError):
        sdk(served).chat.completions.create(model="helper", messages=[{"role": "user", "content": "hi"}])
    (line,) = [line for line in lines if line.startswith("request: helper 502 ")]
    shown = re.search(r"\((.*)\.\.\.\)", line)
    assert shown is not None, line
    kept = shown.group(1).rstrip()
    assert kept.endswith(tuple(words.split())), line  # the last word shown is whole
    assert json.dumps(line)  # one line
    assert "\n" not in line


@pytest.mark.slow
def test_runner_serve_runs_a_failing_workflow_once_for_the_openai_sdk(
    scripted: Callable[..., ScriptedServer], agent_files: Any, tmp_path: Path
) -> None:
    """The installed ``runner serve`` command, the SDK with its default retries: one run."""
    import os
    import signal
    import subprocess
    import sys
    import time

    script = Counting(
        {
            "first": lambda n: {"content": "warm"},
            "broken": lambda n: {"status": 400, "error": "this request is malformed " * 10},
        }
    )
    server = scripted(script)
    (agent_files.root / "team.yaml").write_text(TEAM.format(base=server.base_url), encoding="utf-8")
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RUNNER_", "OPENAI_"))}
    env.update(RUNNER_HOME=str(home), RUNNER_FAST_PATH="1", NO_COLOR="1")
    command = [str(Path(sys.executable).parent / "runner"), "serve", str(agent_files.root), "--port", "0"]
    process = subprocess.Popen(
        command, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert process.stderr is not None
        deadline = time.monotonic() + 30
        lines: list[str] = []
        while not lines or not lines[-1].startswith("serving workflow"):
            assert time.monotonic() < deadline and process.poll() is None, (
                f"runner serve did not start: {lines}"
            )
            lines.append(process.stderr.readline())
        match = re.search(r"at (http://127\.0\.0\.1:\d+/v1):", "".join(lines))
        assert match, lines
        client = openai.OpenAI(base_url=match.group(1), api_key="none")
        assert client.max_retries == 2
        with pytest.raises(openai.APIStatusError) as failed:
            client.chat.completions.create(model="fragile", messages=[{"role": "user", "content": "go"}])
        assert failed.value.status_code == 502
        process.send_signal(signal.SIGINT)
        process.wait(timeout=15)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert script.calls == {"first": 1, "broken": 1}
    assert len(workflow_runs(home)) == 1
    rest = process.stderr.read() if process.stderr else ""
    (access,) = [line for line in rest.splitlines() if line.startswith("request: fragile 502 ")]
    cut = re.search(r" (\w+)\.\.\.\) workflow session ", access)
    assert cut is not None and cut.group(1) in {"this", "request", "is", "malformed"}, access  # a whole word
