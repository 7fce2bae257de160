"""A served workflow runs within a budget and fans out to at most ``max_items`` (issue 23, item 8).

One 32 KB request (or the planner answer it provoked) started 3,000 tasks, 3,000 model calls and
3,000 transcripts. Served, the fan-out cap refuses such a list with an error naming the cap and the
count, and a workflow whose ``limits`` set none runs within the server's default budget.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import openai
import pytest

from runner.serve.workflow_run import SERVED_MAX_STEPS, SERVED_MAX_TOKENS, served_workflow
from runner.testing import ScriptedServer
from tests.workflow.helpers import Models, team, user_text

PLANNER = """output:
  type: object
  required: [tasks]
  properties:
    tasks: {type: array, items: {type: string}}
"""

WORKFLOW = """workflow:
  name: research
  steps:
    - id: plan
      agent: planner
      input: "plan: {{{{ input }}}}"
    - id: research
      for_each: steps.plan.output.tasks
      as: task
      max_parallel: 8{cap}
      step: {{id: one, agent: researcher, input: "{{{{ task }}}}"}}
"""


def serve(
    scripted: Callable[..., ScriptedServer],
    agent_files: Any,
    serve_app: Callable[..., Any],
    *,
    tasks: int,
    cap: str = "",
) -> tuple[Any, Models]:
    models = Models(
        {
            "planner": lambda body: {"tasks": [f"t{n}" for n in range(tasks)]},
            "researcher": lambda body: user_text(body).upper(),
        }
    )
    server = scripted(models)
    team(agent_files.root, server.base_url, {"planner": PLANNER, "researcher": ""}, WORKFLOW.format(cap=cap))
    return serve_app([agent_files.root]), models


def test_a_served_request_whose_plan_has_3000_items_is_refused_at_the_cap(
    scripted: Callable[..., ScriptedServer], agent_files: Any, serve_app: Callable[..., Any], home: Path
) -> None:
    served, models = serve(scripted, agent_files, serve_app, tasks=3000)
    with pytest.raises(openai.APIStatusError) as refused:
        served.openai().chat.completions.create(
            model="research", messages=[{"role": "user", "content": "everything " * 3000}]
        )
    assert refused.value.status_code == 502
    error = refused.value.body
    assert isinstance(error, dict) and error["code"] == "workflow_failed"
    assert "gave 3000 items, more than its max_items (100)" in error["message"]
    assert refused.value.response.headers.get("x-should-retry") == "false"
    assert models.calls == {"planner": 1}
    assert len(list((home / "sessions").glob("*.jsonl"))) == 2  # the workflow's and the plan's


def test_a_served_workflow_without_limits_stops_at_the_servers_default_budget(
    scripted: Callable[..., ScriptedServer], agent_files: Any, serve_app: Callable[..., Any]
) -> None:
    # the file lets the fan-out through (max_items 500) but sets no limits: the server's apply
    served, models = serve(scripted, agent_files, serve_app, tasks=150, cap="\n      max_items: 500")
    with pytest.raises(openai.APIStatusError) as stopped:
        served.openai().chat.completions.create(model="research", messages=[{"role": "user", "content": "x"}])
    error = stopped.value.body
    assert isinstance(error, dict) and error["code"] == "workflow_limit", error
    assert f"the workflow ran {SERVED_MAX_STEPS} agent steps (limits.max_steps)" in error["message"]
    assert "the server's default limits.max_steps for a served workflow that sets none" in error["message"]
    assert models.calls == {"planner": 1, "researcher": SERVED_MAX_STEPS - 1}


def test_the_files_own_limits_win_over_the_servers_defaults(
    scripted: Callable[..., ScriptedServer], agent_files: Any, serve_app: Callable[..., Any]
) -> None:
    served, models = serve(scripted, agent_files, serve_app, tasks=3)
    workflow = served.holder.workflow("research").workflow
    defaulted = served_workflow(workflow).limits
    assert (defaulted.max_steps, defaulted.max_tokens) == (SERVED_MAX_STEPS, SERVED_MAX_TOKENS)
    own = dataclasses.replace(
        workflow, limits=dataclasses.replace(workflow.limits, max_steps=500, max_cost_usd=1.0)
    )
    kept = served_workflow(own).limits
    assert (kept.max_steps, kept.max_tokens, kept.max_cost_usd) == (500, None, 1.0)
    answer = served.openai().chat.completions.create(
        model="research", messages=[{"role": "user", "content": "x"}]
    )
    assert answer.choices[0].message.content == '["T0", "T1", "T2"]'
    assert models.calls == {"planner": 1, "researcher": 3}
