"""The session (SPEC section 5): one conversation with an agent, run by ``Session.run``.

``run(inputs)`` is the session level every front door uses (``runner run`` and its REPL, ``serve``,
the Open WebUI pipe, ``runner test``, sub-agents, the Python API): ``session_start`` the first time,
a continuation turn when the history ends waiting for the model, then turns until the prompt queue
is empty (inputs first, then what ``turn_post`` / ``loop_continue`` hooks queue), within
``max_turns``. ``close()`` runs ``session_end``. A queued message is run or dropped with a warning
and a ``queue_drop`` event, never silently.

The session holds the conversation (``Conversation``) and the session's own state (budget,
variables, confirmations, an optional model of its own); the configuration is its ``AgentRuntime``,
shared and immutable. A session given a ``RuntimeHost`` follows reloads at turn boundaries.
What it holds and reports (the read-only fields, the queue, notes and events, the prompts) is its base class
``SessionState`` (``state.py``). Orchestration only: no printing (events go to an ``EventSink``), no
provider code.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any, TypeVar

import runner.telemetry as telemetry
from runner.agentfile.config import AgentConfig
from runner.errors import LimitReached, ModelError, RunnerError
from runner.models import notices as model_notices
from runner.models.base import Model, Request
from runner.runtime.host import RuntimeHost
from runner.runtime.runtime import AgentRuntime
from runner.session.answers import next_plan, session_plan
from runner.session.conversation import Conversation
from runner.session.decisions import EndTurn
from runner.session.events import EventSink, LoopEvent
from runner.session.gate import Confirmation
from runner.session.hookglue import SessionHooks
from runner.session.limits import Budget
from runner.session.options import RunOptions, RunResult, lowered_limits
from runner.session.results import TurnResult
from runner.session.state import SessionState
from runner.session.transcript_open import open_transcript, restored_system
from runner.session.turn import Turn
from runner.store.transcript import (
    Transcript,
    new_session_id,
)
from runner.tools.base import RunContext

__all__ = ["Session", "current_session"]

T = TypeVar("T")
_current: contextvars.ContextVar[Session | None] = contextvars.ContextVar("runner_session", default=None)


def current_session() -> Session | None:
    """The session whose turn is running in this task (a sub-agent's tool finds its parent so)."""
    return _current.get()


def _ignore(event: LoopEvent) -> None:
    """A sink that drops every event."""


class Session(SessionState):
    """One conversation with one agent: history, prompt queue, budgets, transcript."""

    def __init__(
        self,
        runtime: AgentRuntime,
        *,
        sink: EventSink | None = None,
        options: RunOptions | None = None,
        session_id: str | None = None,
        model: Model | None = None,
        resume: Transcript | None = None,
    ) -> None:
        self._runtime = runtime
        self._host: RuntimeHost | None = None  # set by ``open``: the session then follows reloads
        self.sink: EventSink = sink or _ignore
        self._options = options or RunOptions()
        self._session_id = session_id or (resume.session_id if resume is not None else new_session_id())
        self._variables = runtime.prompts.variables(self.options.variables)
        self.current_input = ""
        self._limits = lowered_limits(runtime.limits, self.options.limits)
        self._budget = Budget(self.limits)
        self._confirmation = Confirmation(assume_yes=self.options.assume_yes, ask=self.options.confirm)
        self._hooks = SessionHooks(self)
        self._model = model  # the session's own (/model, a test's); else the runtime's
        self._owns_model = False
        self._running: asyncio.Task[Any] | None = None  # what Ctrl+C stops: a step or a hook chain
        self._interrupted = False
        self._started = False
        self._closed = False
        self._dropped = 0
        self._next_turn_events = []
        self._stopped = False  # a hook stopped the run of queued inputs (this run)
        #: The tools the model called, in order (each run's share is its ``RunResult.tools``).
        self._calls: list[str] = []
        self._lease: RuntimeHost | None = None  # the host this session holds its runtime from
        self._config_recorded = ""  # the configuration hash the transcript last recorded
        self._ended: str | None = None
        """Why a ``session_start`` hook ended the session; no turn runs after that."""
        self._conversation = Conversation(open_transcript(self, resume))
        self._apply_runtime()
        if resume is not None:
            self.conversation.restore(
                resume.history(),
                system=restored_system(self, resume),
                errors=resume.error_call_ids(),
                turns=resume.turns(),
            )
            self._started = True  # a resumed session already ran its session_start hooks
        self._agent_name = telemetry.session_change(runtime.name, 1)  # ``runner_active_sessions``

    @classmethod
    async def open(cls, host: RuntimeHost, *, follow: bool = True, **kwargs: Any) -> Session:
        """A session on ``host``'s current runtime, held until ``close``.

        With ``follow`` the session moves to a reloaded runtime at its next turn boundary (and
        ``reload`` works); without, it keeps its runtime to the end (a served request).
        """
        runtime = await host.acquire()
        try:
            session = cls(runtime, **kwargs)
        except BaseException:
            await host.release(runtime)
            raise
        session._lease = host
        session._host = host if follow else None
        return session

    # ----------------------------------------------------------------- set-up

    def _apply_runtime(self) -> None:
        """Derive what the session takes from its runtime (at open and after a reload)."""
        runtime = self.runtime
        self._limits = lowered_limits(runtime.limits, self.options.limits)
        self.budget.limits = self.limits
        self._stream = runtime.stream if self.options.stream is None else self.options.stream
        self._request_params = {**runtime.model_params, **self.options.params}
        self._tool_context = RunContext(
            session_id=self.session_id,
            agent=runtime.name,
            vars=MappingProxyType(dict(self.variables)),
            workspace=runtime.config.directory,
            logger=logging.getLogger(f"runner.agent.{runtime.name}"),
            output_chars=self.limits.tool_output_chars,
        )
        # The caller's tools follow the agent's own in every request (an agent tool of the same name wins).
        self._client_tools = [
            t for t in self.options.client_tools if t.get("function", {}).get("name") not in runtime.registry
        ]
        self._client_names = frozenset(t["function"]["name"] for t in self.client_tools)
        self._request_tools = [*runtime.tool_definitions, *self.client_tools] if self.client_tools else None
        self._plan_output()

    def _plan_output(self) -> None:
        """How this session asks for a structured answer (None: the agent has no ``output:``)."""
        self._output_plan = session_plan(self)

    def output_refused(self, error: ModelError) -> bool:
        """The provider refused how the answer was asked for: move to the next strategy (True), once
        per strategy; the runtime remembers it for the sessions after this one."""
        new = next_plan(self, error)
        if new is None:
            return False
        self._output_plan = new
        if self.conversation.first_input is not None:  # composed already: again, with the new section
            self._compose_system()
        return True

    def build_request(self, messages: list[dict[str, Any]]) -> Request:
        """The request this session sends with ``messages``: the mode's tools (and the caller's), the
        model parameters (the file's, the caller's), what the structured-output plan adds. Every
        step's request is built here, and so is what ``runner render`` shows."""
        tools = self.runtime.mode.request_tools(self.request_tools())
        params = self.request_params
        plan = self.output_plan
        if plan is not None:
            tools, params = plan.tools(tools), {**params, **plan.params()}
        return Request(
            model=self.model.name, messages=messages, tools=tools, params=params, stream=self.stream
        )

    def request_tools(self) -> list[dict[str, Any]] | None:
        """The tools of a request: the agent's, then the caller's (the same list every step)."""
        if self._request_tools is not None:
            return self._request_tools
        return self.runtime.tool_definitions or None

    # ----------------------------------------------------------------- the session level

    async def run(self, inputs: Iterable[str] = (), *, continue_waiting: bool = True) -> RunResult:
        """Run ``inputs`` and whatever they queue, to an empty queue (SPEC section 5's session level).

        A history that ends waiting for the model (a resume that stopped mid-turn, a client's tool
        results) goes on first, as its own turn; ``continue_waiting=False`` adds the inputs to it
        instead (a served request's new message belongs to the messages before it). What
        ``session_start`` adds waits for the first input.
        """
        token = _current.set(self)
        dropped_before = self._dropped
        calls_before, refused_before = len(self.calls), len(self.confirmation.refused)
        self._stopped = False
        turns: list[TurnResult] = []
        notices = model_notices.listen(self._model_notice)  # retries and waits, told to this user
        try:
            with telemetry.agent(**self._span_fields()):
                waiting = continue_waiting and self.conversation.needs_continuation()
                for text in inputs:
                    self.enqueue(text)
                if not self._started:
                    self._started = True
                    await self._session_start()
                if self.ended is None:
                    await self._drain(turns, waiting)
        finally:
            model_notices.stop(notices)
            _current.reset(token)
        return RunResult(
            turns,
            self.session_id,
            self.usage,
            self._dropped - dropped_before,
            self.ended,
            tools=tuple(self.calls[calls_before:]),
            refused=tuple(self.confirmation.refused[refused_before:]),
            stopped=self._stopped,
        )

    async def _drain(self, turns: list[TurnResult], waiting: bool) -> None:
        if waiting:
            turns.append(await self._turn(None))
        while self.conversation.queue and self.ended is None and not self._ends_run(turns):
            if self.conversation.turn >= self.limits.max_turns:
                turns.append(self._refuse_turn())
                return
            turns.append(await self._turn(self.conversation.queue.popleft()))
        if turns and turns[-1].reason == "interrupted":
            self._drop_queue("interrupted", "the run was interrupted")

    @staticmethod
    def _ends_run(turns: list[TurnResult]) -> bool:
        """Ctrl+C returns to the user; a call of a client's tool waits for the caller's result."""
        return bool(turns) and turns[-1].reason in ("interrupted", "client_tools")

    async def _turn(self, text: str | None) -> TurnResult:
        await self._follow_host()
        conversation = self.conversation
        if text is not None or conversation.turn == 0:
            conversation.turn += 1
        self._count_next_turn_events()
        self._record_config()
        conversation.event(
            "turn",
            turn=conversation.turn,
            config=self.runtime.provenance.config_sha256[:16],
            **({} if text is not None else {"continued": True}),
        )
        result = await Turn(self).run(text)
        telemetry.count(
            "runner.turn", {"runner.turn": conversation.turn, "runner.turn.reason": result.reason}
        )
        # A client_tools turn goes on later; Ctrl+C in turn_post / loop_continue ends the run.
        if result.reason not in ("interrupted", "client_tools") and not await self._after_turn():
            result = dataclasses.replace(result, reason="interrupted")
        conversation.event("turn_end", turn=conversation.turn, reason=result.reason)
        return result

    def _record_config(self) -> None:
        """Before a turn on a configuration this transcript has not seen yet (the first, or after a
        reload): a ``config`` event with its hash and what it is, for ``runner sessions show``."""
        digest = self.runtime.provenance.config_sha256[:16]
        if digest == self._config_recorded or self.conversation.transcript is None:
            return
        self._config_recorded = digest
        from runner.runtime.snapshot import config_snapshot

        self.record_event("config", hash=digest, snapshot=config_snapshot(self.runtime))

    def _refuse_turn(self) -> TurnResult:
        """``max_turns`` is reached: no more turns; what is still queued is dropped (not silently)."""
        limit = LimitReached(
            f"the session reached {self.conversation.turn} turns (limits.max_turns)", limit="max_turns"
        )
        self._drop_queue("max_turns", f"it would exceed limits.max_turns ({self.limits.max_turns})")
        note = f"The turn was stopped: {limit.message}."
        self.record_event("limit", reason="limit", note=limit.message)
        self.note(note, "warning")
        end = EndTurn.for_limit(limit)
        return TurnResult("", end.reason, 0, end.limit)

    async def _session_start(self) -> None:
        if not self.hooks.has("session_start"):
            return
        outcome = await self.hooks.run("session_start")
        stop = self.hooks.apply("session_start", outcome)
        if stop is not None:
            self._ended = stop.reason
            self.record_event("hook", hook_event="session_start", stop=True, reason=self.ended)
            self.note(f"session_start hook stopped the session: {self.ended}", "warning")
            self._drop_queue("session_end", "the session_start hook ended the session")

    async def _after_turn(self) -> bool:
        """The ``turn_post`` and ``loop_continue`` chains; False when Ctrl+C stopped one."""
        for event in ("turn_post", "loop_continue"):
            if not self.hooks.has(event):
                continue
            try:
                outcome = await self.interruptible(self.hooks.run(event))
            except LimitReached as exc:  # limits.timeout_s ran out during the chain
                self.note(f"{event} hooks stopped: {exc.message}; nothing was queued", "warning")
                return True
            if outcome is None:
                self.note(f"interrupted the {event} hooks; nothing was queued")
                self.record_event("interrupt", hook_event=event)
                return False
            stop = self.hooks.apply(event, outcome)
            if stop is not None:
                self._stopped = True
                self._drop_queue("hook", f"a {event} hook stopped the run: {stop.reason}")
                return True
        return True

    async def close(self) -> None:
        """End the session: ``session_end`` hooks (if it started), then the transcript and own model."""
        if self._closed:
            return
        self._closed = True
        telemetry.session_change(self._agent_name, -1)
        try:
            if self.conversation.queue:
                self._drop_queue("session_end", "the session ended before they ran")
            if self._started and self.hooks.has("session_end"):
                token = _current.set(self)
                try:
                    await self.hooks.run("session_end")
                finally:
                    _current.reset(token)
        finally:
            if self._owns_model and self._model is not None:
                await self._model.aclose()
            if self.conversation.transcript is not None:
                self.conversation.transcript.close()
            if self._lease is not None:
                await self._lease.release(self.runtime)

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ----------------------------------------------------------------- controls

    def interrupt(self) -> None:
        """Ctrl+C: stop the running step or hook chain (the turn then ends with every call answered)."""
        if self._running is not None and not self._running.done():
            self._interrupted = True
            self._running.cancel()

    async def interruptible(
        self, work: Awaitable[T], *, on_interrupt: Callable[[], Any] | None = None
    ) -> Any:
        """Run ``work`` so that ``interrupt`` (and ``limits.timeout_s``) can stop it.

        Interrupted, it gives ``on_interrupt()`` (None without one); past the session's time budget
        it raises ``LimitReached``. The work runs in the caller's task (no task per step): an
        interrupt cancels that task, and the cancellation is taken back here.
        """
        task = self._running = asyncio.current_task()
        try:
            remaining = self.budget.remaining_s()
            if remaining is None:
                return await work
            try:
                async with asyncio.timeout(max(remaining, 0.001)):
                    return await work
            except TimeoutError:
                raise LimitReached(
                    f"the session ran {self.limits.timeout_s:g} s (limits.timeout_s)", limit="timeout_s"
                ) from None
        except asyncio.CancelledError:
            if not self._interrupted or task is None:
                raise
            self._interrupted = False
            task.uncancel()
            return on_interrupt() if on_interrupt is not None else None
        finally:
            self._running = None

    def undo(self) -> int:
        """Drop the last turn (from its user input on); how many messages were removed."""
        return self.conversation.undo()

    async def switch_model(self, model: Model | str) -> Model:
        """Use another model from the next step on (an id is built with the runtime's settings)."""
        new = self.runtime.make_model(model) if isinstance(model, str) else model
        old, owned = self._model, self._owns_model
        self._model, self._owns_model = new, isinstance(model, str)
        self.record_event("model", model=new.name)
        self._plan_output()
        if owned and old is not None:
            await old.aclose()
        return new

    def set_variables(self, variables: Mapping[str, Any]) -> None:
        """Change template variables; the system prompt is rendered again for the next request."""
        self.variables.update(variables)
        self.options.variables.update(variables)  # kept by a reload, too
        self._tool_context = dataclasses.replace(
            self.tool_context, vars=MappingProxyType(dict(self.variables))
        )
        if self.conversation.system is not None:
            self._compose_system()
        self.record_event("vars", names=sorted(variables))

    async def reload(self, config: AgentConfig) -> str:
        """Build ``config``'s runtime now (errors raise, the old one stays); used from the next turn."""
        if self.host is None:
            raise RunnerError("this session cannot reload: open it with Session.open(host)")
        runtime = await self.host.prepare(config)
        try:
            # A template that cannot render fails the reload now, not at the next turn.
            runtime.prompts.system(
                self.conversation.first_input or "", runtime.prompts.variables(self.options.variables)
            )
        except BaseException:
            await runtime.aclose()
            raise
        await self.host.install(config, runtime)
        self.record_for_next_turn("reload", changes=runtime.changes, applies="next turn")
        return runtime.changes

    async def move_to(self, host: RuntimeHost) -> None:
        """Go on with ``host``'s runtime (another agent: an editor's mode switch): its system prompt,
        tools and limits from the next turn on; the conversation stays, the transcript goes on."""
        runtime = await host.acquire()
        old, lease = self.runtime, self._lease
        self._runtime, self._lease = runtime, host
        if self.host is not None:
            self._host = host
        self._variables = runtime.prompts.variables(self.options.variables)
        self._apply_runtime()
        if self.conversation.system is not None:
            self._compose_system()
        if lease is not None:
            await lease.release(old)

    async def _follow_host(self) -> None:
        """At a turn boundary: move to the host's current runtime when a reload installed one."""
        host = self.host
        if host is None or host.current is None or host.current is self.runtime:
            return
        old = self.runtime
        self._runtime = await host.acquire()
        self._variables = self.runtime.prompts.variables(self.options.variables)
        self._apply_runtime()
        if self.conversation.system is not None:
            self._compose_system()
        await host.release(old)
