"""Helpers for the workflow tests: the `runner` command, a per-model script, team files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.cli_run.conftest import invoke_in_process

RUNNER = str(Path(sys.executable).parent / "runner")


@dataclass
class Cli:
    """Runs `runner` with RUNNER_HOME in a temporary folder: in this process (as tests/cli_run does),
    or in a process of its own (``process``, ``popen``) where a signal or the process is the test."""

    home: Path
    cwd: Path
    env: dict[str, str]

    def __call__(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return invoke_in_process(list(args), cwd=self.cwd, env=self.env)

    def process(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [RUNNER, *args],
            cwd=self.cwd,
            env=self.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def popen(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [RUNNER, *args],
            cwd=self.cwd,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def transcripts(self) -> list[Path]:
        return sorted((self.home / "sessions").glob("*.jsonl"))

    def workflow_transcript(self) -> Path:
        (path,) = [p for p in self.transcripts() if '"workflow"' in p.read_text().splitlines()[0]]
        return path


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    env = dict(os.environ)
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "RUNNER_MODEL", "RUNNER_DEFAULT_MODEL"):
        env.pop(name, None)
    env.update(
        RUNNER_HOME=str(tmp_path / "home"),
        RUNNER_FAST_PATH="1",
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        NO_COLOR="1",
    )
    return Cli(home=tmp_path / "home", cwd=tmp_path, env=env)


@dataclass
class Models:
    """A script that answers per model id (each team agent has its own), counting concurrency."""

    answers: dict[str, Callable[[dict[str, Any]], Any]]
    delay_s: float = 0.0
    calls: dict[str, int] = field(default_factory=dict)
    in_flight: int = 0
    most_in_flight: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        model = str(body["model"])
        with self.lock:
            self.calls[model] = self.calls.get(model, 0) + 1
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            if self.delay_s:
                time.sleep(self.delay_s)
            answer = self.answers[model](body)
            if isinstance(answer, dict) and "sleep_s" in answer:  # this answer's own delay, counted in flight
                answer = dict(answer)
                time.sleep(answer.pop("sleep_s"))
        finally:
            with self.lock:
                self.in_flight -= 1
        if isinstance(answer, dict) and {"status", "content", "tool_calls"} & answer.keys():
            return {"usage": {"prompt_tokens": 10, "completion_tokens": 10}, **answer}
        content = answer if isinstance(answer, str) else json.dumps(answer)
        return {"content": content, "usage": {"prompt_tokens": 10, "completion_tokens": 10}}


def user_text(body: dict[str, Any]) -> str:
    """The last user message of a request."""
    return next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")


def team(folder: Path, base_url: str, agents: dict[str, str], workflow: str) -> Path:
    """A team file: each agent ``name: extra yaml`` gets the model id ``openai/NAME`` on the server."""
    lines = ["version: 1", "agents:"]
    for name, extra in agents.items():
        lines.append(f"  {name}:")
        lines.append(f"    model: {{id: openai/{name}, api_base: '{base_url}', retries: 0}}")
        for line in extra.splitlines():
            lines.append(f"    {line}")
    path = folder / "team.yaml"
    path.write_text("\n".join(lines) + "\n" + workflow, encoding="utf-8")
    return path


def events(path: Path, name: str) -> list[dict[str, Any]]:
    """The data of every ``name`` event in a transcript."""
    records = [json.loads(line) for line in path.read_text().splitlines()]
    return [r["data"] for r in records if r.get("type") == "event" and r.get("event") == name]
