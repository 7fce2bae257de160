"""Running one item of a batch through a team file's workflow: a ``WorkflowEngine``, its result as a
plain ``ItemResult``.

``WorkflowItemRunner`` is the workflow's ``ItemRunner``: ``run(item)`` runs the workflow on the
item's input and variables (the agents' runtimes come from one ``WorkflowAgents`` pool the whole
batch shares) and returns the item's line; ``interrupt()`` stops every running workflow (Ctrl+C).

Each item has one workflow transcript (its agent steps are child sessions under it, as with
``runner run``). A workflow that failed transiently (a step's model gave a 429, a 5xx, a network
error: ``WorkflowResult.transient``) runs again up to ``retries`` times, on the same transcript
(a ``resume`` event, as ``runner resume`` writes) and with the steps that finished reused: they are
neither run nor paid again.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from runner.agentfile.config import AgentConfig
from runner.agentfile.workflow import WorkflowConfig
from runner.batch.inputs import BatchItem
from runner.batch.item import ItemRunnerBase
from runner.batch.record import ItemResult, Status
from runner.errors import RunnerError, StorageError
from runner.models.base import Usage
from runner.runtime.settings import RuntimeSettings
from runner.store.transcript import read_transcript, sessions_dir
from runner.workflow.agents import WorkflowAgents
from runner.workflow.engine import WorkflowEngine, WorkflowResult
from runner.workflow.loading import team_workflow
from runner.workflow.record import ResumeState, WorkflowRecord, open_record

__all__ = ["WorkflowItemRunner", "answer_text", "team_workflow"]

log = logging.getLogger("runner.batch")

#: A workflow's exit code as the status of its line (130, Ctrl+C, is never written).
_STATUS: dict[int, Status] = {0: "ok", 1: "error", 3: "limit"}
_REASON = {"ok": "done", "error": "error", "limit": "limit"}


def answer_text(value: Any) -> str:
    """A workflow's output as the line's ``answer``: a string as it is, anything else as JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


class WorkflowItemRunner(ItemRunnerBase):
    """Runs items through ``workflow`` (the team file at ``path``), on the shared ``agents``."""

    def __init__(
        self,
        path: Path,
        workflow: WorkflowConfig,
        configs: Mapping[str, AgentConfig],
        agents: WorkflowAgents,
        settings: RuntimeSettings,
        *,
        agent_sha256: str,
        variables: Mapping[str, Any] | None = None,
        retries: int = 0,
        assume_yes: bool = False,
        on_usage: Callable[[Usage], None] | None = None,
        sleep: Callable[[float], Any] = asyncio.sleep,
    ) -> None:
        self.path = path
        self.workflow = workflow
        self.configs = dict(configs)
        self.agents = agents
        self.settings = settings
        super().__init__(
            agent_sha256=agent_sha256,
            variables=variables,
            retries=retries,
            assume_yes=assume_yes,
            on_usage=on_usage,
            sleep=sleep,
        )
        self._secrets = frozenset().union(*(config.secrets for config in self.configs.values()))
        self._models = ", ".join(sorted({c.model.id for c in self.configs.values() if c.model is not None}))

    def attempts(self, item: BatchItem) -> Callable[[int], Awaitable[ItemResult]]:
        """The n-th attempt resumes the one before (its transcript, its finished steps)."""
        previous: tuple[WorkflowRecord, WorkflowResult] | None = None

        async def attempt(number: int) -> ItemResult:
            nonlocal previous
            outcome, previous = await self._attempt(item, number, previous)
            return outcome

        return attempt

    async def _attempt(
        self, item: BatchItem, attempt: int, previous: tuple[WorkflowRecord, WorkflowResult] | None
    ) -> tuple[ItemResult, tuple[WorkflowRecord, WorkflowResult] | None]:
        if self._interrupted:
            failed = self._result(
                item, status="error", error="interrupted before it started", attempts=attempt
            )
            failed.interrupted = True
            return failed, previous
        variables = {**self.variables, **item.vars}
        record: WorkflowRecord | None = None
        try:
            record = self._record(item, variables, previous[0] if previous is not None else None)
            resume = None
            if previous is not None:
                done = previous[1]
                resume = ResumeState(
                    outputs=dict(done.finished), usage=done.usage, agent_steps=len(done.finished)
                )
            engine = WorkflowEngine(
                self.path,
                self.workflow,
                self.settings,
                input=item.input,
                variables=variables,
                record=record,
                resume=resume,
                configs=self.configs,
                assume_yes=self.assume_yes,
                agents=self.agents,
                on_usage=self.on_usage,
            )
            self._running.add(engine)
            if self._interrupted:
                engine.interrupt()
            try:
                run = await engine.run()
            finally:
                self._running.discard(engine)
        except StorageError:
            raise  # its transcript cannot be written: the batch stops (the next items could not either)
        except RunnerError as exc:  # an agent could not open
            return self._failed(item, record, attempt, str(exc)), previous
        except Exception as exc:  # a bug or a tool's escape: the item fails, the batch goes on
            log.exception("batch item %s failed", item.id)
            return self._failed(
                item, record, attempt, f"internal error: {type(exc).__name__}: {exc}"
            ), previous
        return self._finished(item, run, attempt), (record, run)

    def _record(
        self, item: BatchItem, variables: dict[str, Any], previous: WorkflowRecord | None
    ) -> WorkflowRecord:
        """The item's workflow transcript: a new one, or the previous attempt's, resumed."""
        settings = self.settings
        if previous is not None and not settings.write_transcript:
            return WorkflowRecord(previous.session_id, None)
        resumed = None
        if previous is not None:
            resumed = read_transcript(sessions_dir(settings.home) / f"{previous.session_id}.jsonl")
        return open_record(
            settings.home,
            workflow=self.workflow.name,
            path=self.path,
            input=item.input,
            variables=variables,
            secrets=self._secrets,
            models=self._models,
            write=settings.write_transcript,
            fsync=settings.fsync,
            resume=resumed,
        )

    def _finished(self, item: BatchItem, run: WorkflowResult, attempt: int) -> ItemResult:
        interrupted = run.exit_code == 130 or run.status == "interrupted"
        status = _STATUS.get(run.exit_code, "error")
        value = run.output
        result = self._result(
            item,
            status=status,
            answer=answer_text(value),
            output=None if isinstance(value, str) else value,
            error=("; ".join(run.notes) or run.status) if status != "ok" else None,
            reason="interrupted" if interrupted else _REASON[status],
            usage=run.usage.as_dict(),
            cost_usd=run.usage.cost_usd,
            steps=run.agent_steps,
            session_id=run.session_id,
            attempts=attempt,
            transient=run.transient,
        )
        result.interrupted = interrupted
        return result

    def _failed(
        self, item: BatchItem, record: WorkflowRecord | None, attempt: int, message: str
    ) -> ItemResult:
        if record is not None:
            record.close()
        result = self._result(
            item,
            status="error",
            error=message,
            session_id=record.session_id if record is not None else None,
            attempts=attempt,
        )
        result.interrupted = self._interrupted
        return result
