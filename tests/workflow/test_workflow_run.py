"""Running a workflow: steps in order, typed data flow, parallel, for_each, loop, when (issue 17)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from runner.testing import ScriptedServer
from tests.workflow.helpers import Cli, Models, events, team, user_text

PLANNER = """output:
  type: object
  required: [tasks]
  properties:
    tasks: {type: array, items: {type: string}}
"""

PLAN_WORKFLOW = """workflow:
  output: "{{ steps.research.output | join(' | ') }}"
  steps:
    - id: plan
      agent: planner
      input: "plan: {{ input }}"
    - id: research
      for_each: steps.plan.output.tasks
      as: task
      max_parallel: 2
      step:
        id: one
        agent: researcher
        input: "research {{ task }}"
"""


def test_a_plans_typed_tasks_fan_out_in_order_at_most_max_parallel_at_once(cli: Cli, tmp_path: Path) -> None:
    tasks = [f"t{i}" for i in range(6)]

    def research(body: dict[str, Any]) -> dict[str, Any]:
        text = user_text(body)  # the first items take longest: they finish after later ones
        return {"content": text.upper(), "sleep_s": 0.05 * (6 - int(text[-1]))}

    models = Models({"planner": lambda body: {"tasks": tasks}, "researcher": research})
    with ScriptedServer(models) as server:
        path = team(tmp_path, server.base_url, {"planner": PLANNER, "researcher": ""}, PLAN_WORKFLOW)
        done = cli("run", str(path), "-p", "the moon")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == " | ".join(f"RESEARCH T{i}" for i in range(6))
    assert models.calls == {"planner": 1, "researcher": 6}
    assert models.most_in_flight == 2
    assert "[plan] started (agent planner)" in done.stderr
    assert "[research[5]/one] ok in" in done.stderr and "tokens" in done.stderr
    record = cli.workflow_transcript()
    ends = {e["key"]: e for e in events(record, "step_end")}
    assert ends["plan"]["output"] == {"tasks": tasks}
    assert ends["research"]["output"] == [f"RESEARCH T{i}" for i in range(6)]
    finished = [e["key"] for e in events(record, "step_end") if e["key"].startswith("research[")]
    assert finished != sorted(finished)  # they finished out of order; the outputs are in order
    starts = {e["key"]: e for e in events(record, "step_start")}
    assert starts["plan"]["input"] == "plan: the moon"
    # each agent step is its own child session with its own transcript, linked from the workflow's
    child = ends["research[3]/one"]["session_id"]
    assert (cli.home / "sessions" / f"{child}.jsonl").is_file()
    assert len(cli.transcripts()) == 1 + 7
    shown = cli("sessions", "show", record.stem)
    assert shown.returncode == 0 and "step_end" in shown.stdout and "step_start" in shown.stdout


PARALLEL = """workflow:
  - id: all
    parallel:
      - {id: a, agent: slow, input: "a"}
      - {id: b, agent: slow, input: "b"}
      - {id: c, agent: slow, input: "c"}
      - {id: d, agent: slow, input: "d"}
  - id: join
    agent: joiner
    input: "{{ steps.a.output }}{{ steps.b.output }}{{ steps.c.output }}{{ steps.d.output }}"
"""


def test_b_four_parallel_steps_are_in_flight_at_once(cli: Cli, tmp_path: Path) -> None:
    models = Models(
        {"slow": lambda body: user_text(body) * 2, "joiner": lambda body: "joined " + user_text(body)}
    )
    models.delay_s = 0.2
    with ScriptedServer(models) as server:
        path = team(tmp_path, server.base_url, {"slow": "", "joiner": ""}, PARALLEL)
        done = cli("run", str(path), "-p", "go", "--json")
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert lines[0]["type"] == "workflow" and lines[-1] == {
        "type": "end",
        "exit_code": 0,
        "status": "ok",
        "notes": [],
    }
    assert {"type": "output", "output": "joined aabbccdd"} in lines
    ends = {e["key"]: e for e in lines if e["type"] == "step_end"}
    starts = [e["key"] for e in lines if e["type"] == "step_start"]
    assert starts[:1] == ["all"] and sorted(starts[1:5]) == ["all/a", "all/b", "all/c", "all/d"]
    assert ends["all"]["output"] == {"a": "aa", "b": "bb", "c": "cc", "d": "dd"}
    assert models.most_in_flight == 4  # counted at the server: the four overlapped (no clock)


LOOP = """workflow:
  - id: review
    loop:
      max_iterations: 4
      until: steps.critic.output.approved
      steps:
        - id: critic
          agent: critic
          input: "draft {{ iteration }}"
  - id: after
    agent: writer
    input: "approved={{ steps.critic.output.approved }} status={{ steps.review.status }}"
