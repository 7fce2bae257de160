"""One pass finds every mistake: unset variables, schema errors, semantic ones and team references."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.agentfile import check_file, load_agent
from runner.errors import ConfigError, ConfigErrors

#: A team file with mistakes of every kind; each line of EXPECTED names one of them.
TEAM = """\
version: 1
agents:
  lead:
    model:
      id: openai/gpt-4o-mini
      api_base: ${H13_UNSET_BASE}
      api_key: sk-literal-key
    function_calling: nativ
    prompts:
      system: "Answer in {{ styel }} style."
    vars:
      style: plain
    tools:
      - python: no_such_module_h13:run
      - agent: "#nobody"
    limits:
      max_steps: ${H13_UNSET_STEPS}
      max_turns: -3
  helper:
    extends: missing_base.yaml
    function_calling: prompt
"""

EXPECTED = [
    (6, 17, "agents.lead.model.api_base", "environment variable H13_UNSET_BASE is not set"),
    (7, 16, "agents.lead.model.api_key", "a literal API key is not allowed"),
    (8, 23, "agents.lead.function_calling", '"nativ" is not one of'),
    (
        10,
        15,
        "agents.lead.prompts.system",
        "template uses undefined variable 'styel' (did you mean 'style'?)",
    ),
    (14, 17, "agents.lead.tools[0].python", "cannot import module 'no_such_module_h13'"),
    (15, 16, "agents.lead.tools[1].agent", "no agent named 'nobody' in this file"),
    (17, 18, "agents.lead.limits.max_steps", "environment variable H13_UNSET_STEPS is not set"),
    (18, 18, "agents.lead.limits.max_turns", "-3 is out of range"),
    (20, 14, "agents.helper.extends", "no such file: missing_base.yaml"),
]


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def _located(errors: list[ConfigError]) -> list[tuple[int, int, str, str]]:
    return [(e.line, e.column, e.path, e.message) for e in errors]


def test_one_pass_reports_every_kind_of_mistake_in_file_order(tmp_path: Path) -> None:
    path = _write(tmp_path, "team.yaml", TEAM)
    errors = check_file(path, env={})
    found = _located(errors)
    assert len(found) == len(EXPECTED), "\n".join(map(str, errors))
    for (line, column, where, message), expected in zip(found, EXPECTED, strict=True):
        assert (line, column, where) == expected[:3]
        assert expected[3] in message
    assert all(e.file == str(path) for e in errors)


def test_run_path_reports_every_mistake_of_the_chosen_agent_at_once(tmp_path: Path) -> None:
    path = _write(tmp_path, "team.yaml", TEAM)
    with pytest.raises(ConfigErrors) as caught:
        load_agent(path, agent="lead", env={})
    paths = [e.path for e in caught.value]
    assert "agents.lead.model.api_base" in paths  # an unset variable ...
    assert "agents.lead.function_calling" in paths  # ... does not hide the schema errors ...
    assert "agents.lead.tools[0].python" in paths  # ... nor the semantic ones
    assert "agents.helper.extends" in paths  # a broken member of the file is still a broken file


def test_a_stand_in_for_an_unset_variable_gets_no_second_error(tmp_path: Path) -> None:
    path = _write(
        tmp_path, "a.yaml", "version: 1\nname: a\nlimits:\n  max_steps: ${H13_UNSET}\n  max_turns: 0\n"
    )
    found = _located(check_file(path, env={}))
    assert [(line, where) for line, _, where, _ in found] == [
        (4, "limits.max_steps"),
        (5, "limits.max_turns"),
    ]
    assert "not set" in found[0][3]  # not also "expected an integer, got "${H13_UNSET}""


def test_an_unset_api_key_variable_is_not_taken_for_a_literal_key(tmp_path: Path) -> None:
    path = _write(tmp_path, "a.yaml", "version: 1\nname: a\nmodel:\n  id: m\n  api_key: ${H13_UNSET_KEY}\n")
    (error,) = check_file(path, env={})
    assert error.message == "environment variable H13_UNSET_KEY is not set"


def test_a_vars_mistake_does_not_hide_the_names_it_declares(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "a.yaml",
        "version: 1\nname: a\nvars:\n  Bad-Name: 1\n  style: plain\n"
        "prompts:\n  system: '{{ style }} {{ nope }}'\n",
    )
    found = _located(check_file(path, env={}))
    assert [where for _, _, where, _ in found] == ["vars.Bad-Name", "prompts.system"]
    assert "'nope'" in found[1][3] and "'style'" not in found[1][3]


def test_a_part_the_schema_refused_is_not_looked_into_but_its_siblings_are(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "a.yaml",
        "version: 1\nname: a\nprompts:\n  system: {file: 3}\n  status: '{{ nope }}'\n"
        "tools:\n  - python: 5\n  - python: no_such_module_h13\n"
        "hooks:\n  turn_pre:\n    - python: 7\n    - python: no_such_module_h13:hook\n",
    )
    found = _located(check_file(path, env={}))
    assert [(line, where) for line, _, where, _ in found] == [
        (4, "prompts.system.file"),
        (5, "prompts.status"),
        (7, "tools[0].python"),
        (8, "tools[1].python"),
        (11, "hooks.turn_pre[0].python"),
        (12, "hooks.turn_pre[1].python"),
    ]
    assert found[0][3].startswith("expected a string")
    assert "undefined variable 'nope'" in found[1][3]
    assert found[2][3].startswith("expected a string")
    assert "cannot import module" in found[3][3]
    assert found[4][3].startswith("expected a string")
    assert "cannot import module" in found[5][3]


def test_a_broken_extends_leaves_out_only_what_the_base_would_have_given(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "child.yaml",
        "extends: missing_base.yaml\nfunction_calling: nativ\n"
        "prompts:\n  system: 'Hi {{ who }}'\ntools:\n  - python: no_such_module_h13\n",
    )
    found = _located(check_file(path, env={}))
    messages = [message for _, _, _, message in found]
    assert [where for _, _, where, _ in found] == ["extends", "function_calling", "tools[0].python"]
    assert messages[0].startswith("no such file")
    # no "missing required key 'version'/'name'" (the base may give them), no undefined 'who'
    assert not any("missing required key" in m or "undefined variable" in m for m in messages)


def test_an_extends_that_is_not_a_path_gets_one_error(tmp_path: Path) -> None:
    path = _write(tmp_path, "a.yaml", "version: 1\nname: a\nextends: [1]\nfunction_calling: nativ\n")
    found = _located(check_file(path, env={}))
    assert [(line, where) for line, _, where, _ in found] == [(3, "extends"), (4, "function_calling")]
    assert found[0][3] == "extends must be a path to another agent file"


def test_mistakes_in_an_extended_file_are_reported_with_the_child_s(tmp_path: Path) -> None:
    _write(tmp_path, "base.yaml", "version: 1\nmodel:\n  id: ${H13_UNSET_MODEL}\nlimits:\n  max_steps: 0\n")
    child = _write(
        tmp_path, "child.yaml", "version: 1\nname: child\nextends: base.yaml\nfunction_calling: nativ\n"
    )
    errors = check_file(child, env={})
    located = [(Path(e.file).name, e.line, e.path) for e in errors]
    assert located == [
        ("base.yaml", 3, "model.id"),  # the base's unset variable ...
        ("base.yaml", 5, "limits.max_steps"),  # ... and its schema error, found through the child
        ("child.yaml", 3, "extends"),  # "in the file this extends (base.yaml)"
        ("child.yaml", 4, "function_calling"),
    ]
    assert "H13_UNSET_MODEL is not set" in errors[0].message
    assert errors[2].message == "in the file this extends (base.yaml)"


def test_duplicate_keys_and_bad_tags_do_not_stop_the_schema_check(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "a.yaml",
        "version: 1\nname: a\nname: b\ndescription: !!binary aGk=\nfunction_calling: nativ\n",
    )
    found = _located(check_file(path, env={}))
    assert [(line, where) for line, _, where, _ in found] == [
        (3, "name"),
        (4, "description"),
        (5, "function_calling"),
    ]
    assert found[0][3].startswith("duplicate key 'name'")
    assert "binary" in found[1][3]  # not also "expected a string, got null"


def test_a_syntax_error_still_stops_everything_after_it(tmp_path: Path) -> None:
    path = _write(tmp_path, "a.yaml", "version: 1\nname: [unclosed\nfunction_calling: nativ\n")
    errors = check_file(path, env={})
    assert len(errors) == 1 and errors[0].message.startswith("YAML syntax error")


def test_a_team_of_only_x_keys_is_still_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, "team.yaml", "version: 1\nagents:\n  x-note: {}\n")
    (error,) = check_file(path, env={})
    assert error.message.startswith("the team has no agents")
