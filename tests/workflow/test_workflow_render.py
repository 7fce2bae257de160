"""``runner render team.yaml`` with a ``workflow:``: the steps as a tree, with output types (issue 17)."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from runner.cli import main

Invoke = Callable[..., Result]

TEAM = """\
version: 1
agents:
  planner:
    model: openai/gpt-4o-mini
    output:
      python: wfrender_models:Plan
  researcher:
    model: openai/gpt-4o-mini
  reviewer:
    model: openai/gpt-4o-mini
    output:
      type: object
      properties:
        approved: {type: boolean}
        notes: {type: string}
workflow:
  name: research
  steps:
    - id: plan
      agent: planner
    - id: research
      for_each: steps.plan.output.tasks
      as: task
      max_parallel: 2
      step:
        id: dig
        agent: researcher
        input: "Research {{ task.topic }}"
    - id: checks
      parallel:
        - id: check
          agent: reviewer
          input: "{{ steps.research.output | join(', ') }}"
        - id: second
          agent: reviewer
          when: input | length > 10
          on_error: continue
    - id: review
      loop:
        max_iterations: 3
        until: steps.again.output.approved
        steps:
          - id: again
            agent: reviewer
            input: |
              Round {{ iteration }}
              {{ steps.check.output.notes }}
            vars:
              round: "{{ iteration }}"
  output: "{{ steps.again.output.notes }}"
"""

MODELS = """\
from pydantic import BaseModel


class Task(BaseModel):
    topic: str


class Plan(BaseModel):
    title: str
    tasks: list[Task]
