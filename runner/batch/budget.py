"""Budgets across a batch: tokens and cost of every item's model calls, counted as replies arrive."""

from __future__ import annotations

from runner.models.base import Usage

__all__ = ["BatchBudget"]


class BatchBudget:
    """``max_cost_usd`` and ``max_tokens`` over all items; once spent, no new item starts."""

    def __init__(self, *, max_cost_usd: float | None = None, max_tokens: int | None = None) -> None:
        self.max_cost_usd = max_cost_usd
        self.max_tokens = max_tokens
        self.tokens = 0
        self.cost_usd = 0.0
        self.unpriced = 0
        """Calls whose cost is unknown (no price for the model): they count as 0 towards the cost."""

    def add(self, usage: Usage) -> None:
        """One model call's usage."""
        self.tokens += usage.total_tokens or usage.prompt_tokens + usage.completion_tokens
        if usage.cost_usd is None:
            self.unpriced += 1
        else:
            self.cost_usd += usage.cost_usd

    def spent(self) -> str | None:
        """Which budget is spent, as a sentence; None while there is room."""
        if self.max_tokens is not None and self.tokens >= self.max_tokens:
            return f"the batch used {self.tokens} tokens (--max-tokens {self.max_tokens})"
        if self.max_cost_usd is not None and self.cost_usd >= self.max_cost_usd:
            return f"the batch cost ${self.cost_usd:.4f} (--max-cost-usd {self.max_cost_usd:g})"
        return None
