"""What happens next, as values (SPEC section 5): a step continues the turn or ends it with a reason.

Every place that can end a turn (a limit, a repeat, a declined call, a hook, Ctrl+C, a reply with no
tool call, a call of a client's tool) returns an ``EndTurn``; nothing sets a shared flag. When
several meet in one step (parallel calls: one hits ``max_tool_calls`` while another's ``tool_post``
hook stops), ``decide`` picks one by ``PRECEDENCE``: the user's Ctrl+C first, then what the
configuration forbids (limits, repeats), then what a person or a hook asked for, then the ordinary
ends. Every call is answered whichever wins.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from runner.errors import LimitReached

__all__ = ["LIMIT_REASONS", "PRECEDENCE", "EndTurn", "StopReason", "decide"]

StopReason = Literal[
    "done", "max_steps", "limit", "repeat", "hook", "declined", "interrupted", "client_tools"
]

#: Which reason wins when several end the same step, strongest first.
PRECEDENCE: tuple[StopReason, ...] = (
    "interrupted",
    "limit",
    "repeat",
    "max_steps",
    "declined",
    "hook",
    "client_tools",
    "done",
)
#: Reasons that mean a limit ended the turn (exit code 3).
LIMIT_REASONS: frozenset[str] = frozenset({"limit", "max_steps", "repeat"})

_RANK = {reason: rank for rank, reason in enumerate(PRECEDENCE)}


@dataclass(frozen=True)
class EndTurn:
    """The turn ends: why, the note the history and the user get (None: none), and the limit, if any."""

    reason: StopReason
    note: str | None = None
    limit: LimitReached | None = None

    @classmethod
    def for_limit(cls, exc: LimitReached, reason: StopReason = "limit") -> EndTurn:
        """A limit or budget ended the turn."""
        return cls(reason, exc.message, exc)


def decide(candidates: Iterable[EndTurn | None]) -> EndTurn | None:
    """The one decision among ``candidates`` that wins (``PRECEDENCE``); None when none ends the turn."""
    best: EndTurn | None = None
    for candidate in candidates:
        if candidate is not None and (best is None or _RANK[candidate.reason] < _RANK[best.reason]):
            best = candidate
    return best
