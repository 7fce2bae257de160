"""The one retry policy: how long to wait before the next attempt of a model call or a batch item.

Exponential backoff with jitter (±25 %), unless the server said how long (``Retry-After``: that
long, capped by ``max_wait_s``). Model calls (``ResilientModel``) and batch items
(``runner.batch.item``) both wait by it; the stream rule (a stream is retried only before its first
event) is the model layer's. A kept library (tenacity) was weighed: its waits know nothing of a
server's ``Retry-After``, which is the half that matters here, so the policy is these few lines.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

__all__ = ["MAX_RETRY_AFTER_S", "RetryPolicy"]

#: The longest a ``Retry-After`` is waited for (a longer one is cut to this).
MAX_RETRY_AFTER_S = 60.0


@dataclass(frozen=True)
class RetryPolicy:
    """Backoff ``backoff_s * 2**attempt`` (at most ``max_backoff_s``) with jitter, or the server's wait."""

    backoff_s: float = 0.5
    max_backoff_s: float = 8.0
    max_wait_s: float = MAX_RETRY_AFTER_S

    def backoff(self, attempt: int) -> float:
        """The jittered backoff before retry ``attempt + 1`` (``attempt`` from 0)."""
        delay = min(self.max_backoff_s, self.backoff_s * 2.0**attempt)
        return delay * random.uniform(0.75, 1.25)

    def delay(self, attempt: int, retry_after: float | None = None) -> tuple[float, str]:
        """Seconds to wait before retry ``attempt + 1``, and why in words ("" for the backoff)."""
        if retry_after is None:
            return self.backoff(attempt), ""
        delay = min(max(0.0, retry_after), self.max_wait_s)
        if retry_after > delay:
            return (
                delay,
                f" (the server asked for {retry_after:g} s; the most the runner waits is {delay:g} s)",
            )
        return delay, " as the server asked (Retry-After)"
