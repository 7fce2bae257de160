"""What only the run can find: data that ``validate`` could not type, failing at the step that reads it.

Each case passes ``runner validate`` (the shapes it needs are unknown before the run) and fails
while running: exit 1, one line that names the step and why, no traceback, the steps before it
recorded, and ``runner resume`` offered.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.testing import ScriptedServer
from tests.workflow.helpers import Cli, Models, events, team, user_text

#: ``tasks`` has no type: validate cannot say whether for_each gets a list.
LOOSE = """output:
  type: object
  required: [tasks]
  properties:
    tasks: {}
"""


def _run(cli: Cli, tmp_path: Path, plan: object, workflow: str) -> tuple[int, str, str, Path]:
    models = Models({"planner": lambda body: plan, "echo": lambda body: user_text(body)})
    with ScriptedServer(models) as server:
        path = team(tmp_path, server.base_url, {"planner": LOOSE, "echo": ""}, workflow)
        checked = cli("validate", str(path))
        assert checked.returncode == 0, checked.stdout + checked.stderr
        done = cli("run", str(path), "-p", "go")
    return done.returncode, done.stdout, done.stderr, path


def _one_clear_failure(code: int, err: str, *parts: str) -> None:
    assert code == 1, err
    assert "Traceback" not in err
    for part in parts:
        assert part in err, err
    assert "runner resume" in err


def test_for_each_over_a_string_the_schema_did_not_type_fails_at_that_step(cli: Cli, tmp_path: Path) -> None:
    flow = """workflow:
  - {id: plan, agent: planner}
  - id: each
    for_each: steps.plan.output.tasks
    step: {id: one, agent: echo, input: "{{ item }}"}
"""
    code, _, err, _ = _run(cli, tmp_path, {"tasks": "not a list"}, flow)
    _one_clear_failure(code, err, "step each failed", "gave a str, not a list")
    record = cli.workflow_transcript()
    assert [e["key"] for e in events(record, "step_end") if e["status"] == "ok"] == ["plan"]


def test_a_template_that_reads_past_the_data_fails_naming_the_step_and_the_field(
    cli: Cli, tmp_path: Path
) -> None:
    flow = """workflow:
  - {id: plan, agent: planner}
  - {id: use, agent: echo, input: "first: {{ steps.plan.output.tasks.first }}"}
"""
    code, _, err, _ = _run(cli, tmp_path, {"tasks": ["a", "b"]}, flow)
    _one_clear_failure(code, err, "step use failed", "first")


def test_an_until_that_fails_to_evaluate_ends_the_loop_with_its_error(cli: Cli, tmp_path: Path) -> None:
    flow = """workflow:
  - id: again
    loop:
      max_iterations: 3
      until: "steps.plan.output.tasks > 2"
      steps:
        - {id: plan, agent: planner}
"""
    code, _, err, _ = _run(cli, tmp_path, {"tasks": ["a"]}, flow)
    _one_clear_failure(code, err, "step again failed", "until")


def test_a_step_whose_model_fails_ends_the_workflow_with_the_models_reason(cli: Cli, tmp_path: Path) -> None:
    flow = "workflow:\n  - {id: plan, agent: planner}\n"
    code, _, err, _ = _run(cli, tmp_path, {"status": 500, "error": "the planner is out of order"}, flow)
    _one_clear_failure(code, err, "step plan failed", "out of order")


@pytest.mark.parametrize("json_output", [False, True])
def test_an_output_template_that_fails_at_the_end_keeps_every_step_recorded(
    cli: Cli, tmp_path: Path, json_output: bool
) -> None:
    flow = """workflow:
  output: "{{ steps.plan.output.tasks.missing.deeper }}"
  steps:
    - {id: plan, agent: planner}
"""
    models = Models({"planner": lambda body: {"tasks": ["a"]}, "echo": lambda body: "x"})
    with ScriptedServer(models) as server:
        path = team(tmp_path, server.base_url, {"planner": LOOSE, "echo": ""}, flow)
        done = cli("run", str(path), "-p", "go", *(["--json"] if json_output else []))
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert "workflow output" in (done.stdout if json_output else done.stderr)
    record = cli.workflow_transcript()
    assert [e["key"] for e in events(record, "step_end")] == ["plan"]
    assert [e["status"] for e in events(record, "workflow_end")] == ["error"]


def test_resuming_a_workflow_whose_team_file_is_gone_says_so(cli: Cli, tmp_path: Path) -> None:
    flow = "workflow:\n  - {id: plan, agent: planner}\n"
    code, _, _, path = _run(cli, tmp_path, {"status": 400, "error": "no"}, flow)
    assert code == 1
    record = cli.workflow_transcript()
    path.unlink()
    resumed = cli("resume", record.stem)
    assert resumed.returncode == 2, resumed.stderr
    assert "its team file" in resumed.stderr and "is gone" in resumed.stderr
    assert "Traceback" not in resumed.stderr


def test_a_step_whose_agent_cannot_open_its_tools_is_a_failed_step_on_error_decides(
    cli: Cli, tmp_path: Path
) -> None:
    import sys

    fake = Path(__file__).resolve().parent.parent / "tools_mcp" / "fake_mcp_server.py"
    down = f"tools:\n  - mcp: {{command: {sys.executable}, args: [{fake}, --exit-now]}}\n    id: down\n"
    flow = """workflow:
  - {id: plan, agent: planner}
  - {id: top, agent: broken, on_error: continue}
  - {id: last, agent: echo, input: "top was {{ steps.top.status }}"}
  - {id: again, agent: broken}
"""
    models = Models(
        {
            "planner": lambda body: {"tasks": []},
            "echo": lambda body: user_text(body),
            "broken": lambda body: "never",
        }
    )
    with ScriptedServer(models) as server:
        path = team(tmp_path, server.base_url, {"planner": LOOSE, "echo": "", "broken": down}, flow)
        done = cli("run", str(path), "-p", "go")
    _one_clear_failure(
        done.returncode, done.stderr, "step again failed", "agent broken could not start", "down"
    )
    record = cli.workflow_transcript()
    ends = {e["key"]: e["status"] for e in events(record, "step_end")}
    assert ends == {"plan": "ok", "top": "error", "last": "ok", "again": "error"}
    assert [e["output"] for e in events(record, "step_end") if e["key"] == "last"] == ["top was error"]
    assert [e["status"] for e in events(record, "workflow_end")] == ["error"]
    assert "broken" not in models.calls