"""

CRITIC = """output:
  type: object
  required: [approved]
  properties: {approved: {type: boolean}}
"""


def test_c_a_loop_repeats_until_its_condition_holds(cli: Cli, tmp_path: Path) -> None:
    models = Models(
        {
            "critic": lambda body: {"approved": user_text(body) == "draft 3"},
            "writer": lambda body: user_text(body),
        }
    )
    with ScriptedServer(models) as server:
        path = team(tmp_path, server.base_url, {"critic": CRITIC, "writer": ""}, LOOP)
        done = cli("run", str(path), "-p", "go")
    assert done.returncode == 0, done.stderr
    assert models.calls == {"critic": 3, "writer": 1}
    assert done.stdout.strip() == "approved=True status=ok"
    keys = [e["key"] for e in events(cli.workflow_transcript(), "step_end")]
    assert keys[:3] == ["review#1/critic", "review#2/critic", "review#3/critic"]


def test_d_a_loop_whose_until_never_holds_stops_at_max_iterations_with_exit_3(
    cli: Cli, tmp_path: Path
) -> None:
    models = Models({"critic": lambda body: {"approved": False}, "writer": lambda body: user_text(body)})
    with ScriptedServer(models) as server:
        path = team(tmp_path, server.base_url, {"critic": CRITIC, "writer": ""}, LOOP)
        done = cli("run", str(path), "-p", "go")
    assert done.returncode == 3, done.stderr
    assert models.calls == {"critic": 4, "writer": 1}
    assert "loop review stopped at max_iterations (4)" in done.stderr
    assert done.stdout.strip() == "approved=False status=limit"


WHEN = """workflow:
  - id: first
    agent: echo
  - id: never
    when: "steps.first.output == 'nope'"
    agent: echo
    input: "never"
  - id: last
    agent: echo
    input: "never was {{ steps.never.status }}"
"""


def test_e_a_step_whose_when_is_false_is_skipped(cli: Cli, tmp_path: Path) -> None:
    models = Models({"echo": lambda body: user_text(body)})
    with ScriptedServer(models) as server:
        path = team(tmp_path, server.base_url, {"echo": ""}, WHEN)
        done = cli("run", str(path), "-p", "hello")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "never was skipped"
    assert models.calls == {"echo": 2}
    assert [e["status"] for e in events(cli.workflow_transcript(), "step_end")] == ["ok", "skipped", "ok"]


def test_f_a_when_with_a_syntax_error_is_a_located_error_before_anything_runs(
    cli: Cli, tmp_path: Path
) -> None:
    models = Models({"echo": lambda body: user_text(body)})
    with ScriptedServer(models) as server:
        path = team(tmp_path, server.base_url, {"echo": ""}, WHEN.replace("== 'nope'", "== 'nope"))
        done = cli("run", str(path), "-p", "hello")
    assert done.returncode == 2, done.stderr  # run makes validate's checks: nothing starts
    assert "team.yaml:9:11: workflow[1].when: expression: unexpected char" in done.stderr
    assert "Traceback" not in done.stderr
    assert models.calls == {}


FOR_EACH_TEXT = """workflow:
  - id: each
    for_each: input
    step: {id: one, agent: echo}
