"""A turn (SPEC section 5): the user message, ``turn_pre``, the mode's work, then steps until one ends it.

step = ``step_pre`` hooks -> limits -> the request -> generate (tools start as soon as their arguments
are complete) -> ``generation_post`` -> the assistant message -> its tool calls through the gate ->
one result per call, in call order. Each step returns an ``EndTurn`` or None (go on); when several
reasons meet in one step, ``decide`` picks one. Every call in the history gets exactly one result,
whatever ends the turn (Ctrl+C, a timeout, a model error, a client that went away).

A ``Turn`` is also the ``TurnAccess`` the ``prompt`` mode's selector uses.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any, Literal, Protocol

import runner.telemetry as telemetry
from runner.agentfile.config import LimitsConfig, TemplateSource
from runner.errors import LimitReached, ModelError, RunnerError
from runner.models.base import (
    Completed,
    Model,
    ReasoningDelta,
    Reply,
    Request,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallReady,
    Usage,
)
from runner.modes.base import ReplyReader
from runner.session.answers import TurnAnswers
from runner.session.conversation import NOTE_PREFIX
from runner.session.decisions import EndTurn, decide
from runner.session.events import (
    AnswerDraft,
    AssistantMessage,
    ReasoningChunk,
    StepStarted,
    TextChunk,
    ToolFinished,
    TurnEnded,
)
from runner.session.gate import Confirmation, GateParts, GateResult, StepCalls, ToolGate
from runner.session.hookglue import SessionHooks
from runner.session.limits import Budget, RepeatGuard
from runner.session.results import TurnResult
from runner.session.view import SessionView
from runner.text import counted
from runner.tools.base import RunContext, ToolResult
from runner.tools.executor import gather_in_order, interrupted_results

__all__ = ["Turn", "TurnResult", "TurnSession"]

#: The transcript event that records each way a turn can stop early (SPEC section 12).
_STOP_EVENTS: dict[str, str] = {
    "limit": "limit",
    "max_steps": "limit",
    "repeat": "limit",
    "interrupted": "interrupt",
    "hook": "hook",
}


class TurnSession(SessionView, Protocol):
    """What a turn uses of its session (``session.Session``, named so this module need not import it)."""

    current_input: str

    @property
    def calls(self) -> list[str]:
        """The tools the model called, in order (``RunResult.tools``; the turn appends to it)."""
        ...

    def build_request(self, messages: list[dict[str, Any]]) -> Request: ...

    @property
    def limits(self) -> LimitsConfig: ...
    @property
    def budget(self) -> Budget: ...
    @property
    def confirmation(self) -> Confirmation: ...
    @property
    def hooks(self) -> SessionHooks: ...
    @property
    def tool_context(self) -> RunContext: ...
    @property
    def stream(self) -> bool: ...
    @property
    def request_params(self) -> dict[str, Any]: ...

    async def interruptible(
        self, work: Awaitable[Any], *, on_interrupt: Callable[[], Any] | None = None
    ) -> Any: ...
    def ensure_system_prompt(self, first_input: str) -> None: ...
    def fit_context(self) -> None: ...
    def count_usage(self, usage: Usage) -> None: ...
    def output_refused(self, error: ModelError) -> bool: ...
    def request_tools(self) -> list[dict[str, Any]] | None: ...


class Turn:
    """One turn of a session, on its runtime of the moment."""

    def __init__(self, session: TurnSession) -> None:
        self.session = session
        self.runtime = session.runtime
        self.conversation = session.conversation
        self.limits = session.limits
        self.steps = 0
        self.output = ""
        self.ends: list[EndTurn] = []
        self.pending: list[ToolCall] = []
        self.calls: StepCalls | None = None
        self.client_calls: list[ToolCall] = []
        #: When the step's model call began, and seconds to its first streamed piece (the page's timeline).
        self._call_began = self._call_seconds = 0.0
        self._first_token: float | None = None
        self._client_names = session.client_names
        self.answers = TurnAnswers(self)  # the structured answer, under ``output:``
        self._text = AnswerDraft if session.output_plan is not None else TextChunk
        self.gate = ToolGate(
            GateParts(
                registry=self.runtime.registry,
                context=session.tool_context,
                limits=self.limits,
                budget=session.budget,
                repeat=RepeatGuard(self.limits.max_repeat),
                permissions=self.runtime.permissions,
                confirmation=session.confirmation,
                hooks=session.hooks,
                sink=session.sink,
            )
        )

    # ----------------------------------------------------------------- the turn

    async def run(self, text: str | None) -> TurnResult:
        """Run the turn on ``text`` (None continues the history without a new message)."""
        end: EndTurn | None = None
        session = self.session
        if text is not None:
            session.current_input = text
            session.ensure_system_prompt(text)
            self.conversation.append(self.runtime.prompts.user(text, session.variables))
            end = await self._turn_pre()
        else:
            session.ensure_system_prompt(session.current_input)
        try:
            if end is None and text is not None:
                await self.runtime.mode.before_steps(self, text)
                end = decide(self.ends)
            while end is None:
                try:
                    end = await session.interruptible(self._step(), on_interrupt=self._interrupted)
                except LimitReached as exc:  # the session's timeout_s, which stops a step from outside
                    self._finish_pending(f"Not executed: {exc.message}.")
                    end = EndTurn.for_limit(exc)
        except RunnerError as exc:
            self._finish_pending(f"Not executed: {exc.message}")
            session.record_event("error", error=type(exc).__name__, message=exc.message)
            raise
        except Exception as exc:
            self._finish_pending(f"Not executed: the turn failed ({type(exc).__name__}).")
            session.record_event("error", error=type(exc).__name__, message=str(exc))
            raise
        except BaseException:  # cancelled from outside (a client went away): keep the history valid
            self._finish_pending("Not executed: the turn was cancelled.")
            raise
        return self._end(end)

    async def _turn_pre(self) -> EndTurn | None:
        hooks = self.session.hooks
        if not hooks.has("turn_pre"):
            return None
        try:
            outcome = await self.session.interruptible(hooks.run("turn_pre"))
        except LimitReached as exc:  # limits.timeout_s ran out during the chain
            return EndTurn.for_limit(exc)
        if outcome is None:
            return EndTurn("interrupted", "interrupted by the user")
        stop = hooks.apply("turn_pre", outcome)
        return EndTurn("hook", stop.reason) if stop else None

    def _interrupted(self) -> EndTurn:
        self._finish_pending("Interrupted by the user.")
        return EndTurn("interrupted", "interrupted by the user")

    def _end(self, end: EndTurn) -> TurnResult:
        session = self.session
        if end.note and end.reason not in ("done", "declined"):
            note = f"The turn was stopped: {end.note}."
            self.conversation.append({"role": "user", "content": NOTE_PREFIX + note})
            session.record_event(_STOP_EVENTS.get(end.reason, end.reason), reason=end.reason, note=end.note)
            session.note(note, "warning" if end.reason != "interrupted" else "info")
        session.sink(TurnEnded(self.output, end.reason))
        answer = self.answers.ready
        return TurnResult(
            self.output,
            end.reason,
            self.steps,
            end.limit,
            client_calls=self.client_calls,
            structured=answer is not None,
            value=answer.value if answer is not None else None,
            data=self.answers.data,
        )

    # ----------------------------------------------------------------- a step

    async def _step(self) -> EndTurn | None:
        session, limits = self.session, self.limits
        if self.steps >= limits.max_steps:
            note = f"it reached limits.max_steps ({counted(limits.max_steps, 'step')})"
            return EndTurn("max_steps", note, LimitReached(note, limit="max_steps"))
        if session.hooks.has("step_pre"):
            outcome = await session.hooks.run("step_pre", step=self.steps + 1)
            stop = session.hooks.apply("step_pre", outcome)
            if stop is not None:
                return EndTurn("hook", stop.reason)
        try:
            session.budget.check()
        except LimitReached as exc:
            return EndTurn.for_limit(exc)
        self.steps += 1
        session.sink(StepStarted(self.conversation.turn, self.steps))
        session.fit_context()
        calls = self.calls = StepCalls(self.steps, asyncio.Semaphore(limits.max_parallel))
        reader = self.runtime.mode.reader()
        eager = not session.hooks.has("generation_post")
        started: dict[str, asyncio.Task[GateResult]] = {}
        streamed: list[str] = []
        self._call_began, self._first_token = time.monotonic(), None
        try:
            reply = await self._generate_planned(reader, started if eager else None, streamed)
            self._call_seconds = time.monotonic() - self._call_began
        except BaseException:
            for task in started.values():
                task.cancel()
            if started:
                self._keep_started_calls(streamed, list(started))
            raise
        return await self._after_reply(reader, reply, started, calls)

    async def _after_reply(
        self,
        reader: ReplyReader,
        reply: Reply,
        started: dict[str, asyncio.Task[GateResult]],
        calls: StepCalls,
    ) -> EndTurn | None:
        session = self.session
        session.count_usage(reply.usage)
        message = reader.assistant_message(reply)
        end: EndTurn | None = None
        if session.hooks.has("generation_post"):
            outcome = await session.hooks.run("generation_post", step=self.steps, message=message)
            stop = session.hooks.apply("generation_post", outcome)
            if stop is not None:
                end = EndTurn("hook", stop.reason)
        extra: dict[str, Any] = {
            "usage": reply.usage.as_dict(),
            "duration_s": round(self._call_seconds, 4),
            "response_id": reply.response_id,  # None (the provider sent none): not written
        }
        if self._first_token is not None:
            extra["first_token_s"] = round(self._first_token, 4)
        if reply.reasoning:
            extra["reasoning"] = reply.reasoning
        self.conversation.append(message, **extra)
        session.calls.extend(c["function"]["name"] for c in message.get("tool_calls") or ())
        session.sink(AssistantMessage(message, reply.finish_reason))
        self.output = reply.content or ""
        plan = session.output_plan
        if plan is not None and end is None and (reply.tool_calls or not reader.unreadable()):
            verdict = await plan.read_checked(reply)
            if verdict is not None:
                ran = [started[c.id] for c in reply.tool_calls if c.id in started and c is not verdict.call]
                results = {o.result.call_id: o.result for o in await gather_in_order(ran)} if ran else {}
                return self.answers.final(reader, reply, verdict, results)
        if not reply.tool_calls:
            if reader.unreadable() and end is None:
                self._give_results(reader, [])  # unreadable tool blocks: the model reads why and tries again
                return None
            return end or EndTurn("done")
        self.pending = list(reply.tool_calls)
        if end is not None:
            self._finish_pending(f"Not executed: {end.note}.", reader)
            return end
        own = [call for call in reply.tool_calls if call.name not in self._client_names]
        if len(own) == 1 and not started:
            outcomes = [await self.gate.run(own[0], calls)]  # one call: no task to run it beside others
        else:
            tasks = [started.get(call.id) or asyncio.create_task(self.gate.run(call, calls)) for call in own]
            outcomes = await gather_in_order(tasks)
        self.pending = [call for call in reply.tool_calls if call.name in self._client_names]
        self._give_results(reader, [o.result for o in outcomes])
        end = decide(o.end for o in outcomes)
        if self.pending and end is None:
            # Calls of client tools stay unanswered: the turn ends and the caller sends their results.
            self.client_calls, self.pending = self.pending, []
            return EndTurn("client_tools")
        if end is not None:
            self._finish_pending(f"Not executed: {end.note}.", reader)
        return end

    async def _generate_planned(
        self,
        reader: ReplyReader,
        started: dict[str, asyncio.Task[GateResult]] | None,
        streamed: list[str],
    ) -> Reply:
        """Generate; a provider that refuses how ``output:`` is asked for gets the next strategy."""
        while True:
            try:
                return await self._generate(reader, started, streamed)
            except ModelError as exc:
                if started or streamed or not self.session.output_refused(exc):
                    raise

    async def _generate(
        self,
        reader: ReplyReader,
        started: dict[str, asyncio.Task[GateResult]] | None,
        streamed: list[str],
    ) -> Reply:
        request = self._request()
        with telemetry.chat(
            request.model, stream=request.stream, params=request.params, step=self.steps or None
        ) as scope:
            scope.content("gen_ai.input.messages", lambda: request.messages)
            reply = await self._call_model(request, reader, started, streamed, scope)
            scope.reply(reply)
        return reply

    async def _call_model(
        self,
        request: Request,
        reader: ReplyReader,
        started: dict[str, asyncio.Task[GateResult]] | None,
        streamed: list[str],
        scope: telemetry.Scope | telemetry.Noop,
    ) -> Reply:
        session = self.session
        if not session.stream:
            reply = reader.finish(await session.model.complete(request))
            if reply.reasoning:
                session.sink(ReasoningChunk(reply.reasoning))
            shown = reader.shown(reply.content or "")
            if shown:
                session.sink(self._text(shown))
            return reply
        inner = session.model.stream(request)
        events = reader.wrap_stream(inner)
        try:
            return await self._consume(events, started, streamed, scope)
        finally:
            # Both, deterministically (not when the collector finds them): the inner stream holds the
            # model's connection, and is closed even when closing the outer one fails.
            try:
                await _aclose(events)
            finally:
                await _aclose(inner)

    async def _consume(
        self,
        events: AsyncIterator[StreamEvent],
        started: dict[str, asyncio.Task[GateResult]] | None,
        streamed: list[str],
        scope: telemetry.Scope | telemetry.Noop,
    ) -> Reply:
        session = self.session
        calls = self.calls
        assert calls is not None
        first = True
        async for event in events:
            if first:  # the span's time to first chunk: once a call, not once a chunk
                first = False
                scope.first_chunk()
            if self._first_token is None and not isinstance(event, Completed):
                self._first_token = time.monotonic() - self._call_began
            if isinstance(event, TextDelta):
                streamed.append(event.text)
                session.sink(self._text(event.text))
            elif isinstance(event, ToolCallReady):
                call = event.call
                if started is not None and call.name not in self._client_names and not self._is_answer(call):
                    # On record before it runs: a kill -9 before the reply is complete must not hide
                    # a tool that ran (a resume answers the call; see Transcript.history).
                    session.record_event("tool_start", call=call.message())
                    started[call.id] = asyncio.create_task(self.gate.run(call, calls))
                    calls.started.append(call)
            elif isinstance(event, ReasoningDelta):
                session.sink(ReasoningChunk(event.text))
            elif isinstance(event, Completed):
                return event.reply
        raise RuntimeError("the model's stream ended without a Completed event")

    def _is_answer(self, call: ToolCall) -> bool:
        """Whether ``call`` is the final-answer call (the answer, never run as a tool)."""
        plan = self.session.output_plan
        return plan is not None and plan.strategy == "tool" and call.name == plan.tool_name

    def _keep_started_calls(self, streamed: list[str], ids: list[str]) -> None:
        """Generation stopped (Ctrl+C, timeout, an error) after some tools started: record their calls.

        Those tools ran (or began to), so the history must say so; the code that stopped the step
        then answers each call, keeping the results of the ones that finished.
        """
        assert self.calls is not None
        started = [call for call in self.calls.started if call.id in ids]
        message: dict[str, Any] = {
            "role": "assistant",
            "content": "".join(streamed) or None,
            "tool_calls": [call.message() for call in started],
        }
        self.conversation.append(message)
        self.pending = started

    def _request(self) -> Request:
        session = self.session
        status = self.runtime.prompts.status(session.current_input, session.variables)
        request = session.build_request(self.conversation.messages(status))
        run = self.conversation.encoded_run()  # a restored history's messages, encoded once
        return request if run is None else replace(request, encoded=run)

    # ----------------------------------------------------------------- results

    def _give_results(self, reader: ReplyReader | None, results: Sequence[ToolResult]) -> None:
        """Give results back the way the mode says, and report each one."""
        conversation = self.conversation
        reader = reader or ReplyReader()
        for result in results:
            if result.is_error:
                conversation.errors.add(result.call_id)
        for item in reader.result_messages(results):
            r = item.result
            if r is None:
                conversation.append(item.message)
            else:
                conversation.append(
                    item.message,
                    name=r.name,
                    is_error=r.is_error or None,
                    duration_s=round(r.duration_s, 4),
                )
        for result in results:
            self.session.sink(ToolFinished(result))

    def _finish_pending(self, reason: str, reader: ReplyReader | None = None) -> None:
        if not self.pending:
            return
        done = list(self.calls.finished.values()) if self.calls is not None else []
        results = interrupted_results(self.pending, done, reason=reason)
        self.pending = []
        self._give_results(reader, results)

    # ----------------------------------------------------------------- TurnAccess (the modes' view)

    @property
    def tool_definitions(self) -> list[dict[str, Any]]:
        """The agent's tool definitions."""
        return self.runtime.tool_definitions

    @property
    def history(self) -> Sequence[dict[str, Any]]:
        """The conversation so far."""
        return self.conversation.history

    @property
    def model(self) -> Model:
        """The model of the session."""
        return self.session.model

    @property
    def ended(self) -> bool:
        """Whether a decision already ends the turn."""
        return decide(self.ends) is not None

    async def execute(self, calls: Sequence[ToolCall]) -> list[ToolResult]:
        """Run calls through the gate (a mode's own calls); results in call order, reported."""
        step = StepCalls(self.steps, asyncio.Semaphore(self.limits.max_parallel))
        tasks = [asyncio.create_task(self.gate.run(call, step)) for call in calls]
        outcomes = await gather_in_order(tasks)
        self.ends.extend(o.end for o in outcomes if o.end is not None)
        for outcome in outcomes:
            if outcome.result.is_error:
                self.conversation.errors.add(outcome.result.call_id)
            self.session.sink(ToolFinished(outcome.result))
        return [o.result for o in outcomes]

    def count_usage(self, usage: Usage) -> None:
        """Add a model call's usage to the session."""
        self.session.count_usage(usage)

    def note(self, text: str, level: Literal["info", "warning", "error"] = "info") -> None:
        """Tell the user something."""
        self.session.note(text, level)

    def record(self, name: str, **data: Any) -> None:
        """Write an event to the transcript."""
        self.session.record_event(name, **data)

    def add_context(self, content: str) -> None:
        """Append a context message (the prompt mode's tool outputs)."""
        self.conversation.append({"role": "user", "content": content})

    def render(self, source: TemplateSource, extra: dict[str, Any]) -> str:
        """Render an agent template with the session's variables."""
        return self.session.render(source, extra)


async def _aclose(stream: object) -> None:
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        await aclose()
