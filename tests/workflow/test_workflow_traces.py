"""``runner run team.yaml --otel``: the workflow is an ``invoke_workflow`` span, each step a ``step``
span under it, and each step's agent run an ``invoke_agent`` span under its step (a real OTLP
receiver on 127.0.0.1)."""

from __future__ import annotations

from pathlib import Path

from runner.testing import ScriptedServer
from tests.telemetry.receiver import otlp_receiver
from tests.workflow.helpers import Cli, Models, team, user_text

WORKFLOW = """\
workflow:
  name: pipeline
  steps:
    - id: draft
      agent: writer
      input: "{{ input }}"
    - id: review
      agent: reviewer
      input: "{{ steps.draft.output }}"
"""


def test_a_workflow_run_is_a_span_with_its_steps_and_their_agents_beneath(cli: Cli, tmp_path: Path) -> None:
    models = Models(
        {"writer": lambda b: "draft of " + user_text(b), "reviewer": lambda b: "ok: " + user_text(b)}
    )
    with ScriptedServer(models, repeat=True) as server, otlp_receiver() as receiver:
        path = team(tmp_path, server.base_url, {"writer": "", "reviewer": ""}, WORKFLOW)
        cli.env["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver.url
        done = cli.process("run", str(path), "-p", "the plan", "--otel")
        assert done.returncode == 0, done.stderr
        assert "ok: draft of the plan" in done.stdout
        spans = list(receiver.spans)
    workflow = next(s for s in spans if s.name == "invoke_workflow pipeline")
    assert workflow.parent_span_id == "" and workflow.attributes["gen_ai.operation.name"] == "invoke_workflow"
    steps = {s.name: s for s in spans if s.name.startswith("step ")}
    assert set(steps) == {"step draft", "step review"}
    assert {s.parent_span_id for s in steps.values()} == {workflow.span_id}
    assert {s.trace_id for s in spans} == {workflow.trace_id}, [s.name for s in spans]
    agents = {s.name: s for s in spans if s.name.startswith("invoke_agent ")}
    assert agents["invoke_agent writer"].parent_span_id == steps["step draft"].span_id
    assert agents["invoke_agent reviewer"].parent_span_id == steps["step review"].span_id
    chats = [s for s in spans if s.name.startswith("chat ")]
    assert {s.parent_span_id for s in chats} == {a.span_id for a in agents.values()}