"""


def test_g_for_each_over_a_string_is_refused_before_anything_runs(cli: Cli, tmp_path: Path) -> None:
    models = Models({"echo": lambda body: user_text(body)})
    with ScriptedServer(models) as server:
        path = team(tmp_path, server.base_url, {"echo": ""}, FOR_EACH_TEXT)
        done = cli("run", str(path), "-p", "abc")
    assert done.returncode == 2
    assert "workflow[0].for_each: for_each needs a list, and input is text" in done.stderr
    assert models.calls == {}


def test_h_workflow_output_is_json_when_an_object_and_checked_against_output_schema(
    cli: Cli, tmp_path: Path
) -> None:
    body = """workflow:
  output_schema: {type: object, required: [tasks]}
  steps:
    - {id: plan, agent: planner}
"""
    models = Models({"planner": lambda body: {"tasks": ["x"]}})
    with ScriptedServer(models) as server:
        path = team(tmp_path, server.base_url, {"planner": PLANNER}, body)
        done = cli("run", str(path), "-p", "go")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == {"tasks": ["x"]}
        path.write_text(path.read_text().replace("required: [tasks]}", "required: [report]}"))
        wrong = cli("run", str(path), "-p", "go")
    assert wrong.returncode == 1
    assert "does not match output_schema" in wrong.stderr and "report" in wrong.stderr


def test_i_agent_still_runs_one_agent_of_a_team_with_a_workflow(cli: Cli, tmp_path: Path) -> None:
    models = Models({"echo": lambda body: "just me"})
    with ScriptedServer(models) as server:
        path = team(tmp_path, server.base_url, {"echo": ""}, WHEN)
        done = cli("run", str(path), "--agent", "echo", "-p", "hello")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "just me" and models.calls == {"echo": 1}
    assert "started" not in done.stderr


def test_j_a_workflow_without_input_is_refused_before_anything_runs(cli: Cli, tmp_path: Path) -> None:
    models = Models({"echo": lambda body: user_text(body)})
    with ScriptedServer(models) as server:
        path = team(tmp_path, server.base_url, {"echo": ""}, WHEN)
        done = cli("run", str(path))
    assert done.returncode == 2 and "standard input was empty" in done.stderr
    assert models.calls == {} and cli.transcripts() == []


MARKING_TOOL = '''
from pathlib import Path


def mark(name: str) -> str:
    """Write a marker file."""
    Path(name).write_text("ran")
    return "marked"
'''


def test_k_a_tool_that_asks_for_confirmation_runs_in_a_workflow_only_with_yes(
    cli: Cli, tmp_path: Path
) -> None:
    (tmp_path / "tools_mod.py").write_text(MARKING_TOOL, encoding="utf-8")
    marker = tmp_path / "marker"

    def marking(body: dict[str, Any]) -> dict[str, Any]:
        last = body["messages"][-1]
        if last["role"] == "tool":
            return {"content": "tool said: " + str(last["content"])[:40]}
        return {"tool_calls": [{"name": "mark", "arguments": {"name": str(marker)}}]}

    body = "workflow:\n  - {id: only, agent: marker}\n"
    models = Models({"marker": marking})
    with ScriptedServer(models) as server:
        path = team(
            tmp_path, server.base_url, {"marker": "tools:\n  - python: tools_mod\n    confirm: true"}, body
        )
        declined = cli("run", str(path), "-p", "go")
        assert declined.returncode == 0, declined.stderr
        assert not marker.exists() and "marked" not in declined.stdout
        allowed = cli("run", str(path), "-p", "go", "--yes")
    assert allowed.returncode == 0, allowed.stderr
    assert allowed.stdout.strip() == "tool said: marked", (allowed.stdout, allowed.stderr)
    assert marker.read_text() == "ran"


def test_h2_an_output_nested_1000_levels_fails_the_workflow_clearly(cli: Cli, tmp_path: Path) -> None:
    # issue 23 item 11: an answer nested 1,000 levels was "internal error: RecursionError"; the
    # workflow's own output_schema is checked like every other answer (off the loop, within budget)
    body = """workflow:
  output_schema: {type: array}
  steps:
    - {id: write, agent: writer}
"""
    models = Models({"writer": lambda body: "[" * 1000 + "]" * 1000})
    with ScriptedServer(models) as server:
        path = team(tmp_path, server.base_url, {"writer": ""}, body)
        done = cli("run", str(path), "-p", "go")
    assert done.returncode == 1, done.stderr
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr
    assert "the workflow's output" in done.stderr and "output_schema" in done.stderr
