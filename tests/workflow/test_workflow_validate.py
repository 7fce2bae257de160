"""``runner validate`` on a team file's ``workflow:``: each mistake one located error, exit 2 (issue 17)."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from runner.cli import main

Check = Callable[[str], Result]

AGENTS = """\
version: 1
agents:
  planner:
    model: openai/gpt-4o-mini
    output:
      type: object
      required: [tasks]
      properties:
        title: {type: string}
        tasks:
          type: array
          items: {$ref: "#/$defs/task"}
      $defs:
        task:
          type: object
          properties:
            topic: {type: string}
            depth: {type: integer}
  researcher:
    model: openai/gpt-4o-mini
  reviewer:
    model: openai/gpt-4o-mini
    output:
      type: object
      properties:
        approved: {type: boolean}
        notes: {type: string}
  free:
    model: openai/gpt-4o-mini
    output: {type: object}
"""

#: plan -> for_each over plan.output.tasks -> review loop -> output: valid.
VALID = """\
workflow:
  name: research
  steps:
    - id: plan
      agent: planner
      input: "Plan research on {{ input }}"
    - id: research
      for_each: steps.plan.output.tasks
      as: task
      max_parallel: 2
      step:
        id: dig
        agent: researcher
        input: "Research {{ task.topic }} to depth {{ task.depth }}"
    - id: review
      loop:
        max_iterations: 3
        until: steps.check.output.approved or iteration >= 3
        steps:
          - id: check
            agent: reviewer
            input: |
              Round {{ iteration }} of {{ steps.plan.output.title }}:
              {% for finding in steps.research.output %}- {{ finding }}
              {% endfor %}
    - id: extra
      when: steps.check.status == 'ok' and steps.research.output | length > 0
      agent: free
      input: "{{ steps.check.output.notes }} {{ vars }}"
      vars:
        first: "{{ steps.research.output.0 }}"
  output: "{{ steps.extra.output.anything.goes }} {{ steps.plan.output.tasks[0]['topic'] }}"
