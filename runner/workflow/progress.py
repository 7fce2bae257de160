"""A step event as the one line people read: ``runner run`` prints it on stderr, ``runner serve``
sends it as the answer's reasoning."""

from __future__ import annotations

from typing import Any

__all__ = ["step_line"]


def _money(cost: float | None) -> str:
    return f"${cost:.4f}" if cost is not None else "cost unknown"


def step_line(event: dict[str, Any], *, cost: bool = True) -> str | None:
    """``[key] started (agent NAME)``, ``[key] ok in 1.92 s, 412 tokens, $0.0004``, ... (None: an
    event that has no line); ``cost``: an agent step's end says what it cost."""
    key, kind = event.get("key", ""), event.get("type")
    if kind == "step_start":
        what = f"agent {event['agent']}" if event.get("agent") else str(event.get("kind", ""))
        return f"[{key}] started ({what})"
    if kind == "step_reused":
        return f"[{key}] done earlier (recorded output reused)"
    if kind != "step_end":
        return None
    line = f"[{key}] {event.get('status')} in {float(event.get('duration_s') or 0):.2f} s"
    if event.get("kind") == "agent" and "tokens" in event:
        line += f", {event['tokens']} tokens" + (f", {_money(event.get('cost_usd'))}" if cost else "")
    if event.get("error"):
        line += f": {event['error']}"
    return line
