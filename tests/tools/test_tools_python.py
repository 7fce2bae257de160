"""Python tools: schemas from signatures, docstrings, context injection, threads and imports."""

from __future__ import annotations

import asyncio
import enum
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NotRequired, Optional, TypedDict

import pytest
from jsonschema import Draft202012Validator
from pydantic import BaseModel

from runner.errors import ConfigError, ToolError
from runner.tools.base import RunContext
from runner.tools.python import tool_from_function, tools_from_module_path


class Unit(enum.Enum):
    CELSIUS = "c"
    FAHRENHEIT = "f"


class Window(TypedDict):
    """A time window."""

    start: str
    hours: NotRequired[int]


@dataclass
class Point:
    """A place on the map."""

    lat: float
    lon: float = 0.0


class Address(BaseModel):
    """A postal address."""

    street: str
    unit: Unit = Unit.CELSIUS
    previous: Address | None = None


def _props(fn: Any) -> dict[str, Any]:
    props: dict[str, Any] = tool_from_function(fn).parameters["properties"]
    return props


def _walk(node: Any) -> list[str]:
    if isinstance(node, dict):
        return list(node) + [key for value in node.values() for key in _walk(value)]
    if isinstance(node, list):
        return [key for value in node for key in _walk(value)]
    return []


def test_scalar_types_and_required_follow_the_signature() -> None:
    def f(s: str, i: int, x: float, b: bool, n: None, opt: int = 3) -> str:
        return s

    tool = tool_from_function(f)
    props = tool.parameters["properties"]
    assert [props[k]["type"] for k in ("s", "i", "x", "b", "n", "opt")] == [
        "string",
        "integer",
        "number",
        "boolean",
        "null",
        "integer",
    ]
    assert props["opt"]["default"] == 3
    assert tool.parameters["required"] == ["s", "i", "x", "b", "n"]
    assert tool.name == "f"
    assert tool.source_kind == "python"


def test_optional_and_union_none_become_the_plain_type_and_not_required() -> None:
    def f(a: Optional[int] = None, b: str | None = None) -> None:  # noqa: UP045
        return None

    tool = tool_from_function(f)
    assert tool.parameters["properties"] == {"a": {"type": "integer"}, "b": {"type": "string"}}
    assert "required" not in tool.parameters


def test_nested_lists_and_dicts() -> None:
    def f(tags: list[str], counts: dict[str, int], grid: list[dict[str, list[int]]]) -> None:
        return None

    props = _props(f)
    assert props["tags"] == {"items": {"type": "string"}, "type": "array"}
    assert props["counts"] == {"additionalProperties": {"type": "integer"}, "type": "object"}
    assert props["grid"]["items"]["additionalProperties"]["items"] == {"type": "integer"}


def test_literal_becomes_a_typed_enum() -> None:
    def f(mode: Literal["fast", "slow"] = "fast") -> None:
        return None

    assert _props(f)["mode"] == {"enum": ["fast", "slow"], "type": "string", "default": "fast"}


async def test_enum_parameter_has_its_values_and_the_call_gets_the_member(ctx: RunContext) -> None:
    def f(unit: Unit = Unit.CELSIUS) -> str:
        return repr(unit)

    tool = tool_from_function(f)
    assert tool.parameters["properties"]["unit"] == {"enum": ["c", "f"], "type": "string", "default": "c"}
    assert await tool.call({"unit": "f"}, ctx) == repr(Unit.FAHRENHEIT)


async def test_typing_typeddict_becomes_an_object_with_its_required_keys(ctx: RunContext) -> None:
    def f(window: Window) -> Any:
        return window

    tool = tool_from_function(f)
    schema = tool.parameters["properties"]["window"]
    assert schema["type"] == "object"
    assert schema["properties"] == {"start": {"type": "string"}, "hours": {"type": "integer"}}
    assert schema["required"] == ["start"]
    assert schema["description"] == "A time window."
    assert await tool.call({"window": {"start": "9:00"}}, ctx) == {"start": "9:00"}


async def test_dataclass_parameter_is_an_object_and_the_call_gets_an_instance(ctx: RunContext) -> None:
    def f(where: Point) -> Any:
        return where

    tool = tool_from_function(f)
    schema = tool.parameters["properties"]["where"]
    assert schema["properties"]["lat"] == {"type": "number"}
    assert schema["required"] == ["lat"]
    assert await tool.call({"where": {"lat": 1.5}}, ctx) == Point(1.5, 0.0)


async def test_pydantic_model_schema_is_self_contained_and_the_call_gets_a_model(ctx: RunContext) -> None:
    def f(address: Address) -> Any:
        return address

    tool = tool_from_function(f)
    schema = tool.parameters["properties"]["address"]
    keys = _walk(tool.parameters)
    assert "$ref" not in keys
    assert "$defs" not in keys
    assert schema["properties"]["unit"]["enum"] == ["c", "f"]
    assert schema["properties"]["previous"]["type"] == "object"
    result = await tool.call({"address": {"street": "Main", "unit": "f"}}, ctx)
    assert isinstance(result, Address)
    assert result.unit is Unit.FAHRENHEIT
    Draft202012Validator.check_schema(tool.parameters)


