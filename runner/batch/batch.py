"""A batch: one agent over many items, concurrently, on one shared runtime (asyncio).

``Batch.results()`` opens the agent's runtime once (its tool sources, one model client), starts
``concurrency`` workers, each running items with the ``ItemRunner`` (a session per item, a
transcript per item) and yields each ``ItemResult``: in input order (``ordered``, held back until
the items before it are done) or as they finish. At most ``window`` items are between being taken
from the input and being yielded, so memory stays bounded however long the input is. Items are
taken from the iterable only as workers get free.

Budgets (``max_cost_usd``, ``max_tokens``) count every model call of every item as its reply
arrives; once one is spent, no new item starts, and those running finish within their own limits.
``rpm`` / ``tpm`` wrap the runtime's model in one ``RateLimiter`` that all items share.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from runner.agentfile.config import AgentConfig
from runner.batch.budget import BatchBudget
from runner.batch.inputs import BatchItem
from runner.batch.item import ItemRunner
from runner.batch.item_result import ItemResult
from runner.batch.limiter import RateLimiter
from runner.batch.pooled_model import batch_model
from runner.errors import StorageError
from runner.models.base import Model, Usage
from runner.runtime.runtime import AgentRuntime
from runner.runtime.settings import RuntimeSettings
from runner.session import open_runtime

__all__ = ["Batch", "BatchLimits", "BatchStats"]


@dataclass(frozen=True)
class BatchLimits:
    """How a batch runs: concurrency, budgets and rates across all items, retries, how many items."""

    concurrency: int = 8
    max_cost_usd: float | None = None
    max_tokens: int | None = None
    rpm: int | None = None
    tpm: int | None = None
    retries: int = 0
    limit: int | None = None
    """Only the first ``limit`` items of the input (skipped ones count); None: all."""


@dataclass
class BatchStats:
    """Counts so far (the progress display reads them while the batch runs)."""

    ok: int = 0
    failed: int = 0
    limited: int = 0
    interrupted: int = 0
    in_flight: int = 0
    skipped: int = 0
    """Items the caller's ``skip`` said are done already (a resumed batch)."""
    not_started: int = 0
    """Items taken from the input but not started (a budget was spent, or Ctrl+C)."""
    tokens: int = 0
    cost_usd: float = 0.0
    unpriced: int = 0
    """Model calls whose cost is unknown (no price for the model); they count as 0 towards the cost."""
    stopped: str | None = None
    """Why no new item started any more (a budget, as a sentence); None when none stopped it."""
    transient_retries: int = 0
    item_seconds: float = 0.0
    """The items' run time, summed (its ratio to the wall time is the achieved concurrency)."""
    phase: str | None = None
    """What the batch is doing before its items can start (``starting a local Ray``); None once
    they can (the progress display shows it, with the seconds since ``phase_since``)."""
    phase_since: float = 0.0

    @property
    def finished(self) -> int:
        return self.ok + self.failed + self.limited

    def enter(self, phase: str | None) -> None:
        """Say what the batch does now, before its items start (None: they start)."""
        self.phase, self.phase_since = phase, time.monotonic()


@dataclass
class _Flow:
    """The queues between the feeder, the workers and the consumer."""

    work: asyncio.Queue[tuple[int, BatchItem] | None]
    out: asyncio.Queue[tuple[int, ItemResult | None] | BaseException | None]
    window: asyncio.Semaphore
    tasks: list[asyncio.Task[None]] = field(default_factory=list)


