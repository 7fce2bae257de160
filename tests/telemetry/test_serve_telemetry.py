"""`runner serve` seen from outside: `/metrics` parsed as Prometheus does, trace context in and out."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from runner.testing import ScriptedServer
from tests.serve.conftest import AgentFiles, Recorder, Served, served_apps
from tests.serve.watch_common import wait_for
from tests.telemetry.helpers import Traces

TOOLS = '''
def lookup(city: str, token: str = "") -> str:
    """Weather of a city."""
    return f"sunny in {city}"
'''
SECRET = "sk-live-abcdef0123456789"


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[..., Served]]:
    with served_apps(tmp_path / "home", Recorder()) as start:
        yield start


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def _value(samples: dict[Any, float], name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_metrics_count_requests_tokens_and_tools_without_secrets(
    tmp_path: Path, serve: Callable[..., Served], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WEATHER_TOKEN", SECRET)
    script = [
        {"tool_calls": [{"name": "lookup", "arguments": f'{{"city": "Paris", "token": "{SECRET}"}}'}]},
        {"content": "Sunny.", "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14}},
        {"content": "Again sunny.", "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}},
    ]
    with ScriptedServer(script) as model:
        agent = AgentFiles(tmp_path).write("weather", model, tools=TOOLS)
        served = serve([agent])
        client = served.openai()
        first = client.chat.completions.create(
            model="weather", messages=[{"role": "user", "content": "Paris?"}]
        )
        assert "Sunny." in (first.choices[0].message.content or "")
        stream = client.chat.completions.create(
            model="weather", messages=[{"role": "user", "content": "Again?"}], stream=True
        )
        assert "Again sunny." in "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        chat = "/v1/chat/completions"
        scrapes: list[Any] = []

        def both_counted() -> bool:  # a stream is counted once its last byte is out: just after the
            scrapes.append(http.get("/metrics"))  # client has read it, so a scrape may come first
            counted = _samples(scrapes[-1].text)
            return (
                _value(counted, "runner_http_requests_total", endpoint=chat, agent="weather", status="200")
                == 2
            )

        with served.http() as http:
            wait_for(both_counted, what="both chat requests in /metrics")
    response = scrapes[-1]
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")

    assert SECRET not in response.text
    samples = _samples(response.text)
    assert _value(samples, "runner_http_requests_total", endpoint=chat, agent="weather", status="200") == 2
    assert _value(samples, "runner_http_request_duration_seconds_count", endpoint=chat) == 2
    assert _value(samples, "runner_http_first_byte_seconds_count", endpoint=chat) == 2
    model_id = "openai/scripted"
    assert _value(samples, "runner_tokens_total", agent="weather", model=model_id, type="input") >= 16
    assert _value(samples, "runner_tokens_total", agent="weather", model=model_id, type="output") >= 5
    assert _value(samples, "runner_tool_calls_total", agent="weather", tool="lookup", outcome="ok") == 1
    assert _value(samples, "runner_model_calls_total", agent="weather", model=model_id, outcome="ok") == 3
    assert _value(samples, "runner_active_runs", agent="weather") == 0
    assert _value(samples, "runner_http_requests_in_flight") == 1  # the scrape itself


def test_metrics_are_behind_the_api_key_and_per_app(tmp_path: Path, serve: Callable[..., Served]) -> None:
    with ScriptedServer([{"content": "Hi"}]) as model:
        agent = AgentFiles(tmp_path).write("hello", model)
        keyed = serve([agent], api_keys=["k-123456789"])
        other = serve([agent])
        with keyed.http() as http:
            assert http.get("/metrics").status_code == 401
            assert http.get("/metrics", headers={"authorization": "Bearer wrong"}).status_code == 401
            answer = http.post(
                "/v1/chat/completions",
                json={"model": "hello", "messages": [{"role": "user", "content": "hi"}]},
                headers={"authorization": "Bearer k-123456789"},
            )
            assert answer.status_code == 200
            scraped = http.get("/metrics", headers={"authorization": "Bearer k-123456789"})
        with other.http() as http:
            unrelated = _samples(http.get("/metrics").text)
    assert scraped.status_code == 200
    samples = _samples(scraped.text)
    chat = "/v1/chat/completions"
    assert _value(samples, "runner_http_requests_total", endpoint=chat, agent="hello", status="200") == 1
    assert _value(samples, "runner_http_requests_total", endpoint="/metrics", agent="none", status="401") == 2
    assert _value(unrelated, "runner_http_requests_total", endpoint=chat, agent="hello", status="200") == 0


TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"


@pytest.mark.parametrize(
    ("endpoint", "body"),
    [
        ("/v1/chat/completions", {"model": "hello", "messages": [{"role": "user", "content": "hi"}]}),
        ("/v1/responses", {"model": "hello", "input": "hi"}),
    ],
)
def test_an_incoming_traceparent_parents_the_run_and_reaches_the_model_server(
    tmp_path: Path, serve: Callable[..., Served], traces: Traces, endpoint: str, body: dict[str, Any]
) -> None:
    with ScriptedServer([{"content": "Hi"}]) as model:
        agent = AgentFiles(tmp_path).write("hello", model)
        served = serve([agent])
        with served.http() as http:
            answer = http.post(endpoint, json=body, headers={"traceparent": f"00-{TRACE}-{PARENT}-01"})
        assert answer.status_code == 200
        outgoing = model.headers[0].get("traceparent", "")
    agent_span = traces.one("invoke_agent hello")
    chat = traces.one("chat openai/scripted")
    assert f"{agent_span.context.trace_id:032x}" == TRACE
    assert agent_span.parent is not None and f"{agent_span.parent.span_id:016x}" == PARENT
    assert outgoing == f"00-{TRACE}-{chat.context.span_id:016x}-01"


@pytest.mark.parametrize(
    "header", ["garbage", f"00-{'0' * 32}-{PARENT}-01", f"00-{TRACE}-xyz-01", "00-" + "f" * 600]
)
def test_a_malformed_traceparent_is_ignored_and_starts_a_new_trace(
    tmp_path: Path, serve: Callable[..., Served], traces: Traces, header: str
) -> None:
    with ScriptedServer([{"content": "Hi"}]) as model:
        agent = AgentFiles(tmp_path).write("hello", model)
        served = serve([agent])
        with served.http() as http:
            answer = http.post(
                "/v1/chat/completions",
                json={"model": "hello", "messages": [{"role": "user", "content": "hi"}]},
                headers={"traceparent": header},
            )
    assert answer.status_code == 200
    agent_span = traces.one("invoke_agent hello")
    assert agent_span.parent is None  # a root span: a trace of its own
    assert f"{agent_span.context.trace_id:032x}" != TRACE


def test_a_rate_limited_model_call_is_counted_as_a_retry_and_a_wait(
    tmp_path: Path, serve: Callable[..., Served]
) -> None:
    script = [
        {"status": 429, "error": "slow down", "headers": {"Retry-After": "0"}},
        {"content": "Hi"},
    ]
    with ScriptedServer(script) as model:
        agent = tmp_path / "hello.yaml"
        agent.write_text(
            f"version: 1\nname: hello\nmodel:\n  id: openai/scripted\n  api_base: {model.base_url}\n"
            "  api_key: ${SCRIPTED_API_KEY:-sk-test}\n  retries: 1\n"
        )
        served = serve([agent])
        with served.http() as http:
            answer = http.post(
                "/v1/chat/completions",
                json={"model": "hello", "messages": [{"role": "user", "content": "hi"}]},
            )
            assert answer.status_code == 200
            samples = _samples(http.get("/metrics").text)
    model_id = "openai/scripted"
    assert _value(samples, "runner_model_retries_total", model=model_id, kind="rate_limit") == 1
    assert _value(samples, "runner_rate_limit_waits_total", model=model_id) == 1
    assert _value(samples, "runner_model_calls_total", agent="hello", model=model_id, outcome="ok") == 1


def _agent_file(path: Path, name: str, model_id: str, base_url: str) -> Path:
    path.write_text(
        f"version: 1\nname: {name}\nmodel:\n  id: {model_id}\n  api_base: {base_url}\n"
        "  api_key: ${SCRIPTED_API_KEY:-sk-test}\n  retries: 0\n"
    )
    return path


def test_a_priced_call_counts_its_cost_and_a_failed_one_its_error_kind(
    tmp_path: Path, serve: Callable[..., Served]
) -> None:
    priced = [
        {"content": "Hi", "usage": {"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100}}
    ]
    with ScriptedServer(priced) as up, ScriptedServer([{"status": 503, "error": "down"}]) as down:
        cheap = _agent_file(tmp_path / "cheap.yaml", "cheap", "openai/gpt-4o-mini", up.base_url)
        broken = _agent_file(tmp_path / "broken.yaml", "broken", "openai/scripted", down.base_url)
        served = serve([cheap, broken])
        with served.http() as http:
            for name in ("cheap", "broken"):
                http.post(
                    "/v1/chat/completions",
                    json={"model": name, "messages": [{"role": "user", "content": "hi"}]},
                )
            samples = _samples(http.get("/metrics").text)
    assert _value(samples, "runner_cost_usd_total", agent="cheap", model="openai/gpt-4o-mini") > 0
    assert _value(samples, "runner_model_errors_total", model="openai/scripted", kind="server") == 1
    assert (
        _value(samples, "runner_model_calls_total", agent="broken", model="openai/scripted", outcome="error")
        == 1
    )
    assert (
        _value(samples, "runner_model_calls_total", agent="cheap", model="openai/gpt-4o-mini", outcome="ok")
        == 1
    )
