"""The ``todo`` toolset: add, list, update and remove items, one list per session."""

from __future__ import annotations

from typing import Any

import pytest

from runner.errors import ToolError
from runner.tools.base import RunContext, Tool


@pytest.fixture
async def todo(load_builtin: Any) -> dict[str, Tool]:
    """The todo tools with default options."""
    tools: dict[str, Tool] = await load_builtin("todo")
    return tools


async def test_added_items_are_listed_with_ids_and_status(todo: dict[str, Tool], run_ctx: RunContext) -> None:
    assert await todo["todo_list"].call({}, run_ctx) == "The todo list is empty."
    added = await todo["todo_add"].call({"text": "write the tests"}, run_ctx)
    assert added.startswith("Added #1.")
    await todo["todo_add"].call({"text": "  run   them  "}, run_ctx)
    listing = await todo["todo_list"].call({}, run_ctx)
    assert listing.splitlines() == [
        "#1 [pending] write the tests",
        "#2 [pending] run them",
        "(2 items: 2 pending, 0 in progress, 0 done)",
    ]


async def test_update_changes_status_and_text(todo: dict[str, Tool], run_ctx: RunContext) -> None:
    await todo["todo_add"].call({"text": "draft"}, run_ctx)
    await todo["todo_add"].call({"text": "review"}, run_ctx)
    await todo["todo_update"].call({"id": 1, "status": "done", "text": "draft the plan"}, run_ctx)
    await todo["todo_update"].call({"id": 2, "status": "in_progress"}, run_ctx)
    listing = await todo["todo_list"].call({}, run_ctx)
    assert listing.splitlines()[:2] == ["#1 [done] draft the plan", "#2 [in_progress] review"]
    only_done = await todo["todo_list"].call({"status": "done"}, run_ctx)
    assert only_done.splitlines()[0] == "#1 [done] draft the plan"
    assert "#2" not in only_done


async def test_remove_deletes_an_item_and_ids_are_not_reused(
    todo: dict[str, Tool], run_ctx: RunContext
) -> None:
    await todo["todo_add"].call({"text": "a"}, run_ctx)
    await todo["todo_add"].call({"text": "b"}, run_ctx)
    removed = await todo["todo_remove"].call({"id": 1}, run_ctx)
    assert removed.startswith("Removed #1.\n#2 [pending] b")
    assert (await todo["todo_add"].call({"text": "c"}, run_ctx)).startswith("Added #3.")


async def test_unknown_id_is_a_tool_error_listing_the_existing_ones(
    todo: dict[str, Tool], run_ctx: RunContext
) -> None:
    await todo["todo_add"].call({"text": "a"}, run_ctx)
    with pytest.raises(ToolError, match=r"There is no todo item #7\. Existing items: #1\."):
        await todo["todo_update"].call({"id": 7, "status": "done"}, run_ctx)
    with pytest.raises(ToolError, match="Give a new status, a new text, or both"):
        await todo["todo_update"].call({"id": 1}, run_ctx)


async def test_each_session_has_its_own_list(todo: dict[str, Tool], run_ctx: RunContext) -> None:
    other = RunContext(session_id="s2", agent="tester")
    await todo["todo_add"].call({"text": "mine"}, run_ctx)
    assert await todo["todo_list"].call({}, other) == "The todo list is empty."


async def test_the_list_is_bounded_by_max_items(load_builtin: Any, run_ctx: RunContext) -> None:
    tools = await load_builtin("todo", {"max_items": 2})
    await tools["todo_add"].call({"text": "a"}, run_ctx)
    await tools["todo_add"].call({"text": "b"}, run_ctx)
    with pytest.raises(ToolError, match=r"full \(2 items\)"):
        await tools["todo_add"].call({"text": "c"}, run_ctx)
