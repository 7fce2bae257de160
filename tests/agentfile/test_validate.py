"""How JSON-Schema errors become short, located messages (``runner.agentfile.validate``)."""

from __future__ import annotations

from typing import Any

import pytest

from runner.agentfile.validate import schema_errors, suggest
from runner.agentfile.yamlsrc import NodeInfo, SourceMap

MINIMAL: dict[str, Any] = {"version": 1, "name": "weather"}


def _messages(data: dict[str, Any]) -> list[tuple[str, str]]:
    return [(e.path, e.message) for e in schema_errors(data, SourceMap())]


def _test_case(expect: dict[str, Any]) -> dict[str, Any]:
    return {"name": "t", "input": "i", "expect": expect}


@pytest.mark.parametrize(
    ("changes", "path", "message"),
    [
        ({"model": 5}, "model", "expected a string or a mapping, got 5"),
        ({"model": ["a"]}, "model", "expected a string or a mapping, got a list"),
        ({"prompts": {"system": 5}}, "prompts.system", "expected a string or a mapping, got 5"),
        ({"prompts": {"user": None}}, "prompts.user", "expected a string or a mapping, got null"),
        ({"prompts": {"status": True}}, "prompts.status", "expected a string, a mapping or null, got true"),
        ({"tools": [{"mcp": 5}]}, "tools[0].mcp", "expected a string or a mapping, got 5"),
        (
            {"tests": [_test_case({"output_contains": 5})]},
            "tests[0].expect.output_contains",
            "expected a string or a list, got 5",
        ),
        ({"limits": {"max_tokens": "x"}}, "limits.max_tokens", 'expected an integer or null, got "x"'),
        ({"tools": {"python": "m"}}, "tools", "expected a list, got a mapping"),
    ],
)
def test_type_error_names_every_accepted_type(changes: dict[str, Any], path: str, message: str) -> None:
    assert _messages({**MINIMAL, **changes}) == [(path, message)]


def test_team_agent_model_of_wrong_type_names_both_types() -> None:
    data = {"version": 1, "agents": {"lead": {"model": 5}}}
    assert _messages(data) == [("agents.lead.model", "expected a string or a mapping, got 5")]


@pytest.mark.parametrize("entry", [5, "python: m", None])
def test_tool_entry_that_is_not_a_mapping_gets_one_error(entry: Any) -> None:
    errors = _messages({**MINIMAL, "tools": [entry]})
    assert len(errors) == 1
    assert errors[0][0] == "tools[0]" and errors[0][1].startswith("expected a mapping, got ")


def test_hook_that_is_not_a_mapping_gets_one_error() -> None:
    errors = _messages({**MINIMAL, "hooks": {"turn_post": [5]}})
    assert errors == [("hooks.turn_post[0]", "expected a mapping, got 5")]


def test_mistyped_value_gets_only_the_type_error() -> None:
    errors = _messages({**MINIMAL, "limits": {"tool_output_chars": 5.5}})
    assert errors == [("limits.tool_output_chars", "expected an integer, got 5.5")]


def test_enum_suggestion_is_only_made_for_strings() -> None:
    errors = _messages({**MINIMAL, "function_calling": ["native"]})
    assert errors == [("function_calling", "a list is not one of: auto, native, prompt, inline")]
    errors = _messages({**MINIMAL, "function_calling": "natve"})
    assert errors == [
        ("function_calling", "\"natve\" is not one of: auto, native, prompt, inline (did you mean 'native'?)")
    ]


def test_invalid_regular_expression_is_reported() -> None:
    errors = _messages({**MINIMAL, "tests": [_test_case({"output_matches": "(a"})]})
    assert errors == [("tests[0].expect.output_matches", '"(a" is not a valid regular expression')]


def test_unknown_key_gets_suggestion_or_the_allowed_keys() -> None:
    (close,) = schema_errors({**MINIMAL, "limits": {"max_step": 1}}, SourceMap())
    assert close.message == "unknown key 'max_step' (did you mean 'max_steps'?)"
    assert close.hint is None
    (far,) = schema_errors({**MINIMAL, "selector": {"zzz": 1}}, SourceMap())
    assert far.message == "unknown key 'zzz'"
    assert far.hint == "allowed here: model, rounds, history"


def test_x_keys_are_allowed_under_agents_whatever_their_case() -> None:
    data = {"version": 1, "agents": {"x-Shared": {"model": [1]}, "x-notes": 5, "lead": {}}}
    assert _messages(data) == []


def test_agent_names_are_still_checked_next_to_x_keys() -> None:
    data = {"version": 1, "agents": {"x-notes": 5, "Lead": {}}}
    assert _messages(data) == [("agents.Lead", "invalid name 'Lead': must match ^[a-z0-9][a-z0-9_-]{0,63}$")]


def test_x_prefixed_var_names_are_still_invalid() -> None:
    errors = _messages({**MINIMAL, "vars": {"x-a": 1}})
    assert errors == [("vars.x-a", "invalid name 'x-a': must match ^[A-Za-z_][A-Za-z0-9_]*$")]


def test_version_inside_a_team_agent_says_where_it_belongs() -> None:
    errors = _messages({"version": 1, "agents": {"lead": {"version": 1}}})
    assert errors == [
        (
            "agents.lead.version",
            "unknown key 'version': a team file has one `version`, at its top, not one per agent",
        )
    ]


def test_missing_key_points_at_the_mapping_that_lacks_it() -> None:
    sources = SourceMap({(): NodeInfo("a.yaml", 1, 1), ("model",): NodeInfo("a.yaml", 3, 3, 2, 1)})
    (error,) = schema_errors({**MINIMAL, "model": {"stream": True}}, sources)
    assert (error.file, error.line, error.column, error.path) == ("a.yaml", 3, 3, "model")
    assert error.message == "missing required key 'id'"


def test_errors_come_in_file_order() -> None:
    sources = SourceMap(
        {
            ("name",): NodeInfo("a.yaml", 2, 7, 2, 1),
            ("model",): NodeInfo("a.yaml", 4, 8, 4, 1),
            ("limits", "max_steps"): NodeInfo("a.yaml", 3, 20, 3, 9),
        }
    )
    errors = schema_errors({**MINIMAL, "name": "Bad", "model": 5, "limits": {"max_steps": 0}}, sources)
    assert [e.line for e in errors] == [2, 3, 4]


@pytest.mark.parametrize(
    ("word", "expected"),
    [("modle", "model"), ("max_step", "max_steps"), ("zzz", None), ("", None)],
)
def test_suggest_only_close_words(word: str, expected: str | None) -> None:
    assert suggest(word, ["model", "max_steps", "name"]) == expected
