"""`/metrics` while runs are in progress: active sessions and runs by agent; cached prompt tokens.

Parsed with prometheus-client's own parser, as a Prometheus server reads it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from runner.testing import ScriptedServer
from tests.serve.conftest import AgentFiles, Recorder, Served, served_apps


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[..., Served]]:
    with served_apps(tmp_path / "home", Recorder()) as start:
        yield start


def _gauges(text: str, name: str) -> dict[str, float]:
    """The samples of gauge ``name`` by their ``agent`` label."""
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name == name:
            assert family.type == "gauge", family.type
            found.update({s.labels["agent"]: s.value for s in family.samples})
    return found


def _wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 20
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def test_active_sessions_and_runs_count_the_requests_in_progress_by_agent(
    tmp_path: Path, serve: Callable[..., Served]
) -> None:
    release = threading.Event()

    def held(body: dict[str, Any]) -> dict[str, Any]:
        assert release.wait(30), "the test never released the model"
        return {"content": "Done."}

    with ScriptedServer(held, repeat=True) as model, ScriptedServer([{"content": "Hi"}]) as other_model:
        files = AgentFiles(tmp_path)
        served = serve([files.write("slow", model), files.write("quick", other_model)])
        with served.http() as http:
            assert http.post("/v1/chat/completions", json=_ask("quick")).status_code == 200

        answers: list[int] = []

        def ask() -> None:
            with httpx.Client(base_url=served.url, timeout=60) as client:
                answers.append(client.post("/v1/chat/completions", json=_ask("slow")).status_code)

        callers = [threading.Thread(target=ask) for _ in range(2)]
        for caller in callers:
            caller.start()
        _wait_for(lambda: len(model.requests) == 2, "both requests to reach the model")
        with served.http() as http:
            during = http.get("/metrics").text
        release.set()
        for caller in callers:
            caller.join(30)
        scraped: list[str] = []

        def closed() -> bool:
            scraped.append(http.get("/metrics").text)
            return _gauges(scraped[-1], "runner_active_sessions") == {"slow": 0.0, "quick": 0.0}

        with served.http() as http:
            _wait_for(closed, "the sessions to close")  # a session closes just after its answer is sent
        after = scraped[-1]
    assert answers == [200, 200]
    assert _gauges(during, "runner_active_sessions") == {"slow": 2.0, "quick": 0.0}
    assert _gauges(during, "runner_active_runs") == {"slow": 2.0, "quick": 0.0}
    assert _gauges(after, "runner_active_runs") == {"slow": 0.0, "quick": 0.0}


def test_cached_prompt_tokens_are_counted_as_their_own_token_type(
    tmp_path: Path, serve: Callable[..., Served]
) -> None:
    usage = {"prompt_tokens": 50, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 32}}
    with ScriptedServer([{"content": "Hi", "usage": usage}]) as model:
        served = serve([AgentFiles(tmp_path).write("hello", model)])
        with served.http() as http:
            assert http.post("/v1/chat/completions", json=_ask("hello")).status_code == 200
            text = http.get("/metrics").text
    tokens = {
        s.labels["type"]: s.value
        for family in text_string_to_metric_families(text)
        if family.name == "runner_tokens"
        for s in family.samples
        if s.name == "runner_tokens_total" and s.labels["agent"] == "hello"
    }
    assert tokens == {"input": 50.0, "output": 5.0, "cached_input": 32.0}


def _ask(agent: str) -> dict[str, Any]:
    return {"model": agent, "messages": [{"role": "user", "content": "hi"}]}