"""


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Invoke:
    monkeypatch.setitem(main._state, "debug", False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "team.yaml").write_text(TEAM, encoding="utf-8")
    (tmp_path / "wfrender_models.py").write_text(MODELS, encoding="utf-8")
    monkeypatch.delitem(__import__("sys").modules, "wfrender_models", raising=False)

    def invoke(*args: str) -> Result:
        result = CliRunner().invoke(main.app, list(args))
        assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
        assert "Traceback" not in result.output
        return result

    return invoke


def test_render_prints_the_workflow_as_a_tree_with_output_types(cli: Invoke) -> None:
    result = cli("render", "team.yaml")
    assert result.exit_code == 0, result.output
    assert result.output == textwrap.dedent(
        """\
        # workflow: research (team.yaml)
        ├─ plan: agent planner -> object{title: string, tasks: array}
        │    input: {{ input }}
        ├─ research: for_each steps.plan.output.tasks as task (max_parallel 2) -> array[text]
        │  └─ dig: agent researcher -> text
        │       input: Research {{ task.topic }}
        ├─ checks: parallel -> object{check: object, second: object}
        │  ├─ check: agent reviewer -> object{approved: boolean, notes: string}
        │  │    input: {{ steps.research.output | join(', ') }}
        │  └─ second: agent reviewer -> object{approved: boolean, notes: string}
        │       when: input | length > 10
        │       on_error: continue
        │       input: {{ input }}
        └─ review: loop until steps.again.output.approved (max_iterations 3) -> object{approved: boolean, notes: string}
           └─ again: agent reviewer -> object{approved: boolean, notes: string}
                input: Round {{ iteration }}
                       {{ steps.check.output.notes }}
                vars.round: {{ iteration }}
        output: {{ steps.again.output.notes }}
        """  # noqa: E501  (the tree is one line per step)
    )


def test_render_json_has_the_same_tree(cli: Invoke) -> None:
    result = cli("render", "team.yaml", "--json")
    assert result.exit_code == 0, result.output
    tree = json.loads(result.stdout)
    assert tree["workflow"] == "research"
    plan, research, checks, review = tree["steps"]
    assert plan == {
        "id": "plan",
        "kind": "agent",
        "agent": "planner",
        "input": "{{ input }}",
        "output_type": "object{title: string, tasks: array}",
    }
    assert research["output_type"] == "array[text]"
    assert research["step"]["id"] == "dig"
    assert [s["id"] for s in checks["steps"]] == ["check", "second"]
    assert review["max_iterations"] == 3
    assert checks["output_type"] == "object{check: object, second: object}"
    assert review["output_type"] == "object{approved: boolean, notes: string}"  # its last step's
    assert review["steps"][0]["vars"] == {"round": "{{ iteration }}"}
    assert tree["output"] == "{{ steps.again.output.notes }}"


def test_a_python_model_types_the_field_checks_too(cli: Invoke, tmp_path: Path) -> None:
    team = tmp_path / "team.yaml"
    team.write_text(TEAM.replace("{{ task.topic }}", "{{ task.topik }}"), encoding="utf-8")
    result = cli("validate", "team.yaml")
    assert result.exit_code == 2
    assert "task has no field 'topik' (did you mean 'topic'?)" in result.output


def test_render_of_an_invalid_workflow_shows_the_located_errors(cli: Invoke, tmp_path: Path) -> None:
    team = tmp_path / "team.yaml"
    team.write_text(TEAM.replace("steps.check.output.notes", "steps.chek.output.notes"), encoding="utf-8")
    result = cli("render", "team.yaml")
    assert result.exit_code == 2
    assert (
        "team.yaml:47:1: workflow.steps[3].loop.steps[0].input: no step 'chek' (did you mean 'check'?)"
        in (result.output)
    )


def test_render_with_agent_still_renders_one_agent(cli: Invoke) -> None:
    result = cli("render", "team.yaml", "--agent", "reviewer", "-p", "hi")
    assert result.exit_code == 0, result.output
    assert result.output.startswith("# agent: reviewer (team.yaml)\n")
    assert "workflow" not in result.output


@pytest.mark.parametrize(
    ("top", "own", "expected"),
    [("", "", "team"), ("name: crew\n", "", "crew"), ("name: crew\n", "  name: pipeline\n", "pipeline")],
)
def test_the_workflow_is_named_by_its_own_name_else_the_team_files_else_the_file(
    tmp_path: Path, cli: Invoke, top: str, own: str, expected: str
) -> None:
    from runner.agentfile.files import load_file
    from runner.agentfile.workflow import build_workflow

    path = tmp_path / "team.yaml"
    path.write_text(
        f"version: 1\n{top}agents:\n  solo: {{model: openai/gpt-4o-mini}}\n"
        f"workflow:\n{own}  steps:\n    - {{id: only, agent: solo}}\n",
        encoding="utf-8",
    )
    workflow = build_workflow(load_file(path).document)
    assert workflow is not None and workflow.name == expected
    rendered = cli("render", str(path))
    assert rendered.exit_code == 0, rendered.output
    assert f"# workflow: {expected} " in rendered.stdout


MULTI_LINE = """\
version: 1
agents:
  writer:
    model: openai/gpt-4o-mini
workflow:
  steps:
    - id: review
      loop:
        max_iterations: 2
        until: |-
          steps.check.output
          and iteration > 1
        steps:
          - id: check
            agent: writer
            when: |-
              iteration
              > 0
    - id: last
      agent: writer
  output: |
    Result:
    {{ steps.last.output }}
"""


def test_multi_line_templates_and_expressions_keep_the_tree(cli: Invoke, tmp_path: Path) -> None:
    # issue 23 item 21: a multi-line `until`, `when` or `output` broke the tree's lines
    (tmp_path / "multi.yaml").write_text(MULTI_LINE, encoding="utf-8")
    result = cli("render", "multi.yaml")
    assert result.exit_code == 0, result.output
    assert result.output == textwrap.dedent(
        """\
        # workflow: multi (multi.yaml)
        ├─ review: loop until steps.check.output and iteration > 1 (max_iterations 2) -> text
        │  └─ check: agent writer -> text
        │       when: iteration > 0
        │       input: {{ input }}
        └─ last: agent writer -> text
             input: {{ input }}
        output: Result:
                {{ steps.last.output }}
        """
    )
