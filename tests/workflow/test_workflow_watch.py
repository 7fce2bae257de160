"""``runner run team.yaml -p X --watch``: the workflow's files reloaded between steps (issue 17, item 5).

Each test holds the first step's model call open, edits the team file while it runs, waits for the
reload line on stderr, then lets the step finish, and looks at what the later steps sent.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from runner.testing import ScriptedServer
from tests.workflow.helpers import Cli, Models, team, user_text

pytestmark = pytest.mark.timeout(90)

TWO_STEPS = """workflow:
  - id: one
    agent: first
  - id: two
    agent: second
    input: "after {{ steps.one.output }}"
"""


OLD_PROMPT = {"first": "", "second": "prompts: {system: OLD-PROMPT}"}


class Lines:
    """A running process's stderr, read line by line in a thread."""

    def __init__(self, stream: Any) -> None:
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: Any) -> None:
        for line in stream:
            self.lines.append(line)

    def wait_for(self, text: str, timeout_s: float = 30.0) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if text in line:
                    return line
            time.sleep(0.02)
        raise AssertionError(f"no line with {text!r} on stderr: {''.join(self.lines)}")

    def text(self) -> str:
        self._thread.join(timeout=10)
        return "".join(self.lines)


def _system(body: dict[str, Any]) -> str:
    return next((m["content"] for m in body["messages"] if m["role"] == "system"), "")


class Held:
    """A model answer that waits until the test lets it go (the first step stays running)."""

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.started = threading.Event()
        self.release = threading.Event()

    def __call__(self, body: dict[str, Any]) -> str:
        self.started.set()
        self.release.wait(timeout=60)
        return self.answer


class Run:
    """``runner run team.yaml -p go --watch ...`` running, its stdout and stderr read as they come."""

    def __init__(self, cli: Cli, *args: str) -> None:
        self.process: subprocess.Popen[str] = cli.popen("run", "team.yaml", "-p", "go", *args)
        self.out = Lines(self.process.stdout)
        self.err = Lines(self.process.stderr)

    def finish(self) -> tuple[int, str, str]:
        code = self.process.wait(timeout=60)
        return code, self.out.text(), self.err.text()


def test_an_agent_edited_while_a_step_runs_is_used_by_the_next_step(tmp_path: Path, cli: Cli) -> None:
    held = Held("ONE")
    seen: list[str] = []
    models = Models({"first": held, "second": lambda body: seen.append(_system(body)) or "TWO"})
    with ScriptedServer(models) as server:
        path = team(tmp_path, server.base_url, OLD_PROMPT, TWO_STEPS)
        run = Run(cli, "--watch")
        try:
            assert held.started.wait(30), run.err.text()
            path.write_text(path.read_text().replace("OLD-PROMPT", "NEW-PROMPT"))
            line = run.err.wait_for("reloaded")
        finally:
            held.release.set()
        code, out, err = run.finish()
    assert code == 0, err
    assert "agent second" in line
    assert out.strip() == "TWO"
    assert seen == ["NEW-PROMPT"]
    assert models.calls == {"first": 1, "second": 1}
    transcript = cli.workflow_transcript()
    reloads = [json.loads(x) for x in transcript.read_text().splitlines()]
    assert [r["data"]["changed"] for r in reloads if r.get("event") == "reload"] == [["agent second"]]


def test_an_invalid_edit_keeps_the_last_good_config_and_says_where(tmp_path: Path, cli: Cli) -> None:
    held = Held("ONE")
    seen: list[str] = []
    models = Models({"first": held, "second": lambda body: seen.append(user_text(body)) or "TWO"})
    with ScriptedServer(models) as server:
        path = team(tmp_path, server.base_url, {"first": "", "second": ""}, TWO_STEPS)
        run = Run(cli, "--watch")
        try:
            assert held.started.wait(30), run.err.text()
            # a reference to a step that does not exist: validate's check, located
            path.write_text(path.read_text().replace("steps.one.output", "steps.onne.output"))
            line = run.err.wait_for("reload failed")
        finally:
            held.release.set()
        code, out, err = run.finish()
    assert code == 0, err
    assert "keeping the last good config" in line
    assert "team.yaml:" in line and "onne" in line and "did you mean" in line.lower()
    assert seen == ["after ONE"]  # the step ran as the file was when it started
    assert out.strip() == "TWO"


