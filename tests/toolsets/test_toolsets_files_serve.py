"""Through ``runner serve`` (a subprocess): a long ``files_search`` does not make other clients wait.

Issue 12: while one request's regex search ran, an unrelated client of the same server waited 36 s.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.toolsets.test_toolsets_files_bounds import SLOW_PATTERN, write_random_ab

RUNNER = str(Path(sys.executable).parent / "runner")
SEARCH_LIMIT_S = 3


def _agent(name: str, base_url: str, tools: str = "") -> str:
    return textwrap.dedent(
        f"""\
        version: 1
        name: {name}
        model:
          id: openai/scripted
          api_base: {base_url}
          api_key: ${{SCRIPTED_API_KEY:-sk-test}}
          retries: 0
        """
    ) + textwrap.dedent(tools)


def _search_then_report(body: dict[str, Any]) -> dict[str, Any]:
    last = body["messages"][-1]
    if last["role"] == "user":
        arguments = {"query": SLOW_PATTERN, "regex": True, "path": "slow.txt"}
        return {"tool_calls": [{"name": "files_search", "arguments": arguments}]}
    return {"content": f"search said: {last['content']}"}


def _start_serve(folder: Path, cwd: Path) -> tuple[subprocess.Popen[str], str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNNER_SERVE")}
    env["RUNNER_HOME"] = str(cwd / "home")
    process = subprocess.Popen(
        [RUNNER, "serve", str(folder), "--port", "0", "--no-transcripts"],
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    deadline = time.monotonic() + 30
    line = ""
    while "serving" not in line:
        assert time.monotonic() < deadline and process.poll() is None, "runner serve did not start"
        line = process.stderr.readline()
    match = re.search(r"at (http://127\.0\.0\.1:\d+)/v1", line)
    assert match, line
    return process, match.group(1)


def _wait_until(condition: Callable[[], bool], within_s: float, what: str) -> None:
    deadline = time.monotonic() + within_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


@pytest.mark.slow
def test_an_unrelated_request_answers_while_a_regex_search_runs(
    scripted_server: Callable[..., Any], tmp_path: Path
) -> None:
    searcher_model = scripted_server(_search_then_report)
    echo_model = scripted_server([{"content": "pong"}])
    agents = tmp_path / "agents"
    agents.mkdir()
    tools = f"""\
        tools:
          - builtin: files
            with: {{root: ../ws, search_timeout_s: {SEARCH_LIMIT_S}}}
        """
    (agents / "searcher.yaml").write_text(_agent("searcher", searcher_model.base_url, tools))
    (agents / "echo.yaml").write_text(_agent("echo", echo_model.base_url))
    (tmp_path / "ws").mkdir()
    write_random_ab(tmp_path / "ws" / "slow.txt", 4 << 20)  # ~40 s of RE2 work: the limit ends it
    process, url = _start_serve(agents, tmp_path)
    searched: dict[str, Any] = {}
    try:
        with httpx.Client(base_url=url, timeout=60) as client:

            def search() -> None:
                messages = [{"role": "user", "content": "find it"}]
                reply = client.post("/v1/chat/completions", json={"model": "searcher", "messages": messages})
                searched["reply"] = reply.json()

            searching = threading.Thread(target=search)
            searching.start()
            _wait_until(lambda: len(searcher_model.requests) == 1, 30, "the searcher's first model request")
            pong = client.post(
                "/v1/chat/completions",
                json={"model": "echo", "messages": [{"role": "user", "content": "ping"}]},
            )
            answered = time.monotonic()
            health = client.get("/health")
            search_running = len(searcher_model.requests) == 1  # its tool result has not come back yet
            searching.join(timeout=60)
            finished = time.monotonic()
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    assert pong.status_code == 200 and pong.json()["choices"][0]["message"]["content"] == "pong"
    assert health.status_code == 200
    # answered while the search still ran (an order of events, not a bound): the search blocked nothing
    assert search_running, "the search ended before the other client was answered: nothing was shown"
    assert finished - answered > 0.5  # the search went on after the other client had its answer
    content = searched["reply"]["choices"][0]["message"]["content"]
    assert (
        f"files_search stopped after {SEARCH_LIMIT_S} s (the files toolset's search_timeout_s limit)"
        in content
    )
