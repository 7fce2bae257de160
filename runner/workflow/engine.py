"""``WorkflowEngine``: a team file's workflow run step by step (SPEC section 19, issue 17).

Steps run in order. An ``agent:`` step is a child ``Session`` (its own transcript) on the agent's
runtime, leased from ``WorkflowAgents`` (opened once per team agent, shared by every step that runs
it; by every run, when the caller shares the pool); ``parallel:`` steps run
at once (all finish before the next); ``for_each:`` runs its step per item, ``max_parallel`` in
flight, outputs collected in order, at most ``max_items`` of them (a longer list fails the step
before any item starts); ``loop:`` repeats its steps until ``until`` holds or
``max_iterations`` (then status ``limit``: exit 3 with a note). ``when:`` false skips a step;
``on_error: stop`` ends the workflow (exit 1), ``continue`` records status ``error`` and goes on.

The workflow's ``limits`` are one budget for every agent it runs (``WorkflowBudget``): once it is
spent nothing new starts (exit 3), and steps running at once share what is left. ``interrupt``
(Ctrl+C) interrupts every running child session (each ends its turn cleanly) and starts nothing new
(exit 130). Every step's start and end is recorded, so ``resume`` skips what finished.

Under ``--record`` / ``--replay`` every agent's model calls go to one cassette
(``runner.workflow.cassette``), and ``parallel`` steps and ``for_each`` items run one after another
in the file's order (``sequential``), so that the order of the calls, which a replay follows, does
not depend on timing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import runner.telemetry as telemetry
from runner.agentfile.config import AgentConfig
from runner.agentfile.workflow import Step, WorkflowConfig
from runner.errors import ConfigError, ModelError, RunnerError
from runner.models.base import Usage
from runner.runtime.runtime import AgentRuntime
from runner.runtime.settings import RuntimeSettings
from runner.session import RunOptions, Session
from runner.session.events import AssistantMessage, EventSink, LoopEvent, UsageUpdate
from runner.session.outcome import STATUSES, Outcome, Status
from runner.text import one_line
from runner.workflow.agents import WorkflowAgents
from runner.workflow.budget import WorkflowBudget
from runner.workflow.cassette import WorkflowCassette, open_cassette
from runner.workflow.expressions import Evaluator
from runner.workflow.loading import load_configs
from runner.workflow.outcomes import (
    Restart,
    StepOutcome,
    Stop,
    agent_outcome,
    answer_text,
    final_output,
    worst,
)
from runner.workflow.record import ResumeState, WorkflowRecord

__all__ = ["WorkflowEngine", "WorkflowResult", "load_configs"]

#: ``loop:`` without ``max_iterations`` (``runner validate`` refuses it; a safety net).
DEFAULT_MAX_ITERATIONS = 10


#: A workflow run's reason for each status, as an agent's turn would say it.
_REASONS: dict[str, str] = {
    "ok": "done",
    "stopped": "hook",
    "limit": "limit",
    "interrupted": "interrupted",
    "error": "error",
}


@dataclass
class WorkflowResult:
    """What a workflow run did."""

    session_id: str
    exit_code: int
    output: Any = None
    notes: list[str] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    #: ok | stopped | error | limit | interrupted (``runner.session.outcome``)
    status: str = "ok"
    #: Agent steps run, those reused from a resume included.
    agent_steps: int = 0
    #: The run failed only because a step's model failed in a way that may pass (429, 5xx, network).
    transient: bool = False
    #: Every agent step finished ``ok`` and its output (what a resume or a retry reuses).
    finished: dict[str, Any] = field(default_factory=dict)
    #: The tools the steps' models called (this run's steps; reused ones called none).
    tools: tuple[str, ...] = ()

    @property
    def outcome(self) -> Outcome:
        """How the run ended, as every door reads it (the same rule as an agent's session)."""
        status: Status = self.status if self.status in STATUSES else "error"
        if self.exit_code == 130:
            status = "interrupted"
        why = "; ".join(self.notes) or None
        value = self.output
        return Outcome(
            status,
            _REASONS[status],
            answer=answer_text(value),
            data=None if isinstance(value, str) else value,
            usage=self.usage,
            session_id=self.session_id,
            limit=why if status == "limit" else None,
            error=why if status in ("error", "stopped", "interrupted") else None,
            transient=self.transient,
            tools=self.tools,
            steps=self.agent_steps,
        )


class WorkflowEngine:
    """Runs one workflow of the team file at ``path``."""

    def __init__(
        self,
        path: Path,
        workflow: WorkflowConfig,
        settings: RuntimeSettings,
        *,
        input: str,
        variables: dict[str, Any],
        record: WorkflowRecord,
        resume: ResumeState | None = None,
        on_event: Callable[[dict[str, Any]], None] | None = None,
        configs: dict[str, AgentConfig] | None = None,
        assume_yes: bool = False,
        cassette: WorkflowCassette | None = None,
        agents: WorkflowAgents | None = None,
        on_usage: Callable[[Usage], None] | None = None,
        sink: EventSink | None = None,
    ) -> None:
        self.path = path
        #: Every event of every step's session (the Python API's ``stream``), besides ``on_event``.
        self.sink = sink
        self.workflow = workflow
        self.settings = settings
        self.input = input
        self.variables = dict(variables)
        self.record = record
        self.done = dict(resume.outputs) if resume is not None else {}
        #: The workflow's limits against what its steps spent (a resumed run's included).
        self.budget = WorkflowBudget(
            workflow.limits,
            usage=resume.usage if resume is not None else None,
            agent_steps=resume.agent_steps if resume is not None else 0,
        )
        self.on_event = on_event or (lambda event: None)
        #: ``--yes``: tools that ask for confirmation run (else they are declined: nobody is asked).
        self.assume_yes = assume_yes
        self.configs = configs if configs is not None else load_configs(path, workflow)
        #: ``--record`` / ``--replay``: the one cassette of the run (given, or opened here).
        self.cassette = (
            cassette if cassette is not None else open_cassette(workflow, path, self.configs, settings)
        )
        #: Parallel steps and for_each items one at a time, in order (a cassette's calls keep their order).
        self.sequential = self.cassette is not None
        #: The agents' runtimes: given (shared with other runs, the caller closes it) or this run's own.
        self._own_agents = agents is None
        self.agents = agents or WorkflowAgents(
            self.configs,
            settings,
            model_for=self.cassette.model_for if self.cassette is not None else None,
            clock=self.cassette.clock if self.cassette is not None else None,
        )
        #: Called with each model call's usage as its reply arrives (a batch's budget).
        self.on_usage = on_usage
        #: Agent steps finished ok in this run or reused: key -> output.
        self.finished: dict[str, Any] = {}
        self._pending: WorkflowConfig | None = None  # --watch: new steps, applied at the next top-level step
        self.evaluator = Evaluator(path)
        self.notes: list[str] = []
        self.soft_code = 0
        #: Agent steps a hook stopped (status ``stopped``): the run's status, when nothing worse.
        self.stopped: list[str] = []
        #: The tools every step's model called, in the order the calls were made.
        self.tools: list[str] = []
        self.interrupted = False
        self._sessions: set[Session] = set()

    # ----------------------------------------------------------------- the whole run

    async def run(self) -> WorkflowResult:
        """Run the steps; the result says the exit code (0, 1, 3, 130)."""
        output: Any = None
        transient = False
        try:
            with telemetry.workflow(self.workflow.name, conversation_id=self.record.session_id):
                output = await self._run_steps()
            code = self.soft_code
            status = ("stopped" if self.stopped else "ok") if code == 0 else "limit"
        except Stop as stop:
            code, status = stop.code, {1: "error", 3: "limit", 130: "interrupted"}.get(stop.code, "error")
            transient = stop.transient
            self.notes.append(stop.message)
        finally:
            if self._own_agents:
                await self.agents.aclose()
            if self.cassette is not None:
                self.cassette.close()
        if self.cassette is not None and self.cassette.remaining() and code == 0:
            self.notes.append(
                f"{self.cassette.path}: {self.cassette.remaining()} recorded response(s) were not used "
                "(the workflow now makes fewer model calls than when it was recorded)"
            )
        self.record.event(
            "workflow_end", status=status, exit_code=code, output=output, notes=self.notes, **self._spent()
        )
        self.record.close()
        return WorkflowResult(
            self.record.session_id,
            code,
            output,
            self.notes,
            self.budget.usage,
            status=status,
            agent_steps=self.budget.agent_steps,
            transient=transient,
            finished={**self.done, **self.finished},
            tools=tuple(self.tools),
        )

    async def _run_steps(self) -> Any:
        """The steps from the top, again from the top (finished steps reused) when ``--watch``
        brought new ones; the workflow's output."""
        while True:
            scope: dict[str, Any] = {"steps": {}}
            try:
                last = await self._sequence(self.workflow.steps, scope, "")
            except Restart:  # the steps' notes and limits come again with the steps
                self.done.update(self.finished)
                self.soft_code = 0
                self.notes.clear()
                continue
            return await self._final_output(scope, last)

    async def reload(
        self, workflow: WorkflowConfig, configs: dict[str, AgentConfig], *, rebuild: Iterable[str] = ()
    ) -> list[str]:
        """``--watch``: the agents' new configurations from their next step on (their runtimes are
        built now; one that cannot open raises and nothing changes; those in ``rebuild`` are built
        again though their configuration is the same: a tool module they import was edited) and the
        workflow's new steps from its next top-level step on. What changed, in words."""
        changed = await self.agents.reload(configs, rebuild=set(rebuild))
        self.configs = dict(configs)
        said = [f"agent {name}" for name in changed]
        if workflow != self.workflow:
            self._pending = workflow
            said.append("the workflow's steps (from its next step; finished steps keep their outputs)")
        return said

    def interrupt(self) -> None:
        """Ctrl+C: every running child session stops its step; nothing new starts."""
        self.interrupted = True
        for session in list(self._sessions):
            session.interrupt()

    def _spent(self) -> dict[str, Any]:
        usage = self.budget.usage
        return {"tokens": usage.total_tokens, "cost_usd": usage.cost_usd}

    async def _final_output(self, scope: dict[str, Any], last: Any) -> Any:
        return await final_output(self.workflow, self.evaluator, self._context(scope), last)

    # ----------------------------------------------------------------- steps

    def _context(self, scope: dict[str, Any]) -> dict[str, Any]:
        context: dict[str, Any] = dict(self.variables)
        context.update(scope)
        context.update(input=self.input, vars=dict(self.variables))
        return context

    async def _sequence(self, steps: tuple[Step, ...], scope: dict[str, Any], prefix: str) -> Any:
        last: Any = None
        for step in steps:
            if not prefix and self._pending is not None:
                self.workflow, self._pending = self._pending, None
                self.budget.limits = self.workflow.limits
                raise Restart
            last = (await self._step(step, scope, prefix)).output
        return last

    async def _step(self, step: Step, scope: dict[str, Any], prefix: str) -> StepOutcome:
        key = prefix + step.id
        # A finished agent step is reused as it is; a finished parallel, for_each or loop runs again
        # over its finished sub-steps (all reused), so that their own ids are in ``steps`` again.
        if key in self.done and step.kind == "agent":
            outcome = StepOutcome("ok", self.done[key])
            if key not in self.finished:  # a --watch restart reuses quietly what this run did
                self.on_event({"type": "step_reused", "key": key, "id": step.id})
        else:
            with telemetry.step(key, kind=step.kind) as traced:
                outcome = await self._fresh(step, key, scope)
                traced.set({"runner.step.status": outcome.status})
        if step.kind == "agent" and outcome.status in ("ok", "stopped"):
            self.finished[key] = outcome.output
        if outcome.status == "stopped":
            self.stopped.append(key)
        scope["steps"][step.id] = {"output": outcome.output, "status": outcome.status}
        if outcome.status == "error" and step.on_error == "stop":
            raise Stop(1, f"step {key} failed: {outcome.error}", transient=outcome.transient)
        return outcome

    async def _fresh(self, step: Step, key: str, scope: dict[str, Any]) -> StepOutcome:
        context = self._context(scope)
        try:
            if step.when is not None and not self.evaluator.truth(step.when, context, where=f"{key}: when"):
                outcome = StepOutcome("skipped")
                self._end(step, key, outcome, started=time.monotonic())
                return outcome
        except ConfigError as exc:
            outcome = StepOutcome("error", error=exc.message)
            self._end(step, key, outcome, started=time.monotonic())
            return outcome
        if step.kind == "agent":
            return await self._agent(step, key, context)
        started = time.monotonic()
        self._start(step, key)
        try:
            if step.kind == "parallel":
                outcome = await self._parallel(step, key, scope)
            elif step.kind == "for_each":
                outcome = await self._for_each(step, key, scope)
            else:
                outcome = await self._loop(step, key, scope)
        except ConfigError as exc:
            outcome = StepOutcome("error", error=exc.message)
        self._end(step, key, outcome, started=started)
        return outcome

    async def _gather(self, work: list[Any]) -> list[Any]:
        """Run ``work`` at once (in order when ``sequential``), all to the end; then the worst way one of
        them stopped, if any."""
        results: list[Any] = []
        if self.sequential:
            for index, one in enumerate(work):
                try:
                    results.append(await one)
                except Exception as exc:  # kept, and raised below, as gather would
                    results.append(exc)
                except BaseException:
                    for rest in work[index + 1 :]:
                        rest.close()
                    raise
        else:
            results = list(await asyncio.gather(*work, return_exceptions=True))
        stops = [r for r in results if isinstance(r, Stop)]
        for result in results:
            if isinstance(result, BaseException) and not isinstance(result, Stop):
                raise result
        if stops:
            raise worst(stops)
        return results

    async def _parallel(self, step: Step, key: str, scope: dict[str, Any]) -> StepOutcome:
        prefix = f"{key}/"
        outcomes = await self._gather([self._step(sub, scope, prefix) for sub in step.steps])
        return StepOutcome("ok", {sub.id: o.output for sub, o in zip(step.steps, outcomes, strict=True)})

    async def _for_each(self, step: Step, key: str, scope: dict[str, Any]) -> StepOutcome:
        assert step.for_each is not None and step.step is not None
        items = self.evaluator.evaluate(step.for_each, self._context(scope), where=f"{key}: for_each")
        if not isinstance(items, list | tuple):
            kind = type(items).__name__
            return StepOutcome("error", error=f"for_each {step.for_each!r} gave a {kind}, not a list")
        if len(items) > step.max_items:  # refused before any item starts: nothing is spent on it
            return StepOutcome(
                "error",
                error=f"for_each {step.for_each!r} gave {len(items)} items, more than its max_items "
                f"({step.max_items}); no item was started (raise max_items on the step to allow more)",
            )
        gate = asyncio.Semaphore(max(1, step.max_parallel))
        inner = step.step

        async def one(index: int, item: Any) -> Any:
            async with gate:
                item_scope = {**scope, "steps": dict(scope["steps"]), step.as_name: item}
                return (await self._step(inner, item_scope, f"{key}[{index}]/")).output

        outputs = await self._gather([one(i, item) for i, item in enumerate(items)])
        return StepOutcome("ok", outputs)

    async def _loop(self, step: Step, key: str, scope: dict[str, Any]) -> StepOutcome:
        most = step.max_iterations or DEFAULT_MAX_ITERATIONS
        last: Any = None
        outer = scope.get("iteration")  # a loop inside a loop: the outer one's comes back after
        try:
            for iteration in range(1, most + 1):
                scope["iteration"] = iteration
                last = await self._sequence(step.steps, scope, f"{key}#{iteration}/")
                if step.until is not None and self.evaluator.truth(
                    step.until, self._context(scope), where=f"{key}: until"
                ):
                    return StepOutcome("ok", last)
        finally:
            if outer is None:
                scope.pop("iteration", None)
            else:
                scope["iteration"] = outer
        if step.until is None:
            return StepOutcome("ok", last)
        note = f"loop {key} stopped at max_iterations ({most}) before its until held: {step.until}"
        self.notes.append(note)
        self.soft_code = max(self.soft_code, 3)
        return StepOutcome("limit", last, error=note)

    # ----------------------------------------------------------------- agent steps

    def _check_start(self, key: str) -> None:
        """Refuse to start ``key`` after Ctrl+C or once the workflow's budget is spent."""
        if self.interrupted:
            raise Stop(130, "interrupted")
        spent = self.budget.refuse()
        if spent is not None:
            raise Stop(3, f"{spent}: {key} and the steps after it did not start")

    def _inputs(self, step: Step, key: str, context: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        text = self.input
        if step.input is not None:
            text = self.evaluator.render(step.input, context, where=f"{key}: input")
        values = {
            name: self.evaluator.render(value, context, where=f"{key}: vars.{name}")
            if isinstance(value, str)
            else value
            for name, value in step.vars.items()
        }
        return text, values

    async def _agent(self, step: Step, key: str, context: dict[str, Any]) -> StepOutcome:
        assert step.agent is not None
        self._check_start(key)
        started = time.monotonic()
        try:
            text, values = self._inputs(step, key, context)
        except ConfigError as exc:
            outcome = StepOutcome("error", error=exc.message)
            self._end(step, key, outcome, started=started)
            return outcome
        self._start(step, key, input=text)
        try:
            runtime = await self.agents.acquire(step.agent)
        except RunnerError as exc:  # its tools or model cannot open: the step fails (on_error decides)
            outcome = StepOutcome("error", error=f"agent {step.agent} could not start: {exc.message}")
            self._end(step, key, outcome, started=started)
            return outcome
        try:
            if self.interrupted:  # Ctrl+C while the runtime opened: the session does not start
                self._end(step, key, StepOutcome("interrupted", error="interrupted"), started=started)
                raise Stop(130, f"interrupted before {key} began")
            session, outcome = await self._session(runtime, text, values)
        finally:
            await self.agents.release(step.agent, runtime)
        self._end(step, key, outcome, started=started, session=session)
        if outcome.status == "interrupted":
            raise Stop(130, f"interrupted during {key}")
        if outcome.status == "limit":
            raise Stop(3, f"{key}: {outcome.error}")
        return outcome

    async def _session(
        self, runtime: AgentRuntime, text: str, values: dict[str, Any]
    ) -> tuple[Session, StepOutcome]:
        """One agent step's child session on ``runtime``, run to its end, and what it gave."""
        options = RunOptions(
            variables={**self.variables, **values},
            assume_yes=self.assume_yes,
            limits=self.budget.child_limits(),
        )
        session = Session(runtime, options=options, sink=self._sink)
        self._sessions.add(session)
        try:
            result = await session.run([text])
        except RunnerError as exc:
            transient = isinstance(exc, ModelError) and exc.transient
            outcome = StepOutcome("error", error=exc.message, transient=transient)
        else:
            outcome = agent_outcome(runtime, result)
        finally:
            self._sessions.discard(session)
            await session.close()
            self.budget.usage = self.budget.usage + session.usage
        return session, outcome

    def _sink(self, event: LoopEvent) -> None:
        if self.sink is not None:
            self.sink(event)
        if isinstance(event, AssistantMessage):
            self.tools.extend(c["function"]["name"] for c in event.message.get("tool_calls") or ())
        if isinstance(event, UsageUpdate):
            if self.on_usage is not None:
                self.on_usage(event.call)
            self.budget.share(self._sessions)

    # ----------------------------------------------------------------- records

    def _start(self, step: Step, key: str, **data: Any) -> None:
        event = {"key": key, "id": step.id, "kind": step.kind, "agent": step.agent, **data}
        self.record.event("step_start", **event)
        self.on_event({"type": "step_start", **event})

    def _end(
        self, step: Step, key: str, outcome: StepOutcome, *, started: float, session: Session | None = None
    ) -> None:
        event: dict[str, Any] = {
            "key": key,
            "id": step.id,
            "kind": step.kind,
            "status": outcome.status,
            "output": outcome.output,
            "duration_s": round(time.monotonic() - started, 4),
        }
        if outcome.error is not None:
            event["error"] = one_line(outcome.error, 2000)
        if session is not None:
            event.update(
                agent=step.agent,
                session_id=session.session_id if session.conversation.transcript else None,
                tokens=session.usage.total_tokens,
                cost_usd=session.usage.cost_usd,
            )
        self.record.event("step_end", **event)
        self.on_event({"type": "step_end", **event})
