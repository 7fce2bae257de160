"""Running one item: a ``Session`` on an open runtime, its result as a plain ``ItemResult``.

``ItemRunner`` is the seam between a batch's scheduling and its work: whoever holds an open
``AgentRuntime`` (this process's batch, or a worker elsewhere) runs items with ``run(item)`` and
gets back a JSON-serializable record, made from the run's ``Outcome`` (``from_outcome``). It retries
an item whose failure was transient (a retryable ``ModelError``: 429, 5xx, network, timeout) up to
``retries`` times, each attempt a new session with a transcript of its own, waiting as
``RETRY_POLICY`` says (a server's ``Retry-After`` honoured); ``interrupt()`` stops every item it is
running (Ctrl+C).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import runner.telemetry as telemetry
from runner.batch.inputs import BatchItem
from runner.batch.item_result import ItemResult
from runner.errors import ModelError
from runner.models.base import Usage
from runner.models.retry import RetryPolicy
from runner.runnable.agent import AgentRunner
from runner.runtime.runtime import AgentRuntime
from runner.session import RunOptions
from runner.session.events import LoopEvent, UsageUpdate
from runner.session.outcome import Outcome
from runner.store.transcript import new_session_id, sessions_dir

__all__ = ["RETRY_POLICY", "ItemRunner", "ItemRunnerBase", "is_transient"]

log = logging.getLogger("runner.batch")

#: How long an item waits before it runs again: the model calls' policy (backoff with jitter, a
#: server's ``Retry-After`` honoured and capped), one step up (an item is bigger than a call).
RETRY_POLICY = RetryPolicy(backoff_s=0.5, max_backoff_s=8.0)


def is_transient(exc: BaseException) -> bool:
    """Whether a failure may pass when the item runs again (429, 5xx, network, timeout)."""
    return isinstance(exc, ModelError) and exc.transient


class ItemRunnerBase:
    """What every item runner shares: the options, ``interrupt()`` of what runs (sessions, workflow
    engines: anything with ``interrupt()``), and ``run(item)``: the item's attempts, again after a
    transient failure up to ``retries`` times with a growing pause, no more after Ctrl+C."""

    def __init__(
        self,
        *,
        agent_sha256: str,
        variables: Mapping[str, Any] | None,
        retries: int,
        assume_yes: bool,
        on_usage: Callable[[Usage], None] | None,
        sleep: Callable[[float], Any],
    ) -> None:
        self.agent_sha256 = agent_sha256
        self.variables = dict(variables or {})
        self.retries = max(0, retries)
        self.assume_yes = assume_yes
        self.on_usage = on_usage
        """Called with each model call's usage as replies arrive (batch budgets, progress)."""
        self._sleep = sleep
        self._running: set[Any] = set()  # what ``interrupt`` stops
        self._interrupted = False

    def interrupt(self) -> None:
        """Stop every running item (its turn ends with every call answered; no retry follows)."""
        self._interrupted = True
        for running in list(self._running):
            running.interrupt()

    def attempts(self, item: BatchItem) -> Callable[[int], Awaitable[ItemResult]]:
        """How to make the n-th attempt at ``item`` (from 1)."""
        raise NotImplementedError

    async def run(self, item: BatchItem) -> ItemResult:
        """Run ``item`` (with retries of transient failures); never raises for the item's own errors.

        A ``StorageError`` (its transcript cannot be written: a full disk, a read-only folder)
        is not the item's: it raises, and the batch stops with it.
        """
        started = time.monotonic()
        result = self._result(item, status="error", error=item.problem, attempts=0)
        with telemetry.item(item.line, key=str(item.id)) as traced:
            if item.problem is None:
                attempt, number = self.attempts(item), 0
                while True:
                    number += 1
                    result = await attempt(number)
                    if not result.transient or number > self.retries or self._interrupted:
                        break
                    delay, _ = RETRY_POLICY.delay(number - 1, result.retry_after)
                    await self._sleep(delay)
            traced.set({"runner.batch.status": result.status, "runner.batch.attempts": result.attempts})
        result.duration_s = round(time.monotonic() - started, 4)
        return result

    def from_outcome(self, item: BatchItem, outcome: Outcome, attempt: int) -> ItemResult:
        """The item's line from its run's ``Outcome`` (the same status every door gives)."""
        return self._result(
            item,
            status=outcome.status,
            answer=outcome.answer,
            output=outcome.data,
            error=outcome.why(),
            reason=outcome.reason,
            usage=outcome.usage.as_dict(),
            cost_usd=outcome.usage.cost_usd,
            tools=list(outcome.tools),
            refused=list(outcome.refused),
            steps=outcome.steps,
            session_id=outcome.session_id,
            attempts=attempt,
            transient=outcome.transient,
            retry_after=outcome.retry_after,
            interrupted=outcome.status == "interrupted" or self._interrupted,
        )

    def _result(self, item: BatchItem, **fields: Any) -> ItemResult:
        return ItemResult(
            id=item.id,
            line=item.line,
            input_sha256=item.sha256,
            agent_sha256=self.agent_sha256,
            **fields,
        )


class ItemRunner(ItemRunnerBase):
    """Runs items on ``runtime``, one new session each (an ``AgentRunner``); results are plain records."""

    def __init__(
        self,
        runtime: AgentRuntime,
        *,
        agent_sha256: str = "",
        variables: Mapping[str, Any] | None = None,
        retries: int = 0,
        assume_yes: bool = False,
        on_usage: Callable[[Usage], None] | None = None,
        sleep: Callable[[float], Any] = asyncio.sleep,
    ) -> None:
        super().__init__(
            agent_sha256=agent_sha256 or runtime.provenance.sha256,
            variables=variables,
            retries=retries,
            assume_yes=assume_yes,
            on_usage=on_usage,
            sleep=sleep,
        )
        self.runtime = runtime
        self.agent = AgentRunner(runtime.config, runtime.settings, runtime=runtime)
        self._running.add(self.agent)
        self._ids: set[str | None] = set()  # the session ids of the items running now

    def attempts(self, item: BatchItem) -> Callable[[int], Awaitable[ItemResult]]:
        return lambda attempt: self._attempt(item, attempt)

    async def _attempt(self, item: BatchItem, attempt: int) -> ItemResult:
        def sink(event: LoopEvent) -> None:
            if isinstance(event, UsageUpdate) and self.on_usage is not None:
                self.on_usage(event.call)

        if self._interrupted:
            return self._result(
                item,
                status="interrupted",
                error="interrupted before it started",
                attempts=attempt,
                interrupted=True,
            )
        options = RunOptions(
            variables={**self.variables, **item.vars}, assume_yes=self.assume_yes or item.yes
        )
        session_id = self._new_session_id()
        try:
            outcome = await self.agent.run([item.input], options=options, sink=sink, session_id=session_id)
        finally:
            self._ids.discard(session_id)
        return self.from_outcome(item, outcome, attempt)

    def _new_session_id(self) -> str:
        """A session id no running item holds and no transcript has (hundreds of items start each
        second; ``new_session_id`` is unique only with high probability at that rate)."""
        folder = sessions_dir(self.runtime.settings.home)
        while True:
            session_id = new_session_id()
            if session_id not in self._ids and not (folder / f"{session_id}.jsonl").exists():
                self._ids.add(session_id)
                return session_id
