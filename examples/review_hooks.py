"""Hooks of the hooks example."""

from __future__ import annotations

from typing import Any


def ask_for_review(event: Any) -> dict[str, Any] | None:
    """After the first turn, queue one request for a self-review (loop_continue)."""
    if event.turn != 1:
        return None
    return {"messages": ["Review your previous answer for mistakes. Fix them, or reply 'Looks right.'"]}
