"""What decided a tool call's fate, as span events: hook chains (``runner.hook``) and the permission
rules and confirmation (``runner.permission``).

Both are ``telemetry.count`` events: on the current span (a tool call's decisions land on its
``execute_tool`` span, a turn hook's on the agent's) and told to the recorders. While nothing
listens, each call is one global read.
"""

from __future__ import annotations

from typing import Any

from runner.telemetry import active, count

__all__ = ["hook_decision", "permission"]


def hook_decision(event: str, outcome: Any) -> None:
    """A hook chain's answer (a ``ChainOutcome``) as a ``runner.hook`` event, when it decided
    something: ``stop``, ``deny``, ``rewrite`` (arguments or output changed); at ``tool_pre`` a
    chain that did none of these let the call go ahead, which is the decision ``allow``."""
    if not active():
        return
    if outcome.stop:
        decided = "stop"
    elif outcome.deny:
        decided = "deny"
    elif outcome.arguments is not None or outcome.output:
        decided = "rewrite"
    elif event == "tool_pre":
        decided = "allow"
    else:
        return
    count(
        "runner.hook",
        {"runner.hook.event": event, "runner.hook.decision": decided, "runner.hook.reason": outcome.reason},
    )


def permission(tool: str, decision: str, *, rule: str | None = None, answer: str | None = None) -> None:
    """A ``runner.permission`` event: the permission rules' (or the tool's ``confirm``) decision on
    a call to ``tool`` — ``allow``, ``deny`` or ``ask`` — the rule that matched (its pattern; None
    when the tool's own ``confirm`` asked), and for ``ask`` the answer (``allow`` / ``deny``)."""
    if not active():
        return
    count(
        "runner.permission",
        {
            "gen_ai.tool.name": tool,
            "runner.permission.decision": decision,
            "runner.permission.rule": rule,
            "runner.permission.answer": answer,
        },
    )
