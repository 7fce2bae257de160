"""``runner serve`` on the command line: refusals with exit 2, and a real server in a subprocess."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from runner.cli.main import app

RUNNER = str(Path(sys.executable).parent / "runner")


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    for name in (
        "RUNNER_SERVE_API_KEYS",
        "RUNNER_SERVE_HOST",
        "RUNNER_SERVE_PORT",
        "RUNNER_SERVE_ALLOWED_ORIGINS",
        "RUNNER_SERVE_ALLOWED_HOSTS",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RUNNER_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    return {k: v for k, v in os.environ.items() if not k.startswith("RUNNER_SERVE")}


def test_binding_beyond_loopback_without_keys_is_refused(env: dict[str, str], agent_files: Any) -> None:
    result = CliRunner().invoke(app, ["serve", str(agent_files.root), "--host", "0.0.0.0"])
    assert result.exit_code == 2
    assert "refusing to serve on 0.0.0.0 without API keys" in result.output
    assert "RUNNER_SERVE_API_KEYS" in result.output
    assert "Traceback" not in result.output


def test_no_valid_agent_is_a_usage_error(env: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "junk.yaml").write_text("just: junk\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["serve", str(tmp_path / "junk.yaml"), "--port", "0"])
    assert result.exit_code == 2
    assert "warning: skipped" in result.output and "no valid agent files" in result.output


def test_nothing_to_serve_without_paths_or_an_agents_folder(env: dict[str, str]) -> None:
    result = CliRunner().invoke(app, ["serve"])
    assert result.exit_code == 2 and "nothing to serve" in result.output


@pytest.mark.slow
def test_runner_serve_answers_the_openai_sdk_and_stops_on_ctrl_c(
    env: dict[str, str], scripted: Callable[..., Any], agent_files: Any, tmp_path: Path
) -> None:
    import openai

    server = scripted([{"content": "Served from a subprocess."}], repeat=True)
    agent_files.write("remote", server)
    process = subprocess.Popen(
        [RUNNER, "serve", str(agent_files.root), "--port", "0", "--allow-origin", "http://localhost:3000"],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        deadline = time.monotonic() + 30
        line = ""
        while "serving" not in line:
            assert time.monotonic() < deadline and process.poll() is None, "runner serve did not start"
            line = process.stderr.readline()
        match = re.search(r"at (http://127\.0\.0\.1:\d+/v1): remote", line)
        assert match, line
        doors = process.stderr.readline()  # the other protocols on the same port, each answering
        assert doors.startswith("also at http://127.0.0.1:") and "/mcp" in doors, doors
        for path in ("/v1/responses", "/mcp", "/a2a", "/metrics"):
            assert path in doors, doors
        assert httpx.get(match.group(1).removesuffix("/v1") + "/a2a").status_code == 200
        assert httpx.get(match.group(1).removesuffix("/v1") + "/metrics").status_code == 200
        client = openai.OpenAI(base_url=match.group(1), api_key="none", max_retries=0)
        answer = client.chat.completions.create(model="remote", messages=[{"role": "user", "content": "hi"}])
        assert answer.choices[0].message.content == "Served from a subprocess."
        base = match.group(1)
        allowed = httpx.get(base + "/models", headers={"origin": "http://localhost:3000"})
        assert allowed.headers["access-control-allow-origin"] == "http://localhost:3000"
        assert httpx.get(base + "/models", headers={"origin": "http://evil.example"}).status_code == 403
        assert httpx.get(base + "/models", headers={"host": "evil.example"}).status_code == 403
        process.send_signal(signal.SIGINT)
        process.wait(timeout=15)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0  # Ctrl+C is how a server stops
    rest = process.stderr.read() if process.stderr else ""
    assert "stopped" in rest and "Traceback" not in rest
    assert list((tmp_path / "home" / "sessions").glob("*.jsonl"))


def test_serve_limits_are_settings_with_defaults(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from runner.env_settings import load_settings

    defaults = load_settings()
    assert defaults.serve_allowed_origins == [] and defaults.serve_allowed_hosts == []
    assert defaults.serve_header_timeout_s == 10 and defaults.serve_body_timeout_s == 30
    assert defaults.serve_max_connections == 100 and defaults.serve_max_messages == 5000
    monkeypatch.setenv("RUNNER_SERVE_ALLOWED_ORIGINS", "http://localhost:3000, https://chat.example")
    monkeypatch.setenv("RUNNER_SERVE_MAX_CONNECTIONS", "7")
    chosen = load_settings()
    assert chosen.serve_allowed_origins == ["http://localhost:3000", "https://chat.example"]
    assert chosen.serve_max_connections == 7
    monkeypatch.setenv("RUNNER_SERVE_BODY_TIMEOUT_S", "0")
    result = CliRunner().invoke(app, ["serve", "agents"])
    assert result.exit_code == 2 and "RUNNER_SERVE_BODY_TIMEOUT_S" in result.output
