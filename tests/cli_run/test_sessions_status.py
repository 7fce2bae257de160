"""A session's status in ``runner sessions list`` / ``show`` (issue 23, item 27): a turn counts as done
only when the transcript records its end, so a run killed during its first model call is listed
``interrupted``, not ``done``."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from runner.store.transcript import read_transcript
from tests.cli_run.conftest import Cli, write_agent


def _agent(base_url: str) -> str:
    return (
        "version: 1\nname: stuck\nmodel:\n  id: openai/scripted\n"
        f"  api_base: {base_url}\n  api_key: ${{TEST_API_KEY:-sk-none}}\n  retries: 0\n"
        "prompts:\n  system: You answer.\n"
    )


def _wait_until(condition: Any, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what} never happened"
        time.sleep(0.02)


def test_a_run_killed_during_its_first_model_call_is_listed_interrupted(
    cli: Cli, serve: Any, tmp_path: Path
) -> None:
    release = threading.Event()

    def never_answers(body: dict[str, Any]) -> Mapping[str, Any]:
        release.wait(60)  # until the test is over: the model call never ends while the run lives
        return {"content": "too late"}

    server = serve(never_answers)
    agent = write_agent(tmp_path / "a", _agent(server.base_url))
    process = cli.popen("run", str(agent), "-p", "Is water wet?")
    try:
        _wait_until(lambda: server.requests, "the model call")
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
    finally:
        release.set()
    (path,) = cli.transcripts()
    assert read_transcript(path).messages()[-1]["role"] == "user"  # the call the kill cut short
    listing = cli("sessions", "list")
    assert listing.returncode == 0, listing.stderr
    (line,) = [line for line in listing.stdout.splitlines() if line.startswith(path.stem)]
    assert line.split()[1] == "interrupted", listing.stdout
    shown = cli("sessions", "show", path.stem)
    assert "status   interrupted" in shown.stdout, shown.stdout


def test_a_finished_run_is_listed_done(cli: Cli, serve: Any, tmp_path: Path) -> None:
    server = serve([{"content": "Yes."}])
    agent = write_agent(tmp_path / "a", _agent(server.base_url))
    assert cli("run", str(agent), "-p", "Is water wet?").returncode == 0
    (path,) = cli.transcripts()
    listing = cli("sessions", "list")
    (line,) = [line for line in listing.stdout.splitlines() if line.startswith(path.stem)]
    assert line.split()[1] == "done", listing.stdout
