"""Rate limits shared by every item of a batch: a ``Model`` whose requests wait their turn.

``RateLimiter`` keeps the requests and the tokens of the last minute (a sliding window). A request
starts when fewer than ``rpm`` requests started in the window and the tokens of the replies that
came back in it are fewer than ``tpm``; otherwise it waits until the oldest leaves the window.
Tokens are only known when a reply arrives, so ``tpm`` holds back the requests after the one that
went over, not that one. ``LimitedModel`` wraps the batch runtime's model: every request of every
item (each step, each retry of the model's own) passes the one limiter.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any

from runner.models.base import Completed, Model, Reply, Request, StreamEvent

__all__ = ["LimitedModel", "RateLimiter"]


class RateLimiter:
    """At most ``rpm`` requests started and ``tpm`` tokens answered in any ``window_s`` seconds."""

    def __init__(
        self,
        *,
        rpm: int | None = None,
        tpm: int | None = None,
        window_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rpm, self.tpm, self.window_s = rpm, tpm, window_s
        self._clock = clock
        self._starts: deque[float] = deque()
        self._tokens: deque[tuple[float, int]] = deque()
        self._token_sum = 0
        self._lock = asyncio.Lock()
        self.waited_s = 0.0
        """How long requests waited in all (reported in the summary)."""

    def _expire(self, now: float) -> None:
        edge = now - self.window_s
        while self._starts and self._starts[0] <= edge:
            self._starts.popleft()
        while self._tokens and self._tokens[0][0] <= edge:
            self._token_sum -= self._tokens.popleft()[1]

    def delay(self) -> float:
        """Seconds until a request may start (0: now)."""
        now = self._clock()
        self._expire(now)
        waits = [0.0]
        if self.rpm is not None and len(self._starts) >= self.rpm:
            waits.append(self._starts[len(self._starts) - self.rpm] + self.window_s - now)
        if self.tpm is not None and self._token_sum >= self.tpm:
            over, running = self._token_sum - self.tpm, 0
            for stamp, tokens in self._tokens:  # the oldest replies whose leaving brings us under
                running += tokens
                if running > over:
                    waits.append(stamp + self.window_s - now)
                    break
        return max(waits)

    async def acquire(self) -> None:
        """Wait for the turn of one request (requests start in the order they asked)."""
        async with self._lock:
            while (wait := self.delay()) > 0:
                self.waited_s += wait
                await asyncio.sleep(wait)
            self._starts.append(self._clock())

    def spent(self, tokens: int) -> None:
        """A reply came back with ``tokens`` (prompt and completion)."""
        if tokens > 0:
            self._tokens.append((self._clock(), tokens))
            self._token_sum += tokens


class LimitedModel:
    """``model`` with every request passing ``limiter`` first; everything else is the model's."""

    def __init__(self, model: Model, limiter: RateLimiter) -> None:
        self._inner = model
        self.limiter = limiter

    @property
    def name(self) -> str:
        return self._inner.name

    @property
    def supports_tools(self) -> bool | None:
        return self._inner.supports_tools

    def __getattr__(self, name: str) -> Any:  # structured_output, context window, ...
        return getattr(self._inner, name)

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        await self.limiter.acquire()
        async for event in self._inner.stream(request):
            if isinstance(event, Completed):
                self.limiter.spent(_tokens(event.reply))
            yield event

    async def complete(self, request: Request) -> Reply:
        await self.limiter.acquire()
        reply = await self._inner.complete(request)
        self.limiter.spent(_tokens(reply))
        return reply

    async def aclose(self) -> None:
        await self._inner.aclose()


def _tokens(reply: Reply) -> int:
    usage = reply.usage
    return usage.total_tokens or usage.prompt_tokens + usage.completion_tokens
