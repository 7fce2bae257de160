"""Limits and budgets (SPEC section 9): what is counted, and the checks that end a turn."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Literal

from runner.agentfile.config import LimitsConfig
from runner.errors import LimitReached
from runner.models.base import Usage

__all__ = ["Budget", "RepeatGuard", "RepeatVerdict"]


@dataclass
class Budget:
    """Session-wide counters checked against ``limits`` before every step."""

    limits: LimitsConfig
    usage: Usage = field(default_factory=Usage)
    tool_calls: int = 0
    started: float = field(default_factory=time.monotonic)

    unpriced_told: bool = False

    def add(self, usage: Usage) -> str | None:
        """Count a model call's usage (sub-agents and selectors included).

        Returns a warning, once per session, when ``max_cost_usd`` is set and the call has no price:
        its cost cannot be counted, so the limit cannot be enforced (it is never counted as zero).
        """
        self.usage = self.usage + usage
        if (
            self.limits.max_cost_usd is None
            or usage.cost_usd is not None
            or not usage.total_tokens
            or self.unpriced_told
        ):
            return None
        self.unpriced_told = True
        return (
            f"unpriced: cost limit cannot be enforced (limits.max_cost_usd = {self.limits.max_cost_usd:g};"
            " the model's price is not in litellm's price data)"
        )

    def remaining_s(self) -> float | None:
        """Seconds left of ``limits.timeout_s``, or None when unlimited."""
        if self.limits.timeout_s is None:
            return None
        return self.limits.timeout_s - (time.monotonic() - self.started)

    def check(self) -> None:
        """Raise ``LimitReached`` when a token, cost or time budget is spent."""
        limits = self.limits
        used = self.usage.total_tokens
        if limits.max_tokens is not None and used >= limits.max_tokens:
            raise LimitReached(
                f"the session used {used} tokens (limits.max_tokens = {limits.max_tokens})",
                limit="max_tokens",
            )
        cost = self.usage.cost_usd
        if limits.max_cost_usd is not None and cost is not None and cost >= limits.max_cost_usd:
            raise LimitReached(
                f"the session cost ${cost:.4f} (limits.max_cost_usd = {limits.max_cost_usd})",
                limit="max_cost_usd",
            )
        remaining = self.remaining_s()
        if remaining is not None and remaining <= 0:
            raise LimitReached(
                f"the session ran {limits.timeout_s:g} s (limits.timeout_s)", limit="timeout_s"
            )


RepeatVerdict = Literal["ok", "warn", "stop"]


def _arguments_key(arguments: dict[str, object]) -> object:
    """A hashable value equal for equal arguments (flat arguments need no JSON)."""
    try:
        key = frozenset((name, type(value), value) for name, value in arguments.items())
        hash(key)
    except TypeError:  # lists, objects: their canonical JSON
        return json.dumps(arguments, sort_keys=True, default=str)
    return key


class RepeatGuard:
    """Counts identical (tool, arguments) calls within a turn: warn at ``max_repeat``, then stop.

    A loop is a repeat across steps: identical calls within one reply (four ``roll_die()`` at once)
    count once.
    """

    def __init__(self, max_repeat: int) -> None:
        self.max_repeat = max_repeat
        self.counts: dict[tuple[str, object], tuple[int, int]] = {}

    def reset(self) -> None:
        """Forget the counts (a new turn begins)."""
        self.counts.clear()

    def observe(self, name: str, arguments: dict[str, object], step: int = 0) -> tuple[RepeatVerdict, int]:
        """Record one call of step ``step``; the verdict and how many steps have now made it."""
        key = (name, _arguments_key(arguments))
        count, last_step = self.counts.get(key, (0, -1))
        if last_step == step:  # the same call again in the same reply
            return ("stop" if count > self.max_repeat else "ok"), count
        count += 1
        self.counts[key] = (count, step)
        if count > self.max_repeat:
            return "stop", count
        if count == self.max_repeat:
            return "warn", count
        return "ok", count
