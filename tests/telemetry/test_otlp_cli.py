"""``runner run --otel`` as a user runs it: spans reach a real OTLP/HTTP receiver; faults cost nothing."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from runner.testing import ScriptedServer
from tests.telemetry.receiver import otlp_receiver

ROOT = Path(__file__).resolve().parents[2]


def _agent(folder: Path, server: ScriptedServer) -> Path:
    path = folder / "hello.yaml"
    path.write_text(
        f"version: 1\nname: hello\nmodel:\n  id: openai/scripted\n  api_base: {server.base_url}\n"
    )
    return path


def _runner(folder: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "PYTHONPATH": str(ROOT), "RUNNER_HOME": str(folder / "home"), **env}
    environ.pop("OTEL_SDK_DISABLED", None)
    environ.pop("RUNNER_OTEL", None) if "RUNNER_OTEL" not in env else None
    return subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "runner", *args],
        cwd=folder,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_run_with_otel_exports_genai_spans_over_otlp(tmp_path: Path) -> None:
    with ScriptedServer([{"content": "Hi!"}]) as server, otlp_receiver() as receiver:
        agent = _agent(tmp_path, server)
        done = _runner(
            tmp_path,
            "run",
            str(agent),
            "-p",
            "Hello",
            "--otel",
            OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url,
            OTEL_SERVICE_NAME="my-agents",
        )
        assert done.returncode == 0, done.stderr
        assert "Hi!" in done.stdout
        assert receiver.got.wait(10)
        names = receiver.names()
        assert "invoke_agent hello" in names and "chat openai/scripted" in names, names
        agent_span = next(s for s in receiver.spans if s.name == "invoke_agent hello")
        chat = next(s for s in receiver.spans if s.name == "chat openai/scripted")
        assert chat.parent_span_id == agent_span.span_id and chat.trace_id == agent_span.trace_id
        assert agent_span.service == "my-agents"
        assert chat.attributes["gen_ai.provider.name"] == "openai"
        assert chat.attributes["gen_ai.response.model"] == "scripted"
        # the GenAI metrics went out too, at exit
        assert {"gen_ai.client.operation.duration", "gen_ai.client.token.usage"} <= set(receiver.metrics)
        # the model request carried the chat span's context (the httpx fast path)
        traceparent = server.headers[0].get("traceparent", "")
        assert traceparent.split("-")[1:3] == [chat.trace_id, chat.span_id], traceparent


def test_the_setting_turns_tracing_on_and_off_means_no_export(tmp_path: Path) -> None:
    with ScriptedServer([{"content": "one"}, {"content": "two"}]) as server, otlp_receiver() as receiver:
        agent = _agent(tmp_path, server)
        off = _runner(tmp_path, "run", str(agent), "-p", "Hello", OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url)
        assert off.returncode == 0, off.stderr
        assert "traceparent" not in server.headers[0]
        imported = {line.rsplit("|", 1)[1].strip() for line in off.stderr.splitlines() if "|" in line}
        assert "runner.session.session" in imported  # the parser of importtime's lines works
        assert sorted(m for m in imported if m.startswith(("opentelemetry", "prometheus_client"))) == []
        on = _runner(
            tmp_path,
            "run",
            str(agent),
            "-p",
            "Hello",
            RUNNER_OTEL="true",
            OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url,
        )
        assert on.returncode == 0, on.stderr
        assert receiver.got.wait(10)
        assert "invoke_agent hello" in receiver.names()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_endpoint_that_is_down_is_a_warning_not_a_failure(tmp_path: Path) -> None:
    with ScriptedServer([{"content": "Hi!"}]) as server:
        agent = _agent(tmp_path, server)
        done = _runner(
            tmp_path,
            "run",
            str(agent),
            "-p",
            "Hello",
            "--otel",
            OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{_closed_port()}",
        )
    assert done.returncode == 0, done.stderr
    assert "Hi!" in done.stdout
    warnings = [line for line in done.stderr.splitlines() if "import time:" not in line]
    assert any("could not export" in line for line in warnings), warnings
    assert not any("Traceback" in line or "Transient error" in line for line in warnings), warnings


def test_a_slow_endpoint_does_not_hold_the_run(tmp_path: Path) -> None:
    # the receiver answers no export for 30 s; the command ends within its bounded flush (2 s) + start-up
    hold = threading.Event()
    with ScriptedServer([{"content": "Hi!"}]) as server, otlp_receiver(hold=hold) as receiver:
        agent = _agent(tmp_path, server)
        started = time.monotonic()
        done = _runner(
            tmp_path, "run", str(agent), "-p", "Hello", "--otel", OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url
        )
        took = time.monotonic() - started
        assert done.returncode == 0, done.stderr
        assert receiver.posts >= 1  # it did try to export
    assert took < 20, took