def test_unannotated_parameters_use_the_default_type_else_string() -> None:
    def f(a, b=2, c=None):  # type: ignore[no-untyped-def]
        return a

    props = _props(f)
    assert props == {"a": {"type": "string"}, "b": {"type": "integer", "default": 2}, "c": {"type": "string"}}


def test_description_and_param_docs_from_rest_docstring() -> None:
    def f(city: str, days: int = 1) -> str:
        """Get the forecast.

        Uses the national service.

        :param city: The city name.
        :param days: How many days
            ahead.
        """
        return city

    tool = tool_from_function(f)
    assert tool.description == "Get the forecast."
    assert tool.parameters["properties"]["city"]["description"] == "The city name."
    assert tool.parameters["properties"]["days"]["description"] == "How many days ahead."


def test_param_docs_from_google_docstring() -> None:
    def f(query: str, limit: int = 5) -> str:
        """Search the web.

        Args:
            query (str): Search words.
            limit: Result count.
        """
        return query

    props = _props(f)
    assert props["query"]["description"] == "Search words."
    assert props["limit"]["description"] == "Result count."


async def test_context_parameters_are_hidden_from_the_schema_and_injected(ctx: RunContext) -> None:
    seen: dict[str, Any] = {}

    def f(q: str, run: RunContext, __user__: dict[str, Any], __session_id__: str, __ctx__: Any = None) -> str:
        seen.update(run=run, user=__user__, session=__session_id__, ctx=__ctx__)
        return q

    tool = tool_from_function(f)
    assert list(tool.parameters["properties"]) == ["q"]
    assert tool.parameters["required"] == ["q"]
    assert await tool.call({"q": "hi"}, ctx) == "hi"
    assert seen["run"] is ctx
    assert seen["ctx"] is ctx
    assert seen["session"] == "sess-1"
    assert seen["user"]["agent"] == "tester"


async def test_model_cannot_override_an_injected_parameter(ctx: RunContext) -> None:
    def f(__session_id__: str, **extra: Any) -> Any:
        return {"session": __session_id__, "extra": extra}

    tool = tool_from_function(f)
    result = await tool.call({"__session_id__": "forged", "other": 1}, ctx)
    assert result == {"session": "sess-1", "extra": {"other": 1}}


async def test_unknown_double_underscore_parameter_with_default_keeps_the_default(ctx: RunContext) -> None:
    def f(x: int, __event_emitter__: Any = "none") -> Any:
        return __event_emitter__

    tool = tool_from_function(f)
    assert list(tool.parameters["properties"]) == ["x"]
    assert await tool.call({"x": 1}, ctx) == "none"


def test_unknown_double_underscore_parameter_without_default_is_a_config_error() -> None:
    def f(__request__: Any) -> None:
        return None

    with pytest.raises(ConfigError, match="__request__"):
        tool_from_function(f)


def test_parameter_type_without_json_schema_is_a_config_error() -> None:
    def f(lock: threading.Lock) -> None:
        return None

    with pytest.raises(ConfigError, match="'lock'"):
        tool_from_function(f)


async def test_sync_tools_run_in_a_worker_thread(ctx: RunContext) -> None:
    def f() -> str:
        return threading.current_thread().name

    name = await tool_from_function(f).call({}, ctx)
    assert name != threading.main_thread().name


async def test_async_tools_are_awaited_on_the_event_loop(ctx: RunContext) -> None:
    async def f(delay: float = 0.0) -> str:
        await asyncio.sleep(delay)
        return threading.current_thread().name

    assert await tool_from_function(f).call({}, ctx) == threading.main_thread().name


async def test_positional_only_and_keyword_only_parameters_are_passed_correctly(ctx: RunContext) -> None:
    def f(a: int, /, b: int, *, c: int = 10) -> int:
        return a * 100 + b * 10 + c

    assert await tool_from_function(f).call({"a": 1, "b": 2, "c": 3}, ctx) == 123


async def test_unknown_arguments_are_dropped_unless_the_function_takes_kwargs(ctx: RunContext) -> None:
    def f(a: int) -> int:
        return a

    assert await tool_from_function(f).call({"a": 1, "junk": True}, ctx) == 1


async def test_value_of_the_wrong_shape_becomes_a_tool_error(ctx: RunContext) -> None:
    def f(unit: Unit) -> str:
        return unit.value

    with pytest.raises(ToolError, match="unit"):
        await tool_from_function(f).call({"unit": "kelvin"}, ctx)


def test_module_function_target_gives_one_tool(write_module: Any, module_dir: Path) -> None:
    name = write_module(
        """
        def greet(who: str) -> str:
            '''Say hello.'''
            return "hi " + who

        def other() -> None:
            pass
        """
    )
    tools = tools_from_module_path(f"{name}:greet", base_dir=module_dir)
    assert [t.name for t in tools] == ["greet"]
    assert tools[0].description == "Say hello."
    assert tools[0].source_id == name


