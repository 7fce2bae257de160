"""Tool, RunContext and ToolResult: stable specs and immutable values."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from runner.tools.base import RunContext, Tool, ToolResult


def test_spec_is_the_openai_function_shape(make_tool: Any) -> None:
    tool: Tool = make_tool("lookup", parameters={"type": "object", "properties": {"q": {"type": "string"}}})
    assert tool.definition() == {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "The lookup tool.",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
        },
    }


def test_spec_is_the_same_object_on_every_call(make_tool: Any) -> None:
    tool: Tool = make_tool("lookup")
    assert tool.definition() is tool.definition()
    assert json.dumps(tool.definition()) == json.dumps(tool.definition())


def test_replacing_the_name_rebuilds_the_spec_and_keeps_the_original_name(make_tool: Any) -> None:
    tool: Tool = make_tool("lookup")
    renamed = dataclasses.replace(tool, name="web_lookup")
    assert renamed.definition()["function"]["name"] == "web_lookup"
    assert renamed.original_name == "lookup"
    assert tool.definition()["function"]["name"] == "lookup"


def test_original_name_defaults_to_the_name(make_tool: Any) -> None:
    assert make_tool("x").original_name == "x"


def test_tools_compare_by_identity_and_are_hashable(make_tool: Any) -> None:
    a, b = make_tool("x"), make_tool("x")
    assert a != b
    assert len({a, b}) == 2


def test_run_context_and_results_are_frozen(ctx: RunContext) -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        ctx.agent = "other"  # type: ignore[misc]
    result = ToolResult("c1", "t", "ok")
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.content = "changed"  # type: ignore[misc]
    assert (result.is_error, result.duration_s, result.arguments) == (False, 0.0, None)
