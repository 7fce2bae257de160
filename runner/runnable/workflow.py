"""``WorkflowRunner``: a team file's workflow behind the runner interface (open, run, interrupt, close).

It holds the workflow's pool of agent runtimes (``WorkflowAgents``: its own, or one the caller shares
across runs, as ``runner serve`` and ``runner batch`` do) and runs each call as one
``WorkflowEngine`` with a workflow transcript of its own. ``run`` returns the run's ``Outcome``
(the same statuses and exit codes as an agent's); ``last`` keeps the ``WorkflowResult`` (its notes,
the steps it finished) for the doors that show more.

What stays specific to workflows is given per run: ``on_event`` gets every step's start and end
(a progress line, a served reasoning line), ``resume`` goes on from a transcript, ``retry_of`` runs
again on the transcript of a transiently failed run with its finished steps reused, ``drive``
wraps the engine's run (``--watch``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from runner.agentfile.workflow import WorkflowConfig
from runner.models.base import Usage
from runner.runnable.target import Target
from runner.runtime.settings import RuntimeSettings
from runner.session.events import EventSink
from runner.session.outcome import Outcome
from runner.store.transcript import Transcript, read_transcript, sessions_dir
from runner.workflow.agents import ModelFor, WorkflowAgents
from runner.workflow.cassette import WorkflowCassette
from runner.workflow.engine import WorkflowEngine, WorkflowResult
from runner.workflow.record import ResumeState, WorkflowRecord, open_record, resume_state

__all__ = ["WorkflowRunner", "run_record"]

Drive = Callable[[WorkflowEngine], Awaitable[WorkflowResult]]


def run_record(
    target: Target,
    settings: RuntimeSettings,
    input: str,
    variables: dict[str, Any],
    *,
    resume: Transcript | None = None,
) -> WorkflowRecord:
    """A workflow run's transcript (every member's secrets redacted in it): new, or ``resume``'s."""
    assert target.workflow is not None
    return open_record(
        settings.home,
        workflow=target.workflow.name,
        path=target.path,
        input=input,
        variables=variables,
        secrets=target.secrets,
        models=target.models,
        write=settings.write_transcript,
        fsync=settings.fsync,
        resume=resume,
    )


class WorkflowRunner:
    """Runs the workflow of ``target``: one engine per ``run``, on one pool of agents."""

    kind = "workflow"

    def __init__(
        self,
        target: Target,
        settings: RuntimeSettings | None = None,
        *,
        agents: WorkflowAgents | None = None,
        model_for: ModelFor | None = None,
        assume_yes: bool = False,
    ) -> None:
        assert target.workflow is not None
        self.target = target
        self.workflow: WorkflowConfig = target.workflow
        self.settings = settings or RuntimeSettings()
        self.assume_yes = assume_yes
        self._own_agents = agents is None
        self.agents = (
            agents
            if agents is not None
            else WorkflowAgents(target.configs, self.settings, model_for=model_for)
        )
        self._engines: set[WorkflowEngine] = set()
        self.last: WorkflowResult | None = None

    @property
    def name(self) -> str:
        return self.workflow.name

    async def open(self) -> None:
        """Nothing to build up front: each agent's runtime opens when a step first needs it."""

    def record(
        self, input: str, variables: dict[str, Any], *, resume: Transcript | None = None
    ) -> WorkflowRecord:
        """The run's workflow transcript: a new one, or ``resume``'s, going on."""
        return run_record(self.target, self.settings, input, variables, resume=resume)

    def engine(
        self,
        input: str,
        *,
        variables: dict[str, Any] | None = None,
        on_event: Callable[[dict[str, Any]], None] | None = None,
        on_usage: Callable[[Usage], None] | None = None,
        resume: Transcript | None = None,
        retry_of: WorkflowResult | None = None,
        workflow: WorkflowConfig | None = None,
        cassette: WorkflowCassette | None = None,
        record: WorkflowRecord | None = None,
        sink: EventSink | None = None,
    ) -> WorkflowEngine:
        """The engine of one run (not started): its transcript opened, what it reuses read."""
        values = dict(variables or {})
        state: ResumeState | None = resume_state(resume) if resume is not None else None
        if retry_of is not None:
            resume = self._transcript(retry_of)
            state = ResumeState(
                outputs=dict(retry_of.finished), usage=retry_of.usage, agent_steps=len(retry_of.finished)
            )
        if record is None:
            if retry_of is not None and resume is None:
                record = WorkflowRecord(retry_of.session_id, None)
            else:
                record = self.record(input, values, resume=resume)
        return WorkflowEngine(
            self.target.path,
            workflow or self.workflow,
            self.settings,
            input=input,
            variables=values,
            record=record,
            resume=state,
            on_event=on_event,
            configs=self.target.configs,
            assume_yes=self.assume_yes,
            cassette=cassette,
            # a cassette's run makes its own pool: every agent's model is the cassette's
            agents=None if cassette is not None else self.agents,
            on_usage=on_usage,
            sink=sink,
        )

    def _transcript(self, done: WorkflowResult) -> Transcript | None:
        if not self.settings.write_transcript:
            return None
        return read_transcript(sessions_dir(self.settings.home) / f"{done.session_id}.jsonl")

    async def run(self, input: str, *, drive: Drive | None = None, **options: Any) -> Outcome:
        """One run of the workflow on ``input`` (``engine``'s options); its outcome."""
        return await self.run_engine(self.engine(input, **options), drive=drive)

    async def run_engine(self, engine: WorkflowEngine, *, drive: Drive | None = None) -> Outcome:
        """Run a prepared ``engine`` to its end (interruptible by ``interrupt``); its outcome."""
        self._engines.add(engine)
        try:
            result = await (drive(engine) if drive is not None else engine.run())
        finally:
            self._engines.discard(engine)
        self.last = result
        return result.outcome

    def interrupt(self) -> None:
        """Ctrl+C: every running engine stops its steps and starts nothing new."""
        for engine in list(self._engines):
            engine.interrupt()

    async def aclose(self) -> None:
        """Close the agents' runtimes (a shared pool stays its owner's)."""
        if self._own_agents:
            await self.agents.aclose()
