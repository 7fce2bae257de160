"""``WorkflowBudget``: the workflow's ``limits``, one budget for every agent it runs.

Before an agent step starts, ``refuse`` says whether the budget is spent (tokens, cost, time, agent
steps); a child session starts with its own limits lowered to what is left (``child_limits``), and
after every model call of any step ``share`` lowers each running session's limits again, so steps
running at once share what is left and each stops at its next model call once it is spent.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from runner.agentfile.workflow import WorkflowLimits
from runner.models.base import Usage
from runner.session import Session

__all__ = ["WorkflowBudget"]


class WorkflowBudget:
    """What the workflow has spent (finished steps; resumed ones included) against its limits."""

    def __init__(self, limits: WorkflowLimits, *, usage: Usage | None = None, agent_steps: int = 0) -> None:
        self.limits = limits
        self.usage = usage or Usage()
        self.agent_steps = agent_steps
        self.started = time.monotonic()

    def refuse(self) -> str | None:
        """Why no agent step may start now (a budget, as a sentence), or None (then it is counted)."""
        limits, usage = self.limits, self.usage
        spent = None
        if limits.max_tokens is not None and usage.total_tokens >= limits.max_tokens:
            spent = f"the workflow used {usage.total_tokens} tokens (limits.max_tokens {limits.max_tokens})"
        elif limits.max_cost_usd is not None and (usage.cost_usd or 0.0) >= limits.max_cost_usd:
            spent = f"the workflow spent ${usage.cost_usd:.4f} (limits.max_cost_usd {limits.max_cost_usd:g})"
        elif limits.timeout_s is not None and time.monotonic() - self.started >= limits.timeout_s:
            spent = f"the workflow ran {limits.timeout_s:g} s (limits.timeout_s)"
        elif limits.max_steps is not None and self.agent_steps >= limits.max_steps:
            spent = f"the workflow ran {self.agent_steps} agent steps (limits.max_steps)"
        if spent is None:
            self.agent_steps += 1
        return spent

    def child_limits(self) -> dict[str, Any]:
        """A child session's limits at its start: what the budget has left."""
        limits, usage = self.limits, self.usage
        lowered: dict[str, Any] = {}
        if limits.max_tokens is not None:
            lowered["max_tokens"] = max(1, limits.max_tokens - usage.total_tokens)
        if limits.max_cost_usd is not None:
            lowered["max_cost_usd"] = max(1e-9, limits.max_cost_usd - (usage.cost_usd or 0.0))
        if limits.timeout_s is not None:
            lowered["timeout_s"] = max(0.001, limits.timeout_s - (time.monotonic() - self.started))
        return lowered

    def share(self, running: Iterable[Session]) -> None:
        """After a model call: each running session may spend only what is left of the budget."""
        limits = self.limits
        if limits.max_tokens is None and limits.max_cost_usd is None:
            return
        sessions = list(running)
        spent = self.usage
        for session in sessions:
            spent = spent + session.usage
        for session in sessions:
            lower: dict[str, Any] = {}
            if limits.max_tokens is not None:
                left = max(0, limits.max_tokens - spent.total_tokens)
                lower["max_tokens"] = session.usage.total_tokens + left
            if limits.max_cost_usd is not None and spent.cost_usd is not None:
                left_usd = max(0.0, limits.max_cost_usd - spent.cost_usd)
                lower["max_cost_usd"] = (session.usage.cost_usd or 0.0) + left_usd
            session.lower_limits(lower)
