"""The ``todo`` toolset: a todo list the model keeps for itself during a session, in memory only.

Tools: ``todo_add``, ``todo_list``, ``todo_update`` and ``todo_remove``. Items have a number (``id``),
a text and a status (``pending``, ``in_progress`` or ``done``). Each session (``RunContext.session_id``)
has its own list, kept on the tools built for the source and gone when they are; nothing is written
to disk. Option ``max_items`` (default 100) bounds the list.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, get_args

from runner.errors import ToolError
from runner.tools.base import RunContext, Tool, ToolCallable
from runner.tools.toolset import builtin_tool

if TYPE_CHECKING:
    from runner.tools.toolset import ToolsetContext

__all__ = ["OPTIONS_SCHEMA", "build"]

OPTIONS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "max_items": {
            "type": "integer",
            "minimum": 1,
            "default": 100,
            "description": "the most items one session's list may hold",
        },
    },
    "additionalProperties": False,
}

Status = Literal["pending", "in_progress", "done"]
_STATUSES: tuple[str, ...] = get_args(Status)


@dataclass
class _Item:
    id: int
    text: str
    status: str = "pending"


@dataclass
class _TodoList:
    """One session's items, in the order they were added."""

    items: dict[int, _Item] = field(default_factory=dict)
    next_id: int = 1

    def get(self, item_id: int) -> _Item:
        """The item numbered ``item_id``; an unknown number is a ToolError listing the valid ones."""
        item = self.items.get(item_id)
        if item is None:
            valid = ", ".join(f"#{number}" for number in self.items) or "none (the list is empty)"
            raise ToolError(f"There is no todo item #{item_id}. Existing items: {valid}.")
        return item

    def render(self, status: str | None = None) -> str:
        """The list as ``#id [status] text`` lines with a count per status."""
        shown = [item for item in self.items.values() if status is None or item.status == status]
        if not self.items:
            return "The todo list is empty."
        counts = ", ".join(
            f"{sum(1 for item in self.items.values() if item.status == s)} {s.replace('_', ' ')}"
            for s in _STATUSES
        )
        lines = [f"#{item.id} [{item.status}] {item.text}" for item in shown]
        if not lines:
            lines = [f"(no {status.replace('_', ' ')} items)" if status else "(no items)"]
        noun = "item" if len(self.items) == 1 else "items"
        return "\n".join([*lines, f"({len(self.items)} {noun}: {counts})"])


def build(options: dict[str, Any], ctx: ToolsetContext) -> list[Tool]:
    """The todo tools, sharing one list per session."""
    max_items = int(options["max_items"])
    lists: dict[str, _TodoList] = {}

    def todo_list_of(run: RunContext) -> _TodoList:
        return lists.setdefault(run.session_id, _TodoList())

    async def todo_add(arguments: dict[str, Any], run: RunContext) -> str:
        todos = todo_list_of(run)
        text = _clean_text(arguments["text"])
        if len(todos.items) >= max_items:
            raise ToolError(f"The todo list is full ({max_items} items); remove finished items first.")
        item = _Item(todos.next_id, text)
        todos.items[item.id] = item
        todos.next_id += 1
        return f"Added #{item.id}.\n{todos.render()}"

    async def todo_list(arguments: dict[str, Any], run: RunContext) -> str:
        return todo_list_of(run).render(arguments.get("status"))

    async def todo_update(arguments: dict[str, Any], run: RunContext) -> str:
        todos = todo_list_of(run)
        item = todos.get(int(arguments["id"]))
        if "status" not in arguments and "text" not in arguments:
            raise ToolError("Give a new status, a new text, or both.")
        if "status" in arguments:
            item.status = str(arguments["status"])
        if "text" in arguments:
            item.text = _clean_text(arguments["text"])
        return f"Updated #{item.id}.\n{todos.render()}"

    async def todo_remove(arguments: dict[str, Any], run: RunContext) -> str:
        todos = todo_list_of(run)
        item = todos.get(int(arguments["id"]))
        del todos.items[item.id]
        return f"Removed #{item.id}.\n{todos.render()}"

    id_property = {"type": "integer", "minimum": 1, "description": "the item's number (#id)"}
    status_property = {"type": "string", "enum": list(_STATUSES)}
    return [
        _tool(
            "todo_add",
            "Add an item (status pending) to your todo list for this session; returns the whole list. "
            "Plan multi-step work with it and keep it up to date.",
            {"text": {"type": "string", "minLength": 1, "description": "what is to be done"}},
            ["text"],
            todo_add,
        ),
        _tool(
            "todo_list",
            "Show your todo list: each item's #id, status and text.",
            {"status": {**status_property, "description": "show only items with this status"}},
            [],
            todo_list,
        ),
        _tool(
            "todo_update",
            "Change the status (pending, in_progress, done) and/or the text of a todo item.",
            {
                "id": id_property,
                "status": {**status_property, "description": "the new status"},
                "text": {"type": "string", "minLength": 1, "description": "the new text"},
            },
            ["id"],
            todo_update,
        ),
        _tool(
            "todo_remove",
            "Remove an item from your todo list.",
            {"id": id_property},
            ["id"],
            todo_remove,
        ),
    ]


def _clean_text(value: Any) -> str:
    text = " ".join(str(value).split())
    if not text:
        raise ToolError("The text of a todo item cannot be empty.")
    return text


def _tool(
    name: str, description: str, properties: dict[str, Any], required: list[str], call: ToolCallable
) -> Tool:
    return builtin_tool("todo", name, description, properties, required, call)
