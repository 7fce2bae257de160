"""What the serve --watch tests share: waiting for a condition, and a model that calls ``version``."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_for(condition: Callable[[], bool], *, timeout: float = 15.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def reply(body: dict[str, Any]) -> dict[str, Any]:
    """Call the ``version`` tool, then say what it returned."""
    if body["messages"][-1]["role"] == "user":
        return {"tool_calls": [{"name": "version", "arguments": {}}]}
    return {"content": f"tool said {body['messages'][-1]['content']}"}
