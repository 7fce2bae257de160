"""Running one item: a ``Session`` on an open runtime, its result as a plain ``ItemResult``.

``ItemRunner`` is the seam between a batch's scheduling and its work: whoever holds an open
``AgentRuntime`` (this process's batch, or a worker elsewhere) runs items with ``run(item)`` and
gets back a JSON-serializable record. It retries an item whose failure was transient (a retryable
``ModelError``: 429, 5xx, network, timeout) up to ``retries`` times, each attempt a new session
with a transcript of its own; ``interrupt()`` stops every item it is running (Ctrl+C).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from runner.batch.inputs import BatchItem
from runner.batch.record import ItemResult
from runner.errors import ModelError, RunnerError, StorageError
from runner.models.base import Usage
from runner.runtime.runtime import AgentRuntime
from runner.session import RunOptions, RunResult, Session
from runner.session.decisions import LIMIT_REASONS
from runner.session.events import AssistantMessage, LoopEvent, UsageUpdate
from runner.store.transcript import new_session_id, sessions_dir

__all__ = ["ItemRunner", "ItemRunnerBase", "is_transient"]

log = logging.getLogger("runner.batch")

#: Seconds before the n-th retry of an item (the last one repeats), unless the server said how long.
BACKOFF_S = (0.5, 1.0, 2.0, 4.0, 8.0)


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
        if item.problem is None:
            attempt, number = self.attempts(item), 0
            while True:
                number += 1
                result = await attempt(number)
                if not result.transient or number > self.retries or self._interrupted:
                    break
                await self._sleep(BACKOFF_S[min(number, len(BACKOFF_S)) - 1])
        result.duration_s = round(time.monotonic() - started, 4)
        return result

    def _result(self, item: BatchItem, **fields: Any) -> ItemResult:
        return ItemResult(
            id=item.id,
            line=item.line,
            input_sha256=item.sha256,
            agent_sha256=self.agent_sha256,
            **fields,
        )


@dataclass
class _Attempt:
    """What one attempt saw while it ran."""

    session_id: str | None = None
    usage: Usage = field(default_factory=Usage)
    tools: list[str] = field(default_factory=list)


class ItemRunner(ItemRunnerBase):
    """Runs items on ``runtime``, one new session each; results are plain records."""

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
        self._ids: set[str | None] = set()  # the session ids of the items running now

    def attempts(self, item: BatchItem) -> Callable[[int], Awaitable[ItemResult]]:
        return lambda attempt: self._attempt(item, attempt)

    async def _attempt(self, item: BatchItem, attempt: int) -> ItemResult:
        seen = _Attempt()

        def sink(event: LoopEvent) -> None:
            if isinstance(event, UsageUpdate):
                seen.usage = event.session
                if self.on_usage is not None:
                    self.on_usage(event.call)
            elif isinstance(event, AssistantMessage):
                seen.tools.extend(c["function"]["name"] for c in event.message.get("tool_calls") or ())

        options = RunOptions(variables={**self.variables, **item.vars}, assume_yes=self.assume_yes)
        session: Session | None = None
        try:
            seen.session_id = self._new_session_id()
            session = Session(self.runtime, sink=sink, options=options, session_id=seen.session_id)
            self._running.add(session)
            if self._interrupted:
                return self._failed(item, seen, attempt, "interrupted before it started")
            run = await session.run([item.input])
            return self._finished(item, run, attempt, seen.tools)
        except StorageError:
            raise  # a transcript that cannot be written: the batch's problem, not this item's
        except RunnerError as exc:
            return self._failed(item, seen, attempt, str(exc), transient=is_transient(exc))
        except Exception as exc:  # a bug or a tool's escape: the item fails, the batch goes on
            log.exception("batch item %s failed", item.id)
            return self._failed(item, seen, attempt, f"internal error: {type(exc).__name__}: {exc}")
        finally:
            if session is not None:
                self._running.discard(session)
                await asyncio.shield(session.close())
            self._ids.discard(seen.session_id)

    def _new_session_id(self) -> str:
        """A session id no running item holds and no transcript has (hundreds of items start each
        second; ``new_session_id`` is unique only with high probability at that rate)."""
        folder = sessions_dir(self.runtime.settings.home)
        while True:
            session_id = new_session_id()
            if session_id not in self._ids and not (folder / f"{session_id}.jsonl").exists():
                self._ids.add(session_id)
                return session_id

    def _finished(self, item: BatchItem, run: RunResult, attempt: int, tools: list[str]) -> ItemResult:
        reason = run.reason
        if reason == "interrupted":
            seen = _Attempt(run.session_id, run.usage)
            return self._failed(item, seen, attempt, "interrupted (Ctrl+C)")
        limited = reason in LIMIT_REASONS or run.dropped > 0
        last = run.turns[-1] if run.turns else None
        return self._result(
            item,
            status="limit" if limited else "ok",
            answer=run.output,
            output=last.value if last is not None and last.structured else None,
            error=(run.limit.message if run.limit is not None else reason) if limited else None,
            reason=reason,
            usage=run.usage.as_dict(),
            cost_usd=run.usage.cost_usd,
            tools=tools,
            steps=run.steps,
            session_id=run.session_id,
            attempts=attempt,
        )

    def _failed(
        self, item: BatchItem, seen: _Attempt, attempt: int, message: str, *, transient: bool = False
    ) -> ItemResult:
        return self._result(
            item,
            status="error",
            error=message,
            usage=seen.usage.as_dict(),
            cost_usd=seen.usage.cost_usd,
            tools=seen.tools,
            session_id=seen.session_id,
            attempts=attempt,
            transient=transient,
            interrupted=self._interrupted,
        )