def test_module_target_gives_public_functions_defined_there_in_source_order(
    write_module: Any, module_dir: Path
) -> None:
    name = write_module(
        """
        from os.path import join
        import json

        def zeta() -> None:
            pass

        def _private() -> None:
            pass

        class NotAFunction:
            pass

        async def alpha(x: int) -> int:
            return x

        helper = lambda: None
        also_zeta = zeta
        """
    )
    tools = tools_from_module_path(name, base_dir=module_dir)
    assert [t.name for t in tools] == ["zeta", "alpha"]


def test_import_restores_sys_path(write_module: Any, module_dir: Path) -> None:
    name = write_module("def f() -> None:\n    pass\n")
    before = list(sys.path)
    tools_from_module_path(name, base_dir=module_dir)
    assert sys.path == before


def test_missing_module_is_a_config_error(module_dir: Path) -> None:
    with pytest.raises(ConfigError, match="no such module") as info:
        tools_from_module_path("no_such_tools_module_xyz:f", base_dir=module_dir)
    assert sys.path.count(str(module_dir)) == 0
    assert "no_such_tools_module_xyz" in str(info.value)


def test_missing_dependency_names_the_dependency(write_module: Any, module_dir: Path) -> None:
    name = write_module("import not_installed_dep_abc\n")
    with pytest.raises(ConfigError, match="not_installed_dep_abc"):
        tools_from_module_path(name, base_dir=module_dir)


def test_syntax_error_names_file_and_line(write_module: Any, module_dir: Path) -> None:
    name = write_module("x = 1\ndef broken(:\n")
    with pytest.raises(ConfigError, match=r"syntax error \(.*\.py:2\)"):
        tools_from_module_path(name, base_dir=module_dir)


def test_module_raising_at_import_is_a_config_error(write_module: Any, module_dir: Path) -> None:
    name = write_module("raise RuntimeError('boom at import')\n")
    with pytest.raises(ConfigError, match="RuntimeError: boom at import"):
        tools_from_module_path(name, base_dir=module_dir)


def test_missing_function_suggests_a_close_name(write_module: Any, module_dir: Path) -> None:
    name = write_module("def get_weather() -> None:\n    pass\n")
    with pytest.raises(ConfigError) as info:
        tools_from_module_path(f"{name}:get_wether", base_dir=module_dir)
    assert "get_wether" in info.value.message
    assert info.value.hint == "did you mean 'get_weather'?"


def test_file_path_target_gets_a_hint(module_dir: Path) -> None:
    with pytest.raises(ConfigError) as info:
        tools_from_module_path("tools/weather.py:get", base_dir=module_dir)
    assert info.value.hint is not None and "'tools.weather'" in info.value.hint


def test_module_without_public_functions_is_a_config_error(write_module: Any, module_dir: Path) -> None:
    name = write_module("def _hidden() -> None:\n    pass\n")
    with pytest.raises(ConfigError, match="no public functions"):
        tools_from_module_path(name, base_dir=module_dir)


async def test_reload_picks_up_an_edited_module(write_module: Any, module_dir: Path, ctx: RunContext) -> None:
    name = write_module("def version() -> int:\n    return 1\n")
    first = tools_from_module_path(f"{name}:version", base_dir=module_dir)
    write_module("def version() -> int:\n    return 2\n", name=name)
    second = tools_from_module_path(f"{name}:version", base_dir=module_dir, reload=True)
    assert await first[0].call({}, ctx) == 1
    assert await second[0].call({}, ctx) == 2


async def test_reload_reads_an_edit_that_keeps_size_and_second_even_with_bytecode_written(
    write_module: Any, module_dir: Path, ctx: RunContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    # with bytecode written (the default outside this suite's environment), Python took the cached
    # bytecode of `return 1` for `return 2`: same size, same modification second
    import os

    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    name = write_module("def version() -> int:\n    return 1\n")
    source = module_dir / f"{name}.py"
    stamp = source.stat().st_mtime_ns
    first = tools_from_module_path(f"{name}:version", base_dir=module_dir)
    assert list((module_dir / "__pycache__").glob(f"{name}.*.pyc"))  # bytecode was written
    write_module("def version() -> int:\n    return 2\n", name=name)
    os.utime(source, ns=(stamp, stamp))
    second = tools_from_module_path(f"{name}:version", base_dir=module_dir, reload=True)
    assert await first[0].call({}, ctx) == 1
    assert await second[0].call({}, ctx) == 2


async def test_load_source_builds_the_tools_of_a_python_source(write_module: Any, module_dir: Path) -> None:
    from contextlib import AsyncExitStack

    from runner.agentfile.config import AgentConfig, ToolSourceConfig
    from runner.tools.python import load_source
    from runner.tools.sources import SourceContext

    name = write_module("def one() -> int:\n    return 1\n\ndef two() -> int:\n    return 2\n")
    spec = ToolSourceConfig(kind="python", target=name, base_dir=module_dir)
    context = SourceContext(agent=AgentConfig(name="a", path=module_dir / "agent.yaml"))
    async with AsyncExitStack() as stack:
        loaded = await load_source(spec, context, stack)
    assert [t.name for t in loaded.tools] == ["one", "two"]
    assert loaded.instructions is None
