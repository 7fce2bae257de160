"""What ``validate`` checks beyond the schema (``runner.agentfile.checks``): imports, templates, refs."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.agentfile import check_file
from runner.errors import ConfigError


def _check(tmp_path: Path, body: str, *, extra_vars: tuple[str, ...] = ()) -> list[ConfigError]:
    path = tmp_path / "agent.yaml"
    path.write_text("version: 1\nname: a\n" + body, encoding="utf-8")
    return check_file(path, env={}, extra_vars=extra_vars)


def _summary(errors: list[ConfigError]) -> list[tuple[int, int, str, str]]:
    return [(e.line, e.column, e.path, e.message) for e in errors]


def test_hook_message_may_use_the_fields_of_the_event(tmp_path: Path) -> None:
    body = (
        "hooks:\n  turn_post:\n    - message: '{{ event }} {{ turn }} {{ step }} {{ tool_call.name }}"
        " {{ output }} {{ is_error }} {{ session_id }} {{ messages | length }} {{ agent }}'\n"
    )
    assert _check(tmp_path, body) == []


def test_event_fields_are_not_defined_in_prompts(tmp_path: Path) -> None:
    errors = _check(tmp_path, "prompts:\n  system: 'Turn {{ turn }}'\n")
    assert _summary(errors) == [(4, 11, "prompts.system", "template uses undefined variable 'turn'")]


def test_x_keys_of_hooks_and_prompts_are_not_checked(tmp_path: Path) -> None:
    body = (
        "prompts:\n  x-draft: '{{ nothing }}'\nhooks:\n  x-old:\n    - python: runner_t_no_module:f\n"
        "    - message: '{{ nothing }}'\n"
    )
    assert _check(tmp_path, body) == []


def test_status_and_tool_selection_templates_are_checked(tmp_path: Path) -> None:
    errors = _check(tmp_path, "prompts:\n  status: '{{ stat }}'\n  tool_selection: '{{ tols }}'\n")
    assert _summary(errors) == [
        (4, 11, "prompts.status", "template uses undefined variable 'stat'"),
        (5, 19, "prompts.tool_selection", "template uses undefined variable 'tols' (did you mean 'tools'?)"),
    ]


def test_extra_variables_count_as_defined(tmp_path: Path) -> None:
    body = "prompts:\n  system: '{{ style }}'\n"
    assert _check(tmp_path, body, extra_vars=("style",)) == []
    assert len(_check(tmp_path, body)) == 1


def test_names_a_template_sets_itself_are_defined(tmp_path: Path) -> None:
    body = "prompts:\n  system: '{% set x = 1 %}{% for t in tools %}{{ t.name }}{{ x }}{% endfor %}'\n"
    assert _check(tmp_path, body) == []


def test_undefined_variable_in_a_block_is_located_on_its_line(tmp_path: Path) -> None:
    body = "vars: {city: x}\nprompts:\n  system: |\n    one {{ city }}\n    two\n    three {{ cty }}\n"
    errors = _check(tmp_path, body)
    assert _summary(errors) == [
        (8, 1, "prompts.system", "template uses undefined variable 'cty' (did you mean 'city'?)")
    ]


def test_include_of_an_existing_template_is_fine(tmp_path: Path) -> None:
    (tmp_path / "part.j2").write_text("{{ input }}", encoding="utf-8")
    assert _check(tmp_path, "prompts:\n  system: \"{% include 'part.j2' %}\"\n") == []


def test_template_syntax_error_on_the_value_line_points_at_the_value(tmp_path: Path) -> None:
    errors = _check(tmp_path, "prompts:\n  user: '{% if %}'\n")
    assert [(e.line, e.column, e.path) for e in errors] == [(4, 9, "prompts.user")]
    assert errors[0].message.startswith("template: ")


def test_unreadable_template_file_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "bin.j2").write_bytes(b"\xff\xfe\x00")
    (error,) = _check(tmp_path, "prompts:\n  system: {file: bin.j2}\n")
    assert (error.path, error.line) == ("prompts.system.file", 4)
    assert error.message.startswith("cannot read template file bin.j2")


def test_api_key_through_a_variable_is_fine_and_a_literal_one_is_not(tmp_path: Path) -> None:
    assert _check(tmp_path, "model:\n  id: m\n  api_key: ${RUNNER_T_API_KEY:-}\n") == []
    errors = _check(tmp_path, "model:\n  id: m\n  api_key: sk-123\n")
    assert _summary(errors) == [
        (5, 12, "model.api_key", "a literal API key is not allowed in an agent file (it would end up in git)")
    ]
    assert errors[0].hint is not None and "${OPENAI_API_KEY}" in errors[0].hint


def test_api_key_through_a_merged_anchor_is_fine(tmp_path: Path) -> None:
    body = "x-model: &m\n  id: m\n  api_key: ${RUNNER_T_API_KEY:-k}\nmodel:\n  <<: *m\n"
    assert _check(tmp_path, body) == []


def test_python_module_without_function_is_importable(tmp_path: Path) -> None:
    (tmp_path / "runner_t_checks_tools.py").write_text("def add() -> None:\n    pass\n", encoding="utf-8")
    assert _check(tmp_path, "tools:\n  - python: runner_t_checks_tools\n") == []
    (error,) = _check(tmp_path, "tools:\n  - python: runner_t_checks_tools:ad\n")
    assert error.message == "module 'runner_t_checks_tools' has no function 'ad' (did you mean 'add'?)"


def test_module_that_imports_a_missing_dependency_names_it(tmp_path: Path) -> None:
    (tmp_path / "runner_t_checks_dep.py").write_text("import runner_t_missing_dependency\n", encoding="utf-8")
    (error,) = _check(tmp_path, "tools:\n  - python: runner_t_checks_dep\n")
    assert (
        error.message == "importing 'runner_t_checks_dep' failed: it imports 'runner_t_missing_dependency', "
        "which is not installed"
    )


def test_module_that_exits_on_import_is_an_error_not_an_exit(tmp_path: Path) -> None:
    (tmp_path / "runner_t_checks_exit.py").write_text("raise SystemExit(3)\n", encoding="utf-8")
    (error,) = _check(tmp_path, "tools:\n  - python: runner_t_checks_exit\n")
    assert error.message == "importing 'runner_t_checks_exit' failed: SystemExit: 3"


@pytest.mark.parametrize("target", ["http://127.0.0.1:9/openapi.json", "https://example.invalid/o.yaml"])
def test_openapi_url_is_not_fetched_by_validate(tmp_path: Path, target: str) -> None:
    assert _check(tmp_path, f"tools:\n  - openapi: {target}\n") == []


def test_openapi_and_agent_files_are_relative_to_the_file_that_names_them(tmp_path: Path) -> None:
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "api.yaml").write_text("openapi: 3.1.0\n", encoding="utf-8")
    (tmp_path / "base" / "helper.yaml").write_text("version: 1\nname: helper\n", encoding="utf-8")
    (tmp_path / "base" / "base.yaml").write_text(
        "version: 1\nname: base\ntools:\n  - openapi: api.yaml\n  - agent: ./helper.yaml\n", encoding="utf-8"
    )
    assert _check(tmp_path, "extends: base/base.yaml\n") == []


def test_agent_reference_in_a_single_agent_file_must_be_itself(tmp_path: Path) -> None:
    errors = _check(tmp_path, "tools:\n  - agent: '#a'\n  - agent: '#b'\n")
    assert _summary(errors) == [(5, 12, "tools[1].agent", "no agent named 'b' in this file")]


def test_selector_template_may_use_the_selector_names(tmp_path: Path) -> None:
    errors = _check(tmp_path, "prompts:\n  tool_selection: '{{ tools_json }} {{ history }} {{ input }}'\n")
    assert errors == []
