"""The input items of a stored response, as ``GET /v1/responses/{id}/input_items`` lists them.

Each item is stored with an id (the client's, or a new ``msg_...`` / ``fco_...`` one) and message
content as parts (``input_text`` for user, system and developer text, ``output_text`` for the
assistant's). A page takes ``limit`` (1 to 100, default 20), ``order`` (``desc``, the default, or
``asc``) and ``after`` / ``before`` (an item id), and says ``first_id``, ``last_id`` and ``has_more``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runner.serve.protocol import ApiError
from runner.serve.responses.events import new_id

__all__ = ["input_items_page", "stored_items"]

_PREFIX = {"message": "msg", "function_call": "fc", "function_call_output": "fco", "mcp_call": "mcp"}


def _parts(role: str, content: Any) -> list[dict[str, Any]]:
    kind = "output_text" if role == "assistant" else "input_text"
    if isinstance(content, str):
        return [{"type": kind, "text": content}]
    return [dict(part) for part in content if isinstance(part, dict)]


def stored_items(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The request's input items as they are listed (validated already: ``items.input_messages``)."""
    listed: list[dict[str, Any]] = []
    for item in items:
        kind = item.get("type", "message")
        entry = {**item, "type": kind}
        if not isinstance(entry.get("id"), str):
            entry["id"] = new_id(_PREFIX.get(kind, "item"))
        if kind == "message":
            entry["content"] = _parts(item["role"], item["content"])
            entry["status"] = "completed"
        elif kind in ("function_call", "function_call_output"):
            entry.setdefault("status", "completed")
        listed.append(entry)
    return listed


def _limit(value: str | None) -> int:
    if value is None:
        return 20
    if not value.isdigit() or not 1 <= int(value) <= 100:
        raise ApiError(400, "'limit' must be an integer from 1 to 100", param="limit")
    return int(value)


def _position(items: list[dict[str, Any]], item_id: str, param: str) -> int:
    for index, item in enumerate(items):
        if item["id"] == item_id:
            return index
    raise ApiError(400, f"'{param}': no input item '{item_id[:80]}' in this response", param=param)


def input_items_page(items: list[dict[str, Any]], query: Mapping[str, str]) -> dict[str, Any]:
    """One page of ``items`` as the API lists them."""
    order = query.get("order", "desc")
    if order not in ("asc", "desc"):
        raise ApiError(400, "'order' must be asc or desc", param="order")
    limit = _limit(query.get("limit"))
    ordered = items if order == "asc" else items[::-1]
    start, stop = 0, len(ordered)
    if query.get("after"):
        start = _position(ordered, query["after"], "after") + 1
    if query.get("before"):
        stop = _position(ordered, query["before"], "before")
    window = ordered[start:stop]
    page = window[:limit]
    return {
        "object": "list",
        "data": page,
        "first_id": page[0]["id"] if page else None,
        "last_id": page[-1]["id"] if page else None,
        "has_more": len(window) > limit,
    }
