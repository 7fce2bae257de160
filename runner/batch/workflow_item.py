"""Running one item of a batch through a team file's workflow: a ``WorkflowRunner`` run, its
``Outcome`` as a plain ``ItemResult``.

``WorkflowItemRunner`` is the workflow's ``ItemRunner``: ``run(item)`` runs the workflow on the
item's input and variables (the agents' runtimes come from one ``WorkflowAgents`` pool the whole
batch shares) and returns the item's line, made from the run's outcome as an agent's is
(``ItemRunnerBase.from_outcome``); ``interrupt()`` stops every running workflow (Ctrl+C).

Each item has one workflow transcript (its agent steps are child sessions under it, as with
``runner run``). A workflow that failed transiently (a step's model gave a 429, a 5xx, a network
error) runs again up to ``retries`` times, on the same transcript (a ``resume`` event, as
``runner resume`` writes) and with the steps that finished reused: they are neither run nor paid again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from runner.batch.inputs import BatchItem
from runner.batch.item import ItemRunnerBase
from runner.batch.item_result import ItemResult
from runner.errors import StorageError
from runner.models.base import Usage
from runner.runnable.workflow import WorkflowRunner
from runner.session.outcome import Outcome
from runner.workflow.engine import WorkflowResult

__all__ = ["WorkflowItemRunner"]

log = logging.getLogger("runner.batch")


class WorkflowItemRunner(ItemRunnerBase):
    """Runs items through the workflow of ``runner`` (its agents shared by every item)."""

    def __init__(
        self,
        runner: WorkflowRunner,
        *,
        agent_sha256: str,
        variables: Mapping[str, Any] | None = None,
        retries: int = 0,
        assume_yes: bool = False,
        on_usage: Callable[[Usage], None] | None = None,
        sleep: Callable[[float], Any] = asyncio.sleep,
    ) -> None:
        super().__init__(
            agent_sha256=agent_sha256,
            variables=variables,
            retries=retries,
            assume_yes=assume_yes,
            on_usage=on_usage,
            sleep=sleep,
        )
        self.runner = runner
        self._running.add(runner)

    def attempts(self, item: BatchItem) -> Callable[[int], Awaitable[ItemResult]]:
        """The n-th attempt resumes the one before (its transcript, its finished steps)."""
        previous: WorkflowResult | None = None

        async def attempt(number: int) -> ItemResult:
            nonlocal previous
            result, previous = await self._attempt(item, number, previous)
            return result

        return attempt

    async def _attempt(
        self, item: BatchItem, attempt: int, previous: WorkflowResult | None
    ) -> tuple[ItemResult, WorkflowResult | None]:
        if self._interrupted:
            failed = self._result(
                item, status="interrupted", error="interrupted before it started", attempts=attempt
            )
            failed.interrupted = True
            return failed, previous
        runner = self.runner
        try:
            engine = runner.engine(
                item.input,
                variables={**self.variables, **item.vars},
                on_usage=self.on_usage,
                retry_of=previous,
            )
            if self._interrupted:
                engine.interrupt()
            outcome = await runner.run_engine(engine)
        except StorageError:
            raise  # its transcript cannot be written: the batch stops (the next items could not either)
        except Exception as exc:  # a bug or a tool's escape: the item fails, the batch goes on
            log.exception("batch item %s failed", item.id)
            outcome = Outcome.of_error(exc)
            return self.from_outcome(item, outcome, attempt), previous
        return self.from_outcome(item, outcome, attempt), runner.last
