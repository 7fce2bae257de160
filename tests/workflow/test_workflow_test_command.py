"""``runner test team.yaml``: a team file's ``tests:`` run its workflow, one cassette per case (issue 17)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runner.store.cassette import read_cassette
from runner.testing import ScriptedServer
from tests.workflow.helpers import Cli, Models, team, user_text

PLANNER = """output:
  type: object
  required: [tasks]
  properties:
    tasks: {type: array, items: {type: string}}
"""

WORKFLOW = """workflow:
  output: "{{ steps.research.output | join(' | ') }}"
  steps:
    - {id: plan, agent: planner, input: "plan: {{ input }}"}
    - id: research
      for_each: steps.plan.output.tasks
      as: task
      step: {id: one, agent: researcher, input: "research {{ task }}"}
tests:
  - name: moon
    input: the moon
    cassette: cassettes/moon.jsonl
    expect: {output_contains: RESEARCH MOON-B, max_steps: 3}
  - name: sun
    input: the sun
    cassette: cassettes/sun.jsonl
    expect: {output_matches: "^RESEARCH SUN-A \\\\| RESEARCH SUN-B$"}
"""


def _models() -> Models:
    def plan(body: dict[str, Any]) -> dict[str, Any]:
        topic = user_text(body).split()[-1]
        return {"tasks": [f"{topic}-a", f"{topic}-b"]}

    return Models({"planner": plan, "researcher": lambda body: user_text(body).upper()})


def _recorded(cli: Cli, tmp_path: Path) -> Path:
    with ScriptedServer(_models()) as server:
        path = team(tmp_path, server.base_url, {"planner": PLANNER, "researcher": ""}, WORKFLOW)
        done = cli("test", str(path), "--update")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS team/moon" in done.stdout and "PASS team/sun" in done.stdout
    return path


def test_update_records_one_cassette_per_case_and_they_pass_offline(cli: Cli, tmp_path: Path) -> None:
    path = _recorded(cli, tmp_path)
    for name, topic in (("moon", "moon"), ("sun", "sun")):
        cassette = read_cassette(tmp_path / "cassettes" / f"{name}.jsonl")
        assert cassette.header["workflow"] == "team"
        asked = [user_text(i.request) for i in cassette.interactions]
        assert asked == [f"plan: the {topic}", f"research {topic}-a", f"research {topic}-b"]
    offline = cli("test", str(path))  # the server is gone
    assert offline.returncode == 0, offline.stdout + offline.stderr
    assert offline.stdout.splitlines()[-1] == "2 passed, 0 failed"
    assert "no tests" not in offline.stderr  # the team's agents have none, but the file has


def test_a_changed_expectation_or_step_fails_against_the_same_cassette(cli: Cli, tmp_path: Path) -> None:
    path = _recorded(cli, tmp_path)
    text = path.read_text()
    path.write_text(text.replace("max_steps: 3", "max_steps: 2"))
    fewer = cli("test", str(path))
    assert fewer.returncode == 1
    assert "FAIL team/moon" in fewer.stdout and "PASS team/sun" in fewer.stdout
    path.write_text(text.replace('input: "research {{ task }}"', 'input: "look into {{ task }}"'))
    changed = cli("test", str(path))
    assert changed.returncode == 1
    assert "differs from the recording" in changed.stdout
    assert "Traceback" not in changed.stdout + changed.stderr


def test_tools_called_of_a_workflow_are_every_steps_calls(cli: Cli, tmp_path: Path) -> None:
    path = _recorded(cli, tmp_path)
    path.write_text(path.read_text().replace("max_steps: 3}", "max_steps: 3, tools_called: [search]}"))
    result = cli("test", str(path))
    assert result.returncode == 1  # its steps' models called no tool: the outcome's tools say so
    assert "tools not called: ['search'] (called: [])" in result.stdout


def test_a_failed_recording_keeps_the_old_cassette(cli: Cli, tmp_path: Path) -> None:
    path = _recorded(cli, tmp_path)
    cassette = tmp_path / "cassettes" / "moon.jsonl"
    before = cassette.read_text()
    broken = Models({"planner": lambda body: {"tasks": ["x"]}, "researcher": lambda body: "nothing"})
    with ScriptedServer(broken) as server:
        text = path.read_text()
        old_url = text.split("api_base: '")[1].split("'")[0]
        path.write_text(
            text.replace(old_url, server.base_url)
        )  # the same team, on a server that answers otherwise
        again = cli("test", str(path), "--update")
    assert again.returncode == 1
    assert "the recording failed, so the old cassette is kept" in again.stdout
    assert cassette.read_text() == before
    assert not cassette.with_name("moon.jsonl.recording").exists()


def test_a_team_files_tests_without_a_workflow_are_a_located_error(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "team.yaml"
    path.write_text(
        "version: 1\nagents:\n  a:\n    model: openai/a\ntests:\n  - name: one\n    input: hi\n",
        encoding="utf-8",
    )
    for command in ("validate", "test"):
        result = cli(command, str(path))
        assert result.returncode == 2, result.stdout + result.stderr
        assert "team.yaml:5:1: tests: a team file's own tests run its workflow" in result.stderr
        assert "Traceback" not in result.stderr