"""


@pytest.fixture
def check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Check:
    """``check(workflow_yaml)``: write a team file with AGENTS and that workflow; run ``runner validate``."""
    monkeypatch.setitem(main._state, "debug", False)
    monkeypatch.chdir(tmp_path)

    def run(workflow: str) -> Result:
        (tmp_path / "team.yaml").write_text(AGENTS + textwrap.dedent(workflow), encoding="utf-8")
        result = CliRunner().invoke(main.app, ["validate", "team.yaml"])
        assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
        assert "Traceback" not in result.output
        return result

    return run


def _errors(result: Result) -> list[str]:
    assert result.exit_code == 2, result.output
    return result.output.splitlines()


def _line_of(text: str, needle: str) -> int:
    """The line of the team file (AGENTS + workflow) where ``needle`` first appears."""
    return next(i for i, line in enumerate((AGENTS + text).splitlines(), 1) if needle in line)


def test_a_valid_workflow_passes(check: Check) -> None:
    result = check(VALID)
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "team.yaml: ok (planner, researcher, reviewer, free)"


def test_a_valid_workflow_in_list_form_passes(check: Check) -> None:
    result = check(
        "workflow:\n  - id: a\n    agent: researcher\n"
        "  - id: b\n    agent: researcher\n    input: '{{ steps.a.output }}'\n"
    )
    assert result.exit_code == 0, result.output


def test_unknown_step_gets_did_you_mean(check: Check) -> None:
    text = VALID.replace("{{ steps.plan.output.title }}", "{{ steps.plna.output.title }}")
    line = _line_of(text, "Round {{ iteration }}")
    assert _errors(check(text)) == [
        f"team.yaml:{line}:1: workflow.steps[2].loop.steps[0].input: no step 'plna' (did you mean 'plan'?)"
    ]


def test_a_step_that_runs_later_is_refused(check: Check) -> None:
    text = VALID.replace('input: "Plan research on {{ input }}"', 'input: "{{ steps.check.output.notes }}"')
    line = _line_of(text, 'steps.check.output.notes }}"')
    assert _errors(check(text)) == [
        f"team.yaml:{line}:14: workflow.steps[0].input: steps.check runs later: its output is not ready here "
        "(hint: a step sees the steps before it)"
    ]


def test_a_parallel_sibling_is_not_ready(check: Check) -> None:
    text = """\
    workflow:
      - id: both
        parallel:
          - id: a
            agent: researcher
          - id: b
            agent: researcher
            input: "{{ steps.a.output }}"
      - id: after
        agent: researcher
        input: "{{ steps.a.output }} {{ steps.b.output }}"
    """
    line = _line_of(textwrap.dedent(text), 'input: "{{ steps.a.output }}"')
    assert _errors(check(text)) == [
        f"team.yaml:{line}:16: workflow[0].parallel[1].input: steps.a runs at the same time as this step "
        "(in one parallel): its output is not ready yet (hint: read it in a step after the parallel one)"
    ]


def test_the_step_inside_a_for_each_is_read_through_the_for_each(check: Check) -> None:
    text = VALID.replace("{{ steps.check.output.notes }}", "{{ steps.dig.output }}")
    line = _line_of(text, "steps.dig.output")
    assert _errors(check(text)) == [
        f"team.yaml:{line}:14: workflow.steps[3].input: steps.dig runs once per item inside for_each "
        "'research' (hint: read steps.research.output: the list of its outputs, in order)"
    ]


def test_duplicate_ids_anywhere_in_the_workflow(check: Check) -> None:
    text = VALID.replace("id: check", "id: dig")
    text = text.replace("steps.check.", "steps.dig.")
    first = _line_of(text, "id: dig")
    second = _line_of(text, "- id: dig")
    assert _errors(check(text)) == [
        f"team.yaml:{second}:17: workflow.steps[2].loop.steps[0].id: duplicate step id 'dig' "
        f"(first at line {first}) (hint: each step needs its own id)"
    ]


def test_a_field_the_schema_lacks_gets_did_you_mean(check: Check) -> None:
    text = VALID.replace("{{ steps.plan.output.title }}", "{{ steps.plan.output.titel }}")
    line = _line_of(text, "Round {{ iteration }}")
    assert _errors(check(text)) == [
        f"team.yaml:{line}:1: workflow.steps[2].loop.steps[0].input: steps.plan.output has no field 'titel' "
        "(did you mean 'title'?) (hint: the fields come from the agent's output: schema)"
    ]


def test_a_field_through_items_and_ref(check: Check) -> None:
    text = VALID.replace("{{ steps.plan.output.tasks[0]['topic'] }}", "{{ steps.plan.output.tasks.0.topik }}")
    line = _line_of(text, '  output: "{{')
    assert _errors(check(text)) == [
        f"team.yaml:{line}:11: workflow.output: steps.plan.output.tasks.0 has no field 'topik' "
        "(did you mean 'topic'?) (hint: the fields come from the agent's output: schema)"
    ]


def test_the_for_each_item_is_typed_by_the_list_it_comes_from(check: Check) -> None:
    text = VALID.replace("{{ task.depth }}", "{{ task.deepth }}")
    line = _line_of(text, "Research {{ task.topic }}")
    assert _errors(check(text)) == [
        f"team.yaml:{line}:16: workflow.steps[1].step.input: task has no field 'deepth' "
        "(did you mean 'depth'?) (hint: the fields come from the agent's output: schema)"
    ]


def test_a_field_path_into_a_text_output(check: Check) -> None:
    text = VALID.replace("{{ steps.research.output.0 }}", "{{ steps.research.output.0.summary }}")
    line = _line_of(text, "first: ")
    assert _errors(check(text)) == [
        f"team.yaml:{line}:16: workflow.steps[3].vars.first: steps.research.output.0 is text (its agent "
        "has no output: schema): it has no field 'summary' (hint: the fields come from the agent's output: "
        "schema)"
    ]


def test_status_and_an_open_object_are_anything(check: Check) -> None:
    # steps.extra.output.anything.goes: `free` has `type: object` without properties: not checked
    result = check(VALID.replace("steps.check.status ==", "steps.plan.status !="))
    assert result.exit_code == 0, result.output


def test_a_wrong_step_field_gets_did_you_mean(check: Check) -> None:
    text = VALID.replace("steps.check.status", "steps.check.stauts")
    line = _line_of(text, "when: ")
    assert _errors(check(text)) == [
        f"team.yaml:{line}:13: workflow.steps[3].when: steps.check has no 'stauts': a step has output and "
        "status (did you mean 'status'?)"
    ]


@pytest.mark.parametrize(
    ("expression", "what"),
    [
        ("steps.plan.output.title", "steps.plan.output.title is a string"),
        ("steps.plan.output", "steps.plan.output is an object"),
        ("steps.plan.output.tasks.0", "steps.plan.output.tasks.0 is an object"),
        ("input", "input is text"),
    ],
)
def test_for_each_over_something_that_is_not_a_list(check: Check, expression: str, what: str) -> None:
    text = VALID.replace("for_each: steps.plan.output.tasks", f"for_each: {expression}")
    line = _line_of(text, "for_each: ")
    assert _errors(check(text)) == [
        f"team.yaml:{line}:17: workflow.steps[1].for_each: for_each needs a list, and {what} "
        "(hint: name a field whose schema is type: array)"
    ]


def test_for_each_over_a_for_each_output_is_a_list(check: Check) -> None:
    text = VALID.replace(
        "    - id: review\n",
        "    - id: again\n      for_each: steps.research.output\n      step:\n        id: redo\n"
        "        agent: researcher\n        input: '{{ item }}'\n    - id: review\n",
    )
    result = check(text)
    assert result.exit_code == 0, result.output


def test_a_when_expression_with_a_syntax_error_is_located(check: Check) -> None:
    text = VALID.replace("when: steps.check.status == 'ok' and", "when: steps.check.status = 'done' and")
    line = _line_of(text, "when: ")
    assert _errors(check(text)) == [
        f"team.yaml:{line}:13: workflow.steps[3].when: expression: "
        "expected the end of the expression, got '='"
    ]


def test_an_until_expression_with_trailing_text_is_refused(check: Check) -> None:
    text = VALID.replace("until: steps.check.output.approved or", "until: steps.check.output.approved }} or")
    line = _line_of(text, "until: ")
    assert _errors(check(text)) == [
        f"team.yaml:{line}:16: workflow.steps[2].loop.until: expression: "
        "expected the end of the expression, got '}}'"
    ]


def test_template_syntax_errors_in_input_vars_and_output(check: Check) -> None:
    text = VALID.replace('"Plan research on {{ input }}"', '"Plan {{ input "')
    text = text.replace('first: "{{ steps.research.output.0 }}"', 'first: "{% if x %}"')
    text = text.replace('output: "{{ steps.extra', 'output: "{{ steps.extra | nofilter }}{{ steps.extra')
    lines = [_line_of(text, "Plan {{"), _line_of(text, "first: "), _line_of(text, '  output: "{{')]
    assert _errors(check(text)) == [
        f"team.yaml:{lines[0]}:14: workflow.steps[0].input: template: unexpected end of template, "
        "expected 'end of print statement'.",
        f"team.yaml:{lines[1]}:16: workflow.steps[3].vars.first: template: Unexpected end of template. "
        "Jinja was looking for the following tags: 'elif' or 'else' or 'endif'. "
        "The innermost block that needs to be closed is 'if'.",
        f"team.yaml:{lines[2]}:11: workflow.output: template: unknown filter 'nofilter'",
    ]


def test_a_syntax_error_on_a_later_line_of_a_block_template(check: Check) -> None:
    text = VALID.replace("{% endfor %}", "{% endfro %}")
    line = _line_of(text, "{% endfro %}")
    (error,) = _errors(check(text))
    assert error.startswith(f"team.yaml:{line}:1: workflow.steps[2].loop.steps[0].input: template: ")
    assert "endfro" in error


def test_a_loop_without_max_iterations(check: Check) -> None:
    text = VALID.replace("        max_iterations: 3\n", "")
    line = _line_of(text, "loop:")
    assert _errors(check(text)) == [
        f"team.yaml:{line + 1}:9: workflow.steps[2].loop: loop 'review' has no max_iterations "
        "(hint: give the most iterations it may run: max_iterations: 5)"
    ]


def test_an_agent_the_file_does_not_define(check: Check) -> None:
    text = VALID.replace("agent: reviewer", "agent: reviwer")
    line = _line_of(text, "agent: reviwer")
    assert _errors(check(text)) == [
        f"team.yaml:{line}:20: workflow.steps[2].loop.steps[0].agent: no agent named 'reviwer' in this file "
        "(did you mean 'reviewer'?) (hint: agents here: planner, researcher, reviewer, free)"
    ]


@pytest.mark.parametrize(
    ("old", "new", "name", "close"),
    [
        ("{{ input }}", "{{ inptu }}", "inptu", "input"),
        ("{{ task.topic }}", "{{ tasks.topic }}", "tasks", "task"),
        ("Round {{ iteration }}", "Round {{ iteraton }}", "iteraton", "iteration"),
    ],
)
def test_an_undefined_name(check: Check, old: str, new: str, name: str, close: str) -> None:
    result = check(VALID.replace(old, new, 1))
    (error,) = _errors(result)
    assert f": undefined name '{name}' (did you mean '{close}'?)" in error


@pytest.mark.parametrize(
    ("old", "new", "name"),
    [
        # `iteration` outside its loop; the for_each item outside its step
        ('input: "Plan research on {{ input }}"', 'input: "{{ iteration }}"', "iteration"),
        ("{{ steps.check.output.notes }}", "{{ task }}", "task"),
    ],
)
def test_names_are_visible_only_where_they_are_bound(check: Check, old: str, new: str, name: str) -> None:
    (error,) = _errors(check(VALID.replace(old, new)))
    assert f": undefined name '{name}'" in error


def test_every_problem_is_reported_in_one_run_and_as_json(check: Check, tmp_path: Path) -> None:
    text = VALID.replace("agent: reviewer", "agent: reviwer").replace("        max_iterations: 3\n", "")
    text = text.replace("{{ task.depth }}", "{{ task.deepth }}")
    assert len(_errors(check(text))) == 3
    result = CliRunner().invoke(main.app, ["validate", "--json", "team.yaml"])
    assert result.exit_code == 2
    (entry,) = json.loads(result.stdout)
    assert [e["path"] for e in entry["errors"]] == [
        "workflow.steps[1].step.input",
        "workflow.steps[2].loop",
        "workflow.steps[2].loop.steps[0].agent",
    ]


def test_a_workflow_the_schema_refuses_is_not_checked_further(check: Check) -> None:
    (error,) = _errors(check("workflow:\n  - id: a\n    agent: researcher\n    color: red\n"))
    assert "color" in error


def test_a_schema_that_refers_to_itself_does_not_hang_the_check(check: Check, tmp_path: Path) -> None:
    looped = '{anyOf: [{$ref: "#"}, {type: object, properties: {a: {$ref: "#"}}}, {$ref: "#"}, {$ref: "#"}]}'
    text = VALID.replace("{{ steps.extra.output.anything.goes }}", "{{ steps.extra.output.a.a.a.a.a.a.b }}")
    (tmp_path / "team.yaml").write_text(
        AGENTS.replace("output: {type: object}", f"output: {looped}") + text, encoding="utf-8"
    )
    result = CliRunner().invoke(main.app, ["validate", "team.yaml"])
    # answered, without a RecursionError or a blow-up: `a` leads back to the schema, whose object has no `b`
    assert result.exit_code == 2, result.output
    assert "workflow.output: steps.extra.output.a.a.a.a.a.a has no field 'b'" in result.output
    from runner.agentfile.workflow_types import ANY, child, describe, is_list, of_schema

    shape = of_schema({"anyOf": [{"$ref": "#"}, {"type": "object", "properties": {"a": {"$ref": "#"}}}]})
    assert describe(shape) == "any | object{a: any}"
    wide = {"anyOf": [{"$ref": "#/$defs/x"}] * 20, "$defs": {"x": {"anyOf": [{"$ref": "#"}] * 20}}}
    assert (describe(of_schema(wide)), is_list(of_schema(wide))) == ("any", None)
    assert child(of_schema(wide), "a") == ANY


def test_an_expression_nested_too_deeply_is_an_error_not_a_crash(check: Check) -> None:
    deep = "(" * 400 + "1" + ")" * 400
    text = VALID.replace("until: steps.check.output.approved or iteration >= 3", f"until: '{deep}'")
    (error,) = _errors(check(text))
    assert error.endswith("workflow.steps[2].loop.until: expression: it nests too deeply")


def test_a_var_given_on_the_command_line_is_a_known_name(check: Check) -> None:
    text = VALID.replace("{{ steps.check.output.notes }}", "{{ audience }}")
    assert "undefined name 'audience'" in _errors(check(text))[0]
    result = CliRunner().invoke(main.app, ["validate", "team.yaml", "--var", "audience=experts"])
    assert result.exit_code == 0, result.output


def test_a_method_call_is_not_a_field(check: Check) -> None:
    text = VALID.replace("{{ steps.check.output.notes }}", "{{ steps.plan.output.items() | list }}")
    assert check(text).exit_code == 0
    text = VALID.replace("{{ steps.check.output.notes }}", "{{ steps.plan.output.itemz }}")
    assert "steps.plan.output has no field 'itemz'" in _errors(check(text))[0]


def test_the_workflow_output_schema_must_be_a_usable_schema(check: Check) -> None:
    text = VALID.replace("  output: ", "  output_schema: {type: objekt}\n  output: ")
    line = _line_of(text, "output_schema")
    assert _errors(check(text)) == [
        f"team.yaml:{line}:25: workflow.output_schema.type: not a valid JSON Schema: unknown type 'objekt' "
        "(did you mean 'object'?)"
    ]


def test_an_output_schema_kept_in_a_file_types_the_references(check: Check, tmp_path: Path) -> None:
    (tmp_path / "review.schema.json").write_text(
        json.dumps(
            {"type": "object", "properties": {"approved": {"type": "boolean"}, "notes": {"type": "string"}}}
        ),
        encoding="utf-8",
    )
    agents = AGENTS.replace(
        "    output:\n      type: object\n      properties:\n        approved: {type: boolean}\n"
        "        notes: {type: string}\n",
        "    output: {file: review.schema.json}\n",
    )
    assert agents != AGENTS
    text = VALID.replace("{{ steps.check.output.notes }}", "{{ steps.check.output.note }}")
    (tmp_path / "team.yaml").write_text(agents + text, encoding="utf-8")
    result = CliRunner().invoke(main.app, ["validate", "team.yaml"])
    assert result.exit_code == 2
    assert "steps.check.output has no field 'note' (did you mean 'notes'?)" in result.output


LOOP = """\
workflow:
  - id: plan
    agent: planner
  - id: review
    loop:
      max_iterations: 3
      until: steps.check.output.approved
      steps:
        - id: revise
          agent: researcher
          input: "{{ steps.plan.output.title }} FEEDBACK"
        - id: check
          agent: reviewer
          input: "{{ steps.revise.output }}"
  - id: after
    agent: researcher
    input: "{{ steps.review.output.notes }} {{ steps.revise.output }}"
