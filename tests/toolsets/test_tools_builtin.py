"""The ``builtin`` source loader: toolset lookup, ``with:`` validation, defaults and tool shapes."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from runner.errors import ConfigError, ConfigErrors
from runner.tools.builtin import available_toolsets, load_toolset, validate_options
from runner.tools.sources import loader_for

_SCHEMA = Path(__file__).resolve().parents[2] / "schemas" / "agent.schema.json"
_VALID_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_MINIMAL_OPTIONS: dict[str, dict[str, Any]] = {"files": {"root": "ws"}, "skills": {"folders": ["sk/demo"]}}


def test_the_toolsets_are_the_ones_the_agent_file_schema_offers() -> None:
    schema = json.loads(_SCHEMA.read_text())
    assert available_toolsets() == sorted(schema["$defs"]["builtin_source"]["properties"]["builtin"]["enum"])


def test_the_builtin_kind_is_served_by_this_loader() -> None:
    from runner.tools import builtin

    assert loader_for("builtin") is builtin.load_source


@pytest.mark.parametrize("name", available_toolsets())
def test_every_options_schema_is_valid_and_closed(name: str) -> None:
    schema = load_toolset(name).OPTIONS_SCHEMA
    Draft202012Validator.check_schema(schema)
    assert schema["additionalProperties"] is False
    for key, prop in schema["properties"].items():
        assert prop.get("description"), f"{name}.{key} has no description"


@pytest.mark.parametrize("name", available_toolsets())
async def test_every_tool_has_a_valid_name_schema_and_description(
    name: str, load_builtin: Any, tmp_path: Path
) -> None:
    (tmp_path / "sk" / "demo").mkdir(parents=True)
    (tmp_path / "sk" / "demo" / "SKILL.md").write_text("---\nname: demo\ndescription: A demo.\n---\nDo it.\n")
    tools = await load_builtin(name, _MINIMAL_OPTIONS.get(name))
    assert tools
    for tool in tools.values():
        assert _VALID_NAME.match(tool.name)
        assert tool.name == name or tool.name.startswith(f"{name}_")
        assert tool.source_kind == "builtin"
        assert len(tool.description) > 30
        Draft202012Validator.check_schema(tool.parameters)
        assert tool.parameters["type"] == "object"


async def test_an_unknown_option_is_a_config_error_naming_it(load_builtin: Any, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        await load_builtin("files", {"root": "ws", "max_read_char": 10})
    error = caught.value
    assert error.message == "builtin toolset 'files': unknown option 'max_read_char'"
    assert error.hint == "did you mean 'max_read_chars'?"
    assert error.path == "tools[0].with.max_read_char"
    assert error.file == str(tmp_path / "agent.yaml")


async def test_an_unknown_option_without_a_close_match_lists_the_known_ones(load_builtin: Any) -> None:
    with pytest.raises(ConfigError) as caught:
        await load_builtin("todo", {"colour": "red"})
    assert caught.value.hint == "known options: max_items"


async def test_a_wrong_type_is_a_config_error_naming_the_option_and_the_problem(load_builtin: Any) -> None:
    with pytest.raises(ConfigError) as caught:
        await load_builtin("shell", {"timeout_s": "soon"})
    assert (
        caught.value.message == "builtin toolset 'shell': option 'timeout_s': 'soon' is not of type 'number'"
    )
    assert caught.value.path == "tools[0].with.timeout_s"


async def test_a_bad_nested_value_names_its_full_path(load_builtin: Any) -> None:
    with pytest.raises(ConfigError) as caught:
        await load_builtin("fetch", {"headers": {"X-Token": 5}})
    assert caught.value.path == "tools[0].with.headers.X-Token"
    assert "option 'headers.X-Token': 5 is not of type 'string'" in caught.value.message


async def test_a_missing_required_option_is_a_config_error(load_builtin: Any) -> None:
    with pytest.raises(ConfigError) as caught:
        await load_builtin("files", {})
    assert caught.value.message == "builtin toolset 'files': missing required option 'root'"
    assert caught.value.path == "tools[0].with.root"


async def test_several_problems_are_reported_together(load_builtin: Any) -> None:
    with pytest.raises(ConfigErrors) as caught:
        await load_builtin("shell", {"timeout_s": 0, "output_chars": "many", "cwdd": "."})
    paths = sorted(error.path for error in caught.value)
    assert paths == ["tools[0].with.cwdd", "tools[0].with.output_chars", "tools[0].with.timeout_s"]


async def test_an_unknown_toolset_is_a_config_error_with_a_suggestion(load_builtin: Any) -> None:
    with pytest.raises(ConfigError) as caught:
        await load_builtin("shel")
    assert caught.value.message == "unknown builtin toolset 'shel'"
    assert caught.value.hint == "did you mean 'shell'?"
    assert caught.value.path == "tools[0].builtin"


def test_validate_options_fills_in_the_defaults() -> None:
    schema = load_toolset("shell").OPTIONS_SCHEMA
    options = validate_options("shell", {"timeout_s": 5}, schema)
    assert options == {
        "cwd": ".",
        "timeout_s": 5,
        "output_chars": 20_000,
        "env": {},
        "inherit_env": True,
        "inherit_secrets": False,
    }
