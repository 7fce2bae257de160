"""``runner serve`` in a subprocess serves a team file's workflow: named on start, answered through
the openai SDK, its access line naming the workflow's session, stopped by Ctrl+C (issue 17)."""

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

import pytest

from runner.testing import ScriptedServer
from tests.workflow.helpers import Models, team, user_text

RUNNER = str(Path(sys.executable).parent / "runner")

WORKFLOW = """workflow:
  name: relay
  output: "relayed: {{ steps.second.output }}"
  steps:
    - {id: first, agent: one}
    - {id: second, agent: two, input: "{{ steps.first.output }}"}
"""


@pytest.mark.slow
def test_runner_serve_serves_a_workflow_to_the_openai_sdk(
    scripted: Callable[..., ScriptedServer], agent_files: Any, tmp_path: Path
) -> None:
    import openai

    server = scripted(
        Models({"one": lambda body: user_text(body) + " 1", "two": lambda body: user_text(body) + " 2"})
    )
    team(agent_files.root, server.base_url, {"one": "", "two": ""}, WORKFLOW)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RUNNER_", "OPENAI_"))}
    env.update(RUNNER_HOME=str(tmp_path / "home"), RUNNER_FAST_PATH="1", NO_COLOR="1")
    process = subprocess.Popen(
        [RUNNER, "serve", str(agent_files.root), "--port", "0"],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
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
        match = re.search(r"at (http://127\.0\.0\.1:\d+/v1): one, two", "".join(lines))
        assert match, lines
        assert lines[-1] == (
            "serving workflow relay (team.yaml): "
            "a workflow of 2 steps (first, second) running agents one, two\n"
        )
        client = openai.OpenAI(base_url=match.group(1), api_key="none", max_retries=0)
        assert sorted(m.id for m in client.models.list()) == ["one", "relay", "two"]
        answer = client.chat.completions.create(model="relay", messages=[{"role": "user", "content": "go"}])
        assert answer.choices[0].message.content == "relayed: go 1 2"
        process.send_signal(signal.SIGINT)
        process.wait(timeout=15)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0
    rest = process.stderr.read() if process.stderr else ""
    assert "stopped" in rest and "Traceback" not in rest
    (access,) = [line for line in rest.splitlines() if line.startswith("request: relay 200 ")]
    session = access.rsplit(" ", 1)[-1]
    assert access.endswith(f"stop workflow session {session}")
    assert (tmp_path / "home" / "sessions" / f"{session}.jsonl").is_file()