"""


def test_a_later_step_of_the_same_loop_needs_a_guard(check: Check) -> None:
    text = LOOP.replace("FEEDBACK", "{{ steps.check.output.notes }}")
    line = _line_of(text, "{{ steps.plan.output.title }}")
    assert _errors(check(text)) == [
        f"team.yaml:{line}:18: workflow[1].loop.steps[0].input: steps.check runs later in this loop: in its "
        "first iteration it has no output yet (hint: to read the previous iteration's, test it first: "
        "{% if steps.check is defined %})"
    ]


@pytest.mark.parametrize(
    "guarded",
    [
        "{% if steps.check is defined %}{{ steps.check.output.notes }}{% endif %}",
        "{{ steps.check.output.notes if steps.check is defined else '' }}",
    ],
)
def test_the_previous_iteration_read_under_a_guard_is_checked_against_its_schema(
    check: Check, guarded: str
) -> None:
    assert check(LOOP.replace("FEEDBACK", guarded)).exit_code == 0
    (error,) = _errors(check(LOOP.replace("FEEDBACK", guarded.replace(".notes", ".notse"))))
    assert "steps.check.output has no field 'notse' (did you mean 'notes'?)" in error


def test_a_when_that_tests_a_loop_step_guards_the_input(check: Check) -> None:
    text = LOOP.replace(
        '          agent: researcher\n          input: "{{ steps.plan.output.title }} FEEDBACK"',
        "          agent: researcher\n          when: steps.check is defined\n"
        '          input: "{{ steps.check.output.notes }}"',
    )
    assert "when: steps.check is defined" in text
    assert check(text).exit_code == 0


def test_a_loop_output_is_its_last_step_and_a_parallel_output_maps_its_children(check: Check) -> None:
    assert check(LOOP.replace("FEEDBACK", "")).exit_code == 0
    (error,) = _errors(
        check(LOOP.replace("FEEDBACK", "").replace("steps.review.output.notes", "steps.review.output.note"))
    )
    assert "steps.review.output has no field 'note' (did you mean 'notes'?)" in error
    parallel = """\
    workflow:
      - id: both
        parallel:
          - {id: a, agent: reviewer}
          - {id: b, agent: researcher}
      - id: after
        agent: researcher
        input: "{{ steps.both.output.a.notes }} {{ steps.both.output.b }} {{ steps.both.output.c }}"
    """
    (error,) = _errors(check(parallel))
    assert error.endswith(
        "workflow[1].input: steps.both.output has no field 'c' (hint: the fields come from "
        "the agent's output: schema)"
    )
