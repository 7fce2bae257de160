"""Without a server: how MCP results read to a model, and which listed schemas are repaired or skipped."""

from __future__ import annotations

import logging
from typing import Any

import mcp.types as types
import pytest

from runner.errors import ToolError
from runner.tools.mcp import SchemaProblem, SchemaRepair, render_result


def result(
    *content: types.ContentBlock, structured: dict[str, object] | None = None, error: bool = False
) -> types.CallToolResult:
    return types.CallToolResult(content=list(content), structured_content=structured, is_error=error)


def text(value: str) -> types.TextContent:
    return types.TextContent(type="text", text=value)


def test_text_blocks_are_joined_by_lines() -> None:
    assert render_result(result(text("one"), text("two"))) == "one\ntwo"


def test_structured_content_replaces_its_pretty_printed_copy() -> None:
    rendered = render_result(
        result(text('{\n  "a": 1,\n  "b": [1, 2]\n}'), text("note"), structured={"a": 1, "b": [1, 2]})
    )
    assert rendered == '{"a":1,"b":[1,2]}\nnote'


def test_structured_content_without_a_text_copy_is_appended() -> None:
    assert render_result(result(text("see data"), structured={"ok": True})) == 'see data\n{"ok":true}'


def test_text_that_differs_from_the_structured_content_is_kept() -> None:
    assert render_result(result(text('{"a": 2}'), structured={"a": 1})) == '{"a": 2}\n{"a":1}'


def test_image_is_summarized_with_type_and_size() -> None:
    image = types.ImageContent(type="image", data="A" * 4000, mime_type="image/jpeg")
    assert render_result(result(image)) == "[image: image/jpeg, 3.0 kB]"


def test_is_error_raises_with_the_text() -> None:
    with pytest.raises(ToolError, match=r"^disk full$"):
        render_result(result(text("disk full"), error=True))


def test_is_error_without_content_still_says_so() -> None:
    with pytest.raises(ToolError, match="without a message"):
        render_result(result(error=True))


def test_empty_success_is_empty_text() -> None:
    assert render_result(result()) == ""


def test_schema_repair_keeps_object_schemas_untouched() -> None:
    repair = SchemaRepair("srv", logging.getLogger("test"))
    listing: dict[str, Any] = {"tools": [{"name": "a", "inputSchema": {"type": "object", "x-extra": 1}}]}
    repair(listing)
    assert listing == {"tools": [{"name": "a", "inputSchema": {"type": "object", "x-extra": 1}}]}
    assert repair.problems == []


def test_schema_repair_fills_a_missing_or_typeless_schema_and_drops_the_rest() -> None:
    repair = SchemaRepair("srv", logging.getLogger("test"))
    listing: dict[str, Any] = {
        "tools": [
            {"name": "none"},
            {"name": "typeless", "inputSchema": {"properties": {"q": {"type": "string"}}}},
            {"name": "array", "inputSchema": {"type": "array"}},
            {"name": "listy", "inputSchema": ["not", "a", "schema"]},
        ],
        "nextCursor": "2",
    }
    repair(listing)
    assert listing == {
        "tools": [
            {"name": "none", "inputSchema": {"type": "object"}},
            {"name": "typeless", "inputSchema": {"properties": {"q": {"type": "string"}}, "type": "object"}},
        ],
        "nextCursor": "2",
    }
    assert [(p.tool, p.action) for p in repair.problems] == [
        ("none", "repaired"),
        ("typeless", "repaired"),
        ("array", "skipped"),
        ("listy", "skipped"),
    ]
    assert repair.problems[3] == SchemaProblem(
        "listy", "inputSchema is not an object schema ('list')", "skipped"
    )


def test_schema_repair_reports_a_tool_once_across_relistings(caplog: pytest.LogCaptureFixture) -> None:
    repair = SchemaRepair("srv", logging.getLogger("test"))
    for _ in range(3):
        repair({"tools": [{"name": "array", "inputSchema": {"type": "array"}}]})
    assert len(repair.problems) == 1
    assert len([r for r in caplog.records if "array" in r.getMessage()]) == 1