class Batch:
    """One agent over ``items``; iterate ``results()`` once."""

    def __init__(
        self,
        config: AgentConfig,
        items: Iterable[BatchItem],
        *,
        settings: RuntimeSettings | None = None,
        model: Model | None = None,
        variables: Mapping[str, Any] | None = None,
        limits: BatchLimits | None = None,
        ordered: bool = True,
        assume_yes: bool = False,
        skip: Callable[[BatchItem], bool] | None = None,
        agent_sha256: str = "",
        window: int | None = None,
        limiter: RateLimiter | None = None,
    ) -> None:
        self.config = config
        self.items = items
        self.settings = settings or RuntimeSettings()
        self.model = model
        self.variables = dict(variables or {})
        self.limits = limits or BatchLimits()
        self.ordered = ordered
        self.assume_yes = assume_yes
        self.skip = skip
        self.agent_sha256 = agent_sha256
        concurrency = max(1, self.limits.concurrency)
        self.window = window or max(4 * concurrency, 64)
        self.stats = BatchStats()
        self.budget = BatchBudget(max_cost_usd=self.limits.max_cost_usd, max_tokens=self.limits.max_tokens)
        self.limiter = limiter
        if limiter is None and (self.limits.rpm or self.limits.tpm):
            self.limiter = RateLimiter(rpm=self.limits.rpm or None, tpm=self.limits.tpm or None)
        self.runner: ItemRunner | None = None
        self._runtime: AgentRuntime | None = None
        self._interrupted = False

    # ----------------------------------------------------------------- control

    def interrupt(self) -> None:
        """Ctrl+C: start no new item and stop the running ones (their transcripts stay whole)."""
        self._interrupted = True
        if self.runner is not None:
            self.runner.interrupt()

    @property
    def interrupted(self) -> bool:
        return self._interrupted

    def _count(self, usage: Usage) -> None:
        self.budget.add(usage)
        stats, budget = self.stats, self.budget
        stats.tokens, stats.cost_usd, stats.unpriced = budget.tokens, budget.cost_usd, budget.unpriced

    def _may_start(self) -> bool:
        if self._interrupted:
            return False
        spent = self.budget.spent()
        if spent is not None and self.stats.stopped is None:
            self.stats.stopped = spent
        return spent is None

    # ----------------------------------------------------------------- running

    # The three methods below are where items run: here, on one runtime in this process. A backend
    # that runs items elsewhere overrides them; feeding, order, budgets and stats stay as they are.

    async def start(self) -> None:
        """Open the batch's runtime (its model a client per few items, behind the rate limiter if
        any) and the ``ItemRunner`` on it."""
        model = batch_model(
            self.config,
            self.settings,
            concurrency=max(1, self.limits.concurrency),
            given=self.model,
            limiter=self.limiter,
        )
        self._runtime = await open_runtime(self.config, self.settings, model=model)
        self.runner = ItemRunner(
            self._runtime,
            agent_sha256=self.agent_sha256,
            variables=self.variables,
            retries=self.limits.retries,
            assume_yes=self.assume_yes,
            on_usage=self._count,
        )
        if self._interrupted:
            self.runner.interrupt()

    async def run_item(self, item: BatchItem) -> ItemResult:
        """Run one item (never raises for the item's own errors)."""
        assert self.runner is not None
        return await self.runner.run(item)

    async def stop(self) -> None:
        """Close what ``start`` opened."""
        runtime, self._runtime = self._runtime, None
        if runtime is not None:
            await runtime.aclose()

    async def results(self) -> AsyncGenerator[ItemResult, None]:
        """Each item's result (in input order when ``ordered``); the runtime closes at the end."""
        await self.start()
        concurrency = max(1, self.limits.concurrency)
        flow = _Flow(asyncio.Queue(maxsize=1), asyncio.Queue(), asyncio.Semaphore(self.window))
        flow.tasks.append(asyncio.create_task(self._feed(flow, concurrency), name="runner-batch-feed"))
        workers = [asyncio.create_task(self._work(flow)) for _ in range(concurrency)]
        flow.tasks.extend(workers)
        closer = asyncio.create_task(self._close_when_done(flow, workers))
        try:
            async for result in self._collect(flow):
                yield result
        finally:
            for task in [*flow.tasks, closer]:
                task.cancel()
            await asyncio.gather(*flow.tasks, closer, return_exceptions=True)
            await asyncio.shield(self.stop())

    async def _feed(self, flow: _Flow, workers: int) -> None:
        try:
            seq = 0
            for taken, item in enumerate(self.items, 1):
                if self.limits.limit is not None and taken > self.limits.limit:
                    break
                if self.skip is not None and self.skip(item):
                    self.stats.skipped += 1
                    continue
                if not self._may_start():
                    break
                await flow.window.acquire()
                await flow.work.put((seq, item))
                seq += 1
        except Exception as exc:  # the input's own error (duplicate ids, unreadable file)
            await flow.out.put(exc)
        # Not in a ``finally``: once cancelled, no worker takes from the queue any more, and a put
        # into the full queue would hold the cancellation (and the command) forever.
        for _ in range(workers):
            await flow.work.put(None)

    async def _work(self, flow: _Flow) -> None:
        stats = self.stats
        while (entry := await flow.work.get()) is not None:
            seq, item = entry
            if not self._may_start():
                stats.not_started += 1
                await flow.out.put((seq, None))
                continue
            stats.in_flight += 1
            try:
                result = await self.run_item(item)
            except StorageError as exc:  # a transcript cannot be written: the batch stops with it
                await flow.out.put(exc)
                return
            finally:
                stats.in_flight -= 1
            stats.item_seconds += result.duration_s
            stats.transient_retries += max(0, result.attempts - 1)
            if result.interrupted:
                stats.interrupted += 1
            elif result.ok:  # ok, or stopped by the agent's own hook
                stats.ok += 1
            elif result.status == "limit":
                stats.limited += 1
            else:
                stats.failed += 1
            await flow.out.put((seq, result))

    async def _close_when_done(self, flow: _Flow, workers: list[asyncio.Task[None]]) -> None:
        await asyncio.gather(*workers, return_exceptions=True)
        await flow.out.put(None)

    async def _collect(self, flow: _Flow) -> AsyncIterator[ItemResult]:
        pending: dict[int, ItemResult | None] = {}
        expected = 0
        while (entry := await flow.out.get()) is not None:
            if isinstance(entry, BaseException):
                raise entry
            seq, result = entry
            if not self.ordered:
                flow.window.release()
                if result is not None:
                    yield result
                continue
            pending[seq] = result
            while expected in pending:
                ready = pending.pop(expected)
                expected += 1
                flow.window.release()
                if ready is not None:
                    yield ready
        for seq in sorted(pending):  # nothing is left here normally; never lose a result
            if (ready := pending.pop(seq)) is not None:
                yield ready