def test_new_steps_apply_from_the_next_step_and_finished_steps_are_not_run_again(
    tmp_path: Path, cli: Cli
) -> None:
    held = Held("ONE")
    models = Models({"first": held, "second": lambda body: user_text(body).upper()})
    with ScriptedServer(models) as server:
        path = team(tmp_path, server.base_url, {"first": "", "second": ""}, TWO_STEPS)
        run = Run(cli, "--watch", "--json")
        try:
            assert held.started.wait(30)
            path.write_text(
                path.read_text()
                + '  - id: three\n    agent: second\n    input: "and {{ steps.two.output }}"\n'
            )
            run.out.wait_for('"type": "reload"')
        finally:
            held.release.set()
        code, out, err = run.finish()
    assert code == 0, err
    events = [json.loads(line) for line in out.splitlines()]
    kinds = [e["type"] for e in events]
    assert "reload" in kinds, out
    reload = next(e for e in events if e["type"] == "reload")
    assert "workflow's steps" in reload["message"]
    ended = [e["key"] for e in events if e["type"] == "step_end"]
    assert ended == ["one", "two", "three"]  # one was not run again after the restart
    assert not [e for e in events if e["type"] == "step_reused"]  # reused quietly
    assert models.calls == {"first": 1, "second": 2}
    output = next(e for e in events if e["type"] == "output")
    assert output["output"] == "AND AFTER ONE"


def test_without_watch_an_edit_changes_nothing(tmp_path: Path, cli: Cli) -> None:
    held = Held("ONE")
    seen: list[str] = []
    models = Models({"first": held, "second": lambda body: seen.append(_system(body)) or "TWO"})
    with ScriptedServer(models) as server:
        path = team(tmp_path, server.base_url, OLD_PROMPT, TWO_STEPS)
        run = Run(cli)
        try:
            assert held.started.wait(30)
            path.write_text(path.read_text().replace("OLD-PROMPT", "NEW-PROMPT"))
            time.sleep(0.5)  # what a watcher would need to see it (none runs: nothing may change)
        finally:
            held.release.set()
        code, _, err = run.finish()
    assert code == 0, err
    assert seen == ["OLD-PROMPT"]
    assert "reload" not in err


TOOL_V1 = '''
def stamp(text: str) -> str:
    """Stamp the text."""
    return "v1:" + text
'''


def test_an_edited_tool_module_is_imported_again_for_the_next_step(tmp_path: Path, cli: Cli) -> None:
    (tmp_path / "stamp_tools.py").write_text(TOOL_V1, encoding="utf-8")
    held = Held("ONE")

    def stamping(body: dict[str, Any]) -> Any:
        last = body["messages"][-1]
        if last["role"] == "tool":
            return {"content": "tool said " + str(last["content"])}
        return {"tool_calls": [{"name": "stamp", "arguments": {"text": "x"}}]}

    models = Models({"first": held, "second": stamping})
    with ScriptedServer(models) as server:
        team(tmp_path, server.base_url, {"first": "", "second": "tools:\n  - python: stamp_tools"}, TWO_STEPS)
        run = Run(cli, "--watch")
        try:
            assert held.started.wait(30), run.err.text()
            (tmp_path / "stamp_tools.py").write_text(TOOL_V1.replace("v1:", "v2:"), encoding="utf-8")
            line = run.err.wait_for("reloaded")
        finally:
            held.release.set()
        code, out, err = run.finish()
    assert code == 0, err
    assert "stamp_tools.py" in line and "agent second" in line and "agent first" not in line
    assert out.strip() == "tool said v2:x"
