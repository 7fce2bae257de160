"""``for_each`` fans out to at most ``max_items`` items (issue 23, item 8).

One prompt-injected planner answer of 3,000 tasks started 3,000 model calls and transcripts. A
list longer than the step's ``max_items`` (default 100) fails the step before any item starts, with
an error naming the cap and the count; the file can raise (or lower) the cap.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from runner.agentfile.files import load_file
from runner.agentfile.workflow import DEFAULT_MAX_ITEMS, build_workflow
from runner.runtime.settings import RuntimeSettings
from runner.testing import ScriptedServer
from runner.workflow import WorkflowEngine, WorkflowResult, open_record
from tests.workflow.helpers import Models, team, user_text

PLANNER = """output:
  type: object
  required: [tasks]
  properties:
    tasks: {type: array, items: {type: string}}
"""

FAN_OUT = """workflow:
  - id: plan
    agent: planner
  - id: research
    for_each: steps.plan.output.tasks
    as: task
    max_parallel: 8{cap}
    step: {{id: one, agent: researcher, input: "{{{{ task }}}}"}}
"""


def run(tmp_path: Path, tasks: int, *, cap: int | None = None) -> tuple[WorkflowResult, Models]:
    models = Models(
        {
            "planner": lambda body: {"tasks": [f"task {n}" for n in range(tasks)]},
            "researcher": lambda body: user_text(body).upper(),
        }
    )
    body = FAN_OUT.format(cap="" if cap is None else f"\n    max_items: {cap}")
    tmp_path.mkdir(parents=True, exist_ok=True)
    with ScriptedServer(models) as server:
        path = team(tmp_path, server.base_url, {"planner": PLANNER, "researcher": ""}, body)
        workflow = build_workflow(load_file(path).document)
        assert workflow is not None
        settings = RuntimeSettings(home=tmp_path / "home")
        record = open_record(
            settings.home, workflow="team", path=path, input="go", variables={}, secrets=frozenset()
        )
        engine = WorkflowEngine(path, workflow, settings, input="go", variables={}, record=record)
        result = asyncio.run(engine.run())
    return result, models


def test_a_planner_answer_of_3000_items_is_refused_at_the_cap_without_starting_one(tmp_path: Path) -> None:
    result, models = run(tmp_path, 3000)
    assert result.exit_code == 1 and result.status == "error"
    (note,) = result.notes
    assert note == (
        "step research failed: for_each 'steps.plan.output.tasks' gave 3000 items, more than its "
        f"max_items ({DEFAULT_MAX_ITEMS}); no item was started (raise max_items on the step to allow more)"
    )
    assert models.calls == {"planner": 1}  # not one of the 3,000 researcher calls
    transcripts = list((tmp_path / "home" / "sessions").glob("*.jsonl"))
    assert len(transcripts) == 2  # the workflow's and the planner's


def test_max_items_in_the_file_raises_or_lowers_the_cap(tmp_path: Path) -> None:
    lowered, models = run(tmp_path / "low", 3, cap=2)
    assert lowered.exit_code == 1 and "gave 3 items, more than its max_items (2)" in lowered.notes[0]
    assert models.calls == {"planner": 1}
    raised, models = run(tmp_path / "high", DEFAULT_MAX_ITEMS + 1, cap=DEFAULT_MAX_ITEMS + 50)
    assert raised.exit_code == 0, raised.notes
    assert len(raised.output) == DEFAULT_MAX_ITEMS + 1 and raised.output[-1] == f"TASK {DEFAULT_MAX_ITEMS}"
    assert models.calls == {"planner": 1, "researcher": DEFAULT_MAX_ITEMS + 1}


def test_max_items_below_one_is_a_located_error(tmp_path: Path) -> None:
    from runner.agentfile.files import inspect_file

    body = FAN_OUT.format(cap="\n    max_items: 0")
    path = team(tmp_path, "http://127.0.0.1:9/v1", {"planner": PLANNER, "researcher": ""}, body)
    _, errors = inspect_file(path)
    assert [(e.path, e.line, e.message) for e in errors] == [
        ("workflow[1].max_items", 19, "0 is out of range: must be at least 1")
    ]
