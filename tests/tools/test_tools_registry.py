"""The registry: deterministic order, valid unique names, source options, recorded renames."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

from runner.agentfile.config import ToolSourceConfig
from runner.tools.base import Tool
from runner.tools.registry import ToolRegistry, fit_name_length, sanitize_name

_VALID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def _source(id: str | None = None, **options: Any) -> ToolSourceConfig:
    return ToolSourceConfig(kind="python", target=id or "mod", base_dir=Path("."), id=id, **options)


def test_order_is_sources_in_file_order_then_tools_in_source_order(make_tool: Any) -> None:
    registry = ToolRegistry(
        [
            (_source("b"), [make_tool("zeta"), make_tool("alpha")]),
            (_source("a"), [make_tool("mid")]),
        ]
    )
    assert registry.names() == ("zeta", "alpha", "mid")
    assert [t.name for t in registry.tools()] == ["zeta", "alpha", "mid"]
    assert [s["function"]["name"] for s in registry.definitions()] == ["zeta", "alpha", "mid"]


def test_collision_across_sources_prefixes_the_later_tool_with_its_source_id(make_tool: Any) -> None:
    first, second = make_tool("search"), make_tool("search")
    registry = ToolRegistry([(_source("web"), [first]), (_source("docs"), [second])])
    assert registry.names() == ("search", "docs_search")
    assert registry.get("search") is not None and registry.get("search").call is first.call  # type: ignore[union-attr]
    [rename] = registry.renames
    assert (rename.original, rename.final, rename.source) == ("search", "docs_search", "docs")
    assert "already taken" in rename.reason


def test_collision_that_persists_after_prefixing_gets_a_number(make_tool: Any) -> None:
    registry = ToolRegistry(
        [
            (_source("x"), [make_tool("run"), make_tool("y_run")]),
            (_source("y"), [make_tool("run")]),
            (_source("y"), [make_tool("run")]),
        ]
    )
    assert registry.names() == ("run", "y_run", "y_run_2", "y_run_3")
    assert len(registry.renames) == 2


def test_prefix_true_prefixes_every_tool_of_the_source(make_tool: Any) -> None:
    registry = ToolRegistry(
        [
            (_source("gh", prefix=True), [make_tool("issues"), make_tool("pulls")]),
            (_source("o"), [make_tool("x")]),
        ]
    )
    assert registry.names() == ("gh_issues", "gh_pulls", "x")
    assert all(r.reason == "prefix: true" for r in registry.renames)
    assert registry.get("gh_issues").original_name == "issues"  # type: ignore[union-attr]


def test_include_and_exclude_globs_apply_to_original_names(make_tool: Any) -> None:
    tools = [make_tool(n) for n in ("files_read", "files_write", "files_delete", "shell")]
    registry = ToolRegistry([(_source("f", include=("files_*",), exclude=("*_delete",), prefix=True), tools)])
    assert registry.names() == ("f_files_read", "f_files_write")


def test_names_with_invalid_characters_are_sanitized_and_recorded(make_tool: Any) -> None:
    registry = ToolRegistry([(_source("s"), [make_tool("get weather.v2/now")])])
    assert registry.names() == ("get_weather_v2_now",)
    assert registry.renames[0].original == "get weather.v2/now"
    assert "characters" in registry.renames[0].reason


def test_names_longer_than_64_are_cut_with_a_hash(make_tool: Any) -> None:
    long_name = "a" * 50 + "_really_long_operation_name_that_keeps_going"
    registry = ToolRegistry([(_source("s"), [make_tool(long_name)])])
    [name] = registry.names()
    digest = hashlib.sha256(long_name.encode()).hexdigest()[:8]
    assert name == long_name[:55] + "_" + digest
    assert len(name) == 64


def test_fit_name_length_keeps_short_names() -> None:
    assert fit_name_length("a" * 64) == "a" * 64
    assert len(fit_name_length("a" * 65)) == 64


def test_sanitize_name_never_returns_an_empty_name() -> None:
    assert sanitize_name("") == "tool"
    assert sanitize_name("ä-b c") == "_-b_c"


def test_every_final_name_is_valid_and_unique(make_tool: Any) -> None:
    names = ["x" * 80, "x" * 80, "a b", "a_b", "a.b", "", "ok", "ok"]
    registry = ToolRegistry([(_source(f"s{i}"), [make_tool(n)]) for i, n in enumerate(names)])
    assert len(set(registry.names())) == len(names)
    assert all(_VALID.match(name) for name in registry.names())


def test_source_confirm_timeout_and_id_are_applied(make_tool: Any) -> None:
    registry = ToolRegistry([(_source("sh", confirm=True, timeout_s=5.0), [make_tool("shell")])])
    tool = registry.get("shell")
    assert tool is not None
    assert tool.confirm is True
    assert tool.timeout_s == 5.0
    assert tool.source_id == "sh"


def test_source_without_options_keeps_the_tool_unchanged(make_tool: Any) -> None:
    base = make_tool("t")
    registry = ToolRegistry([(_source(None), [base])])
    assert registry.get("t") is base
    assert registry.renames == []


def test_specs_is_the_same_list_object_every_call_and_uses_final_names(make_tool: Any) -> None:
    registry = ToolRegistry([(_source("a"), [make_tool("t")]), (_source("b"), [make_tool("t")])])
    assert registry.definitions() is registry.definitions()
    assert registry.definitions()[1] is registry.get("b_t").definition()  # type: ignore[union-attr]
    assert registry.definitions()[1]["function"]["name"] == "b_t"


def test_mapping_like_api(make_tool: Any) -> None:
    registry = ToolRegistry.from_tools([make_tool("a"), make_tool("b")])
    assert len(registry) == 2
    assert "a" in registry
    assert "c" not in registry
    assert registry.get("c") is None
    assert [t.name for t in registry] == ["a", "b"]


def test_tools_without_a_source_spec_use_their_own_source_id_on_collision(make_tool: Any) -> None:
    registry = ToolRegistry.from_tools([make_tool("t", source_id="one"), make_tool("t", source_id="two")])
    assert registry.names() == ("t", "two_t")


def test_renaming_does_not_change_the_original_tool(make_tool: Any) -> None:
    original: Tool = make_tool("t")
    ToolRegistry([(_source("a"), [make_tool("t")]), (_source("b"), [original])])
    assert original.name == "t"
    assert original.definition()["function"]["name"] == "t"


def test_every_source_schema_is_cleaned(make_tool: Any) -> None:
    raw = {
        "title": "Args",
        "type": "object",
        "properties": {"q": {"anyOf": [{"type": "str"}, {"type": "null"}], "default": None}},
    }
    registry = ToolRegistry([(_source("mcp"), [make_tool("search", parameters=raw)])])
    assert registry.get("search").parameters == {  # type: ignore[union-attr]
        "type": "object",
        "properties": {"q": {"type": "string"}},
    }
