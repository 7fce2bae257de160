"""``runner run team.yaml --record / --replay``: one cassette for the whole workflow (issue 17)."""

from __future__ import annotations

import json
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
  output: "{{ steps.research.output | join(' | ') }} / {{ steps.both.output.a }} {{ steps.both.output.b }}"
  steps:
    - id: plan
      agent: planner
      input: "plan: {{ input }}"
    - id: research
      for_each: steps.plan.output.tasks
      as: task
      max_parallel: 4
      step:
        id: one
        agent: researcher
        input: "research {{ task }}"
    - id: both
      parallel:
        - {id: a, agent: researcher, input: "side a"}
        - {id: b, agent: researcher, input: "side b"}
"""

TASKS = ["t0", "t1", "t2", "t3"]
EXPECTED = "RESEARCH T0 | RESEARCH T1 | RESEARCH T2 | RESEARCH T3 / SIDE A SIDE B"


def _models() -> Models:
    def research(body: dict[str, Any]) -> dict[str, Any]:
        text = user_text(body)  # live, the first items would finish last
        wait = 0.03 * (4 - int(text[-1])) if text[-1].isdigit() else 0.0
        return {"content": text.upper(), "sleep_s": wait}

    return Models({"planner": lambda body: {"tasks": TASKS}, "researcher": research})


def _record(cli: Cli, tmp_path: Path, cassette: Path) -> tuple[Path, Models]:
    models = _models()
    with ScriptedServer(models) as server:
        path = team(tmp_path, server.base_url, {"planner": PLANNER, "researcher": ""}, WORKFLOW)
        done = cli("run", str(path), "-p", "the moon", "--record", str(cassette))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == EXPECTED
    return path, models


def test_one_cassette_holds_every_step_in_the_files_order_and_replays_offline(
    cli: Cli, tmp_path: Path
) -> None:
    cassette = tmp_path / "wf.jsonl"
    path, models = _record(cli, tmp_path, cassette)
    assert models.most_in_flight == 1  # recording runs parallel steps and for_each items one at a time
    recorded = read_cassette(cassette)
    assert recorded.header["workflow"] == "team"  # the file's stem: it has no name:
    assert recorded.header["models"] == {"planner": "openai/planner", "researcher": "openai/researcher"}
    asked = [user_text(i.request) for i in recorded.interactions]
    assert asked == ["plan: the moon", *[f"research {t}" for t in TASKS], "side a", "side b"]
    # the server is gone: every answer comes from the cassette, and twice the same
    for _ in range(2):
        again = cli("run", str(path), "-p", "the moon", "--replay", str(cassette))
        assert again.returncode == 0, again.stderr
        assert again.stdout.strip() == EXPECTED
        assert "note:" not in again.stderr
    assert sum(models.calls.values()) == 1 + len(TASKS) + 2


def test_a_changed_input_is_refused_by_a_strict_replay_with_the_difference(cli: Cli, tmp_path: Path) -> None:
    cassette = tmp_path / "wf.jsonl"
    path, _ = _record(cli, tmp_path, cassette)
    changed = cli("run", str(path), "-p", "the sun", "--replay", str(cassette))
    assert changed.returncode == 1
    assert "differs from the recording" in changed.stderr
    assert "Traceback" not in changed.stderr
    loose = cli("run", str(path), "-p", "the sun", "--replay", str(cassette), "--replay-loose")
    assert loose.returncode == 0, loose.stderr
    assert loose.stdout.strip() == EXPECTED  # the recorded answers, with a warning
    assert "warning:" in loose.stderr


def test_a_cassette_of_a_single_agent_is_refused_before_anything_runs(cli: Cli, tmp_path: Path) -> None:
    cassette = tmp_path / "wf.jsonl"
    path, _ = _record(cli, tmp_path, cassette)
    lines = cassette.read_text().splitlines()
    header = json.loads(lines[0])
    del header["workflow"]
    header["agent"] = "planner"
    single = tmp_path / "single.jsonl"
    single.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    before = cli.transcripts()
    refused = cli("run", str(path), "-p", "the moon", "--replay", str(single))
    assert refused.returncode != 0
    assert "recorded for agent 'planner' (not a workflow)" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert cli.transcripts() == before  # no workflow transcript was begun


def test_a_workflow_that_now_makes_fewer_calls_says_so(cli: Cli, tmp_path: Path) -> None:
    cassette = tmp_path / "wf.jsonl"
    path, _ = _record(cli, tmp_path, cassette)
    text = path.read_text().replace('        - {id: b, agent: researcher, input: "side b"}\n', "")
    path.write_text(text.replace(" {{ steps.both.output.b }}", ""))
    shorter = cli("run", str(path), "-p", "the moon", "--replay", str(cassette))
    assert shorter.returncode == 0, shorter.stderr
    assert "1 recorded response(s) were not used" in shorter.stderr


def test_a_replay_renders_now_at_the_recordings_time(cli: Cli, tmp_path: Path) -> None:
    import time

    timed = "prompts:\n  system: \"It is {{ now('%H:%M:%S') }}.\"\n"
    flow = "workflow:\n  - {id: only, agent: solo}\n"
    cassette = tmp_path / "wf.jsonl"
    with ScriptedServer(Models({"solo": lambda body: "fine"})) as server:
        path = team(tmp_path, server.base_url, {"solo": timed}, flow)
        done = cli("run", str(path), "-p", "hi", "--record", str(cassette))
    assert done.returncode == 0, done.stderr
    time.sleep(1.1)  # the clock has moved on: the system prompt renders the same only if frozen
    again = cli("run", str(path), "-p", "hi", "--replay", str(cassette))
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == "fine"


def test_a_steps_sub_agent_records_into_the_same_cassette(cli: Cli, tmp_path: Path) -> None:
    lead = 'tools:\n  - agent: "#helper"\n'
    flow = "workflow:\n  - {id: ask, agent: lead}\n"
    script = [
        {"tool_calls": [{"name": "helper", "arguments": {"input": "what is 2+2"}}]},
        {"content": "4 it is"},
    ]

    def answer(body: dict[str, Any]) -> Any:
        if user_text(body) == "what is 2+2":  # the helper's session, on the model it borrowed
            return "4"
        if any(m["role"] == "tool" for m in body["messages"]):
            return script[1]
        return script[0]

    models = Models({"lead": answer})
    cassette = tmp_path / "wf.jsonl"
    with ScriptedServer(models) as server:
        path = team(tmp_path, server.base_url, {"lead": lead, "helper": ""}, flow)
        done = cli("run", str(path), "-p", "sum", "--record", str(cassette))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "4 it is"
    interactions = read_cassette(cassette).interactions
    # the helper borrows its parent's model (as with a single agent's cassette): one cassette, in order
    assert [user_text(i.request) for i in interactions] == ["sum", "what is 2+2", "sum"]
    again = cli("run", str(path), "-p", "sum", "--replay", str(cassette))
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == "4 it is"
