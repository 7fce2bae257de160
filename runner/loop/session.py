"""The interpreter (SPEC section 5): a session runs turns; a turn runs steps.

step = step_pre hooks -> limits -> build request -> generate (tools start as soon as their
arguments are complete) -> generation_post -> append the assistant message -> execute its tool
calls -> append one result per call, in call order. A turn ends when a reply has no tool call
(structural stop), or on max_steps, a repeat, a budget, a hook's stop, a declined tool, Ctrl+C.

Orchestration only: no printing (events go to an ``EventSink``), no provider code.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from runner.agentfile.config import AgentConfig
from runner.errors import LimitReached, RunnerError
from runner.loop import context as ctxmod
from runner.loop.events import (
    AssistantMessage,
    EventSink,
    Note,
    ReasoningChunk,
    StepStarted,
    TextChunk,
    ToolFinished,
    TurnEnded,
    UsageUpdate,
)
from runner.loop.hooks import ChainOutcome, HookEvent
from runner.loop.limits import Budget, RepeatGuard
from runner.loop.modes import Mode
from runner.loop.prompts import PromptRenderer, compose_system
from runner.loop.session_hooks import SessionHooks
from runner.loop.toolcalls import NOTE_PREFIX, ToolGate
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
)
from runner.models.factory import model_params
from runner.store.transcript import TranscriptWriter
from runner.tools.base import RunContext, Tool, ToolResult
from runner.tools.executor import gather_in_order, interrupted_results
from runner.tools.permissions import Permissions
from runner.tools.registry import ToolRegistry

StopReason = Literal[
    "done", "max_steps", "limit", "repeat", "hook", "declined", "interrupted", "client_tools"
]
ConfirmAnswer = Literal["yes", "no", "always"]
ConfirmFn = Callable[[Tool, dict[str, Any]], Awaitable[ConfirmAnswer]]


#: The transcript event that records each way a turn can stop early (SPEC section 12).
_STOP_EVENTS: dict[str, str] = {
    "limit": "limit",
    "max_steps": "limit",
    "repeat": "limit",
    "interrupted": "interrupt",
    "hook": "hook",
}


@dataclass
class RunOptions:
    """How this run differs from the agent file (CLI flags, request parameters)."""

    variables: dict[str, Any] = field(default_factory=dict)
    stream: bool | None = None
    assume_yes: bool = False
    confirm: ConfirmFn | None = None
    params: dict[str, Any] = field(default_factory=dict)
    #: Tools the caller runs itself (OpenAI tool specs, sent after the agent's own): a reply that
    #: calls one ends the turn with reason "client_tools", its calls left for the caller to answer.
    client_tools: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class TurnResult:
    """How a turn ended."""

    output: str
    reason: StopReason
    steps: int
    limit: LimitReached | None = None
    #: With reason "client_tools": the calls of client tools waiting for the caller's results.
    client_calls: list[ToolCall] = field(default_factory=list)


@dataclass
class PreparedReload:
    """A new configuration, opened and checked, waiting for the next turn boundary (``--watch``)."""

    spec: AgentConfig
    registry: ToolRegistry
    instructions: list[str]
    renderer: PromptRenderer
    model: Model | None
    changes: str
    mode: Mode | None = None


@dataclass
class TurnState:
    steps: int = 0
    stop: StopReason | None = None
    stop_note: str | None = None
    limit: LimitReached | None = None
    output: str = ""
    pending: list[ToolCall] = field(default_factory=list)
    finished: dict[str, ToolResult] = field(default_factory=dict)
    warned: dict[str, int] = field(default_factory=dict)
    streamed: list[str] = field(default_factory=list)  # this step's text so far
    started: list[ToolCall] = field(default_factory=list)  # this step's calls started while streaming
    client_calls: list[ToolCall] = field(default_factory=list)


class Session:
    """One conversation with one agent: history, prompt queue, budgets, transcript."""

    def __init__(
        self,
        spec: AgentConfig,
        *,
        session_id: str,
        model: Model,
        registry: ToolRegistry,
        renderer: PromptRenderer,
        transcript: TranscriptWriter | None,
        sink: EventSink,
        options: RunOptions,
        instructions: list[str] | None = None,
        mode: Mode | None = None,
    ) -> None:
        self.spec = spec
        self.mode = mode or Mode("native", "function_calling: native")
        self.gate = ToolGate(self)
        self._model_params = model_params(spec.model)  # per request; changes only with a reload
        self.selector_model: Model | None = None  # prompt mode: selector.model, when it names another
        self.session_id = session_id
        self.model = model
        self.registry = registry
        self.renderer = renderer
        self.transcript = transcript
        self.sink = sink
        self.options = options
        self.instructions = [i for i in instructions or [] if i.strip()]
        self.limits = spec.limits
        self.budget = Budget(spec.limits)
        self.history: list[dict[str, Any]] = []
        self.system: dict[str, Any] | None = None
        self.queue: deque[str] = deque()
        self.turn = 0
        self.permissions = Permissions(spec.permissions)
        self.always_allowed: set[str] = set()
        self._confirming = asyncio.Lock()
        self.hook_glue = SessionHooks(self)
        self.hooks = self.hook_glue.runner()
        self.tool_ctx = RunContext(
            session_id=session_id,
            agent=spec.name,
            vars=dict(renderer.variables),
            workspace=spec.directory,
            logger=logging.getLogger(f"runner.agent.{spec.name}"),
        )
        self.stream = spec.model.stream if spec.model else True
        if options.stream is not None:
            self.stream = options.stream
        self._tools = registry.definitions() or None
        # The tool specs are part of every prompt: they count toward limits.context_tokens.
        self._tools_chars = len(json.dumps(self._tools, ensure_ascii=False)) if self._tools else 0
        # The caller's tools follow the agent's own in every request (an agent tool of the same name wins).
        self._client_specs = [
            t for t in options.client_tools if t.get("function", {}).get("name") not in registry
        ]
        self._client_names = {t["function"]["name"] for t in self._client_specs}
        if self._client_specs:
            self._tools_chars += len(json.dumps(self._client_specs, ensure_ascii=False))
        self._repeat = RepeatGuard(spec.limits.max_repeat)
        self._errors: set[str] = set()
        self._names: dict[str, str] = {}
        self._chars = 0
        self._input = ""
        self.first_input = ""
        self.reloader: Any = None
        self._pending_reload: PreparedReload | None = None
        self._step_task: asyncio.Task[Any] | None = None  # what Ctrl+C stops: a step or a hook chain
        self._interrupted = False
        self.outputs: list[str] = []
        self.ended: str | None = None
        """Why a ``session_start`` hook ended the session; every turn is then refused."""

    # ----------------------------------------------------------------- history and records

    def _append(self, message: dict[str, Any], **extra: Any) -> None:
        self.history.append(message)
        self._chars += ctxmod.message_chars(message)
        if self.transcript is not None:
            self.transcript.message(message, **extra)

    def _event(self, name: str, **data: Any) -> None:
        if self.transcript is not None:
            self.transcript.event(name, **data)

    @property
    def current_input(self) -> str:
        """The user input of the turn under way (what templates see as ``input``)."""
        return self._input

    def record_event(self, name: str, **data: Any) -> None:
        """Write an event record to the transcript (used by nested sessions and the edges)."""
        self._event(name, **data)

    def note(self, text: str, level: Literal["info", "warning", "error"] = "info") -> None:
        """Tell the user something (and record it)."""
        self.sink(Note(text, level))

    def restore(
        self,
        history: list[dict[str, Any]],
        *,
        system: dict[str, Any] | None = None,
        errors: set[str] | None = None,
        turns: int | None = None,
    ) -> None:
        """Load a saved history (resume); the system prompt is kept as it was recorded.

        ``errors`` are the call ids of error results, which context compression never replaces;
        ``turns`` how many turns the session ran (else the user inputs in the history are counted).
        """
        self.system = system
        for message in history:
            self.history.append(message)
            self._chars += ctxmod.message_chars(message)
            for call in message.get("tool_calls") or ():
                self._names[call["id"]] = call["function"]["name"]
        self._errors |= errors or set()
        if turns is None:
            turns = sum(1 for m in self.history if m.get("role") == "user" and not _is_note(m))
        self.turn = turns
        self.budget.turns = self.turn
        self._answer_dangling_calls()

    def _answer_dangling_calls(self) -> None:
        """Give every unanswered tool call in the history a result (a crash mid-execution)."""
        answered = {m.get("tool_call_id") for m in self.history if m.get("role") == "tool"}
        for message in list(self.history):
            for call in message.get("tool_calls") or ():
                if call["id"] not in answered:
                    self._append(
                        self._tool_message(
                            call["id"], "Not executed: the runner stopped before this call finished."
                        ),
                        name=call["function"]["name"],
                    )

    def needs_continuation(self) -> bool:
        """Whether the history ends waiting for the model (a user message or tool results).

        A runner note (a turn stopped by Ctrl+C, a limit or a hook) is not a question for the model:
        after one, resuming waits for new input instead of generating at once.
        """
        if not self.history:
            return False
        last = self.history[-1]
        if last.get("role") == "user" and _is_note(last):
            return False
        return last.get("role") in ("user", "tool")

    # ----------------------------------------------------------------- session

    async def start(self) -> bool:
        """Run ``session_start`` hooks; False when one of them stops the session."""
        if not self.hooks.has("session_start"):
            return True
        outcome = await self.hooks.run(self.hook_glue.event("session_start"))
        for message in outcome.messages:
            self._append(message)
        if outcome.stop:
            self.ended = outcome.reason or "no reason given"
            self._event("hook", hook_event="session_start", stop=True, reason=self.ended)
            self.note(f"session_start hook stopped the session: {self.ended}", "warning")
            return False
        return True

    async def end(self) -> None:
        """Run ``session_end`` hooks."""
        if self.hooks.has("session_end"):
            await self.hooks.run(self.hook_glue.event("session_end"))

    def enqueue(self, text: str, *, origin: str = "user") -> bool:
        """Add an input to the prompt queue, within ``max_queue`` and ``max_turns``; False if dropped."""
        if len(self.queue) >= self.limits.max_queue:
            self.note(
                f"dropped a queued message from {origin}: the queue is full "
                f"(limits.max_queue = {self.limits.max_queue})",
                "warning",
            )
            self._event("queue_drop", origin=origin, reason="max_queue")
            return False
        if origin != "user" and self.turn + len(self.queue) >= self.limits.max_turns:
            self.note(
                f"dropped a queued message from {origin}: it would exceed limits.max_turns "
                f"({self.limits.max_turns})",
                "warning",
            )
            self._event("queue_drop", origin=origin, reason="max_turns")
            return False
        self.queue.append(text)
        return True

    def interrupt(self) -> None:
        """Ctrl+C: stop the running step (the turn then ends with every call answered)."""
        if self._step_task is not None and not self._step_task.done():
            self._interrupted = True
            self._step_task.cancel()

    def undo(self) -> int:
        """Drop the last turn (from its user input on); how many messages were removed."""
        for index in range(len(self.history) - 1, -1, -1):
            message = self.history[index]
            if message.get("role") == "user" and not _is_note(message):
                removed = len(self.history) - index
                del self.history[index:]
                self._chars = sum(ctxmod.message_chars(m) for m in self.history)
                self.turn = max(0, self.turn - 1)
                keep = len(self.history) + (1 if self.system is not None else 0)
                self._event("undo", keep=keep, removed=removed, turn=self.turn)
                return removed
        return 0

    def set_model(self, model: Model) -> None:
        """Use another model from the next step on."""
        self.model = model
        self._event("model", model=model.name)

    def set_variables(self, variables: dict[str, Any]) -> None:
        """Change template variables; the system prompt is rendered again for the next request."""
        self.renderer.variables.update(variables)
        self.options.variables.update(variables)  # kept by a reload, too
        self.tool_ctx = dataclasses.replace(self.tool_ctx, vars=dict(self.renderer.variables))
        if self.system is not None:
            self._render_system(self._input)
        self._event("vars", names=sorted(variables))

    def schedule_reload(self, prepared: PreparedReload) -> None:
        """Use ``prepared`` from the next turn on (never in the middle of a step); the history stays."""
        self._pending_reload = prepared
        self._event("reload", changes=prepared.changes, applies="next turn")

    async def _apply_reload(self) -> None:
        prepared, self._pending_reload = self._pending_reload, None
        assert prepared is not None
        spec = prepared.spec
        self.spec, self.limits = spec, spec.limits
        self._model_params = model_params(spec.model)
        self.budget.limits = spec.limits
        self.registry = prepared.registry
        self._tools = prepared.registry.definitions() or None
        self._tools_chars = len(json.dumps(self._tools, ensure_ascii=False)) if self._tools else 0
        self.renderer = prepared.renderer
        self.instructions = [i for i in prepared.instructions if i.strip()]
        self.permissions = Permissions(spec.permissions)
        self.hooks = self.hook_glue.runner()
        self._repeat = RepeatGuard(spec.limits.max_repeat)
        if prepared.mode is not None:
            self.mode = prepared.mode
        if prepared.model is not None:
            old, self.model = self.model, prepared.model
            await old.aclose()
        self.stream = spec.model.stream if spec.model else True
        if self.options.stream is not None:
            self.stream = self.options.stream
        if self.system is not None:
            self._render_system(self.first_input)

    # ----------------------------------------------------------------- turn

    async def run_turn(self, text: str | None) -> TurnResult:
        """Run one turn on ``text`` (None continues a resumed history without a new message)."""
        if self.ended is not None:
            self.sink(TurnEnded("", "hook"))
            return TurnResult("", "hook", 0)
        if self._pending_reload is not None:
            await self._apply_reload()
        try:
            self.budget.check_turn()
        except LimitReached as exc:
            return self._end_turn(TurnState(limit=exc, stop="limit", stop_note=exc.message))
        self.turn += 1
        self.budget.turns = self.turn
        self._event("turn", turn=self.turn)
        self._repeat.reset()
        state = TurnState()
        if text is not None:
            self._input = text
            if self.system is None:
                self._render_system(text)
            self._append(self.renderer.user(text))
            if self.hooks.has("turn_pre"):
                outcome = await self._interruptible_hooks(self.hook_glue.event("turn_pre"))
                if outcome is None:
                    state.stop, state.stop_note = "interrupted", "interrupted by the user"
                else:
                    for message in outcome.messages:
                        self._append(message)
                    if outcome.stop:
                        state.stop = "hook"
                        state.stop_note = outcome.reason or "a turn_pre hook stopped the turn"
        elif self.system is None:
            self._render_system(self._input)
        try:
            if self.mode.kind == "prompt" and self._tools and state.stop is None and text is not None:
                from runner.loop.selection import select_tools

                await select_tools(self, state, text)
            await self._run_steps(state)
        except RunnerError as exc:
            self._finish_pending(state, f"Not executed: {exc.message}")
            self._event("error", error=type(exc).__name__, message=exc.message)
            raise
        except Exception as exc:
            self._finish_pending(state, f"Not executed: the turn failed ({type(exc).__name__}).")
            self._event("error", error=type(exc).__name__, message=str(exc))
            raise
        except BaseException:  # cancelled from outside (a client went away): keep the history valid
            self._finish_pending(state, "Not executed: the turn was cancelled.")
            raise
        result = self._end_turn(state)
        if state.stop not in ("interrupted", "client_tools"):  # a client_tools turn goes on later
            await self._after_turn()
        return result

    async def _run_steps(self, state: TurnState) -> None:
        while state.stop is None:
            task = self._step_task = asyncio.create_task(self._step(state))
            try:
                await self._guarded(task)
            except asyncio.CancelledError:
                if not self._interrupted:
                    task.cancel()  # under a session timeout the step is shielded from our cancellation
                    raise
                self._interrupted = False
                self._finish_pending(state, "Interrupted by the user.")
                state.stop, state.stop_note = "interrupted", "interrupted by the user"
            except LimitReached as exc:
                self._finish_pending(state, f"Not executed: {exc.message}.")
                state.stop, state.limit, state.stop_note = "limit", exc, exc.message
            finally:
                self._step_task = None

    async def _guarded(self, task: asyncio.Task[None]) -> None:
        remaining = self.budget.remaining_s()
        if remaining is None:
            await task
            return
        try:
            async with asyncio.timeout(max(remaining, 0.001)):
                await asyncio.shield(task)
        except TimeoutError:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            raise LimitReached(
                f"the session ran {self.limits.timeout_s:g} s (limits.timeout_s)", limit="timeout_s"
            ) from None

    def _end_turn(self, state: TurnState) -> TurnResult:
        reason: StopReason = state.stop or "done"
        if state.stop_note and reason not in ("done", "declined"):
            note = f"The turn was stopped: {state.stop_note}."
            self._append({"role": "user", "content": NOTE_PREFIX + note})
            self._event(_STOP_EVENTS.get(reason, reason), reason=reason, note=state.stop_note)
            self.note(note, "warning" if reason != "interrupted" else "info")
        self.outputs.append(state.output)
        self.sink(TurnEnded(state.output, reason))
        return TurnResult(state.output, reason, state.steps, state.limit, client_calls=state.client_calls)

    async def _after_turn(self) -> None:
        for event in ("turn_post", "loop_continue"):
            if self.hooks.has(event):
                outcome = await self._interruptible_hooks(self.hook_glue.event(event))
                if outcome is None:
                    self.note(f"interrupted the {event} hooks; nothing was queued")
                    return
                for message in outcome.messages:
                    self.enqueue(str(message["content"]), origin=f"{event} hook")

    async def _interruptible_hooks(self, event: HookEvent) -> ChainOutcome | None:
        """Run a turn-level chain that Ctrl+C can stop (a slow ``pytest`` hook); None if it did."""
        task = self._step_task = asyncio.create_task(self.hooks.run(event))
        try:
            return await task
        except asyncio.CancelledError:
            if not self._interrupted:
                task.cancel()
                raise
            return None
        finally:
            self._interrupted = False
            self._step_task = None

    def _finish_pending(self, state: TurnState, reason: str) -> None:
        if not state.pending:
            return
        results = interrupted_results(state.pending, list(state.finished.values()), reason=reason)
        self._append_results(results)
        state.pending = []

    # ----------------------------------------------------------------- step

    async def _step(self, state: TurnState) -> None:
        if state.steps >= self.limits.max_steps:
            state.stop = "max_steps"
            state.stop_note = f"it reached limits.max_steps ({self.limits.max_steps} steps)"
            state.limit = LimitReached(state.stop_note, limit="max_steps")
            return
        if self.hooks.has("step_pre"):
            outcome = await self.hooks.run(self.hook_glue.event("step_pre", step=state.steps + 1))
            for message in outcome.messages:
                self._append(message)
            if outcome.stop:
                state.stop, state.stop_note = "hook", outcome.reason or "a step_pre hook stopped the turn"
                return
        self.budget.check()
        state.steps += 1
        self.sink(StepStarted(self.turn, state.steps))
        self._fit_context()
        request = self._request()
        eager = not self.hooks.has("generation_post")
        started: dict[str, asyncio.Task[ToolResult]] = {}
        semaphore = asyncio.Semaphore(self.limits.max_parallel)
        state.streamed, state.started = [], []
        try:
            reply = await self._generate(request, state, started if eager else None, semaphore)
        except BaseException:
            for task in started.values():
                task.cancel()
            if started:
                self._keep_started_calls(state)
            raise
        self.budget.add(reply.usage)
        self.sink(UsageUpdate(reply.usage, self.budget.usage))
        message = self.mode.assistant_message(reply)
        if self.hooks.has("generation_post"):
            outcome = await self.hooks.run(
                self.hook_glue.event("generation_post", step=state.steps, message=message)
            )
            if outcome.stop:
                state.stop, state.stop_note = (
                    "hook",
                    outcome.reason or "a generation_post hook stopped the turn",
                )
        extra: dict[str, Any] = {"usage": _usage_dict(reply)}
        if reply.reasoning:
            extra["reasoning"] = reply.reasoning
        self._append(message, **extra)
        self.sink(AssistantMessage(message))
        state.output = reply.content or ""
        if not reply.tool_calls:
            if self.mode.pending_errors() and state.stop is None:
                self._append_results([])  # unreadable tool blocks: the model reads why and tries again
                return
            state.stop = state.stop or "done"
            return
        for call in reply.tool_calls:
            self._names[call.id] = call.name
        state.pending = list(reply.tool_calls)
        if state.stop is not None:
            self._finish_pending(state, f"Not executed: {state.stop_note}.")
            return
        tasks = [
            started.get(call.id) or asyncio.create_task(self.gate.execute(call, state, semaphore))
            for call in reply.tool_calls
            if call.name not in self._client_names
        ]
        results = await gather_in_order(tasks)
        self._append_results(results)
        # Calls of client tools stay unanswered: the turn ends and the caller sends their results.
        state.pending = [call for call in reply.tool_calls if call.name in self._client_names]
        if state.pending and state.stop is None:
            state.stop, state.client_calls, state.pending = "client_tools", state.pending, []
        self._finish_pending(state, f"Not executed: {state.stop_note}.")

    async def _generate(
        self,
        request: Request,
        state: TurnState,
        started: dict[str, asyncio.Task[ToolResult]] | None,
        semaphore: asyncio.Semaphore,
    ) -> Reply:
        if not self.stream:
            reply = self.mode.finish(await self.model.complete(request))
            if reply.reasoning:
                self.sink(ReasoningChunk(reply.reasoning))
            if reply.content:
                self.sink(TextChunk(reply.content))
            return reply
        inner = self.model.stream(request)
        events = self.mode.wrap_stream(inner)
        try:
            return await self._consume(events, state, started, semaphore)
        finally:
            for stream in (events, inner):
                aclose = getattr(stream, "aclose", None)
                if aclose is not None:
                    await aclose()

    async def _consume(
        self,
        events: AsyncIterator[StreamEvent],
        state: TurnState,
        started: dict[str, asyncio.Task[ToolResult]] | None,
        semaphore: asyncio.Semaphore,
    ) -> Reply:
        async for event in events:
            if isinstance(event, TextDelta):
                state.streamed.append(event.text)
                self.sink(TextChunk(event.text))
            elif isinstance(event, ToolCallReady):
                if started is not None and event.call.name not in self._client_names:
                    # On record before it runs: a kill -9 before the reply is complete must not hide
                    # a tool that ran (a resume answers the call; see Transcript.history).
                    self._event("tool_start", call=event.call.message())
                    started[event.call.id] = asyncio.create_task(
                        self.gate.execute(event.call, state, semaphore)
                    )
                    state.started.append(event.call)
            elif isinstance(event, ReasoningDelta):
                self.sink(ReasoningChunk(event.text))
            elif isinstance(event, Completed):
                return event.reply
        raise RuntimeError("the model's stream ended without a Completed event")

    def _keep_started_calls(self, state: TurnState) -> None:
        """Generation stopped (Ctrl+C, timeout, an error) after some tools started: record their calls.

        Those tools ran (or began to), so the history must say so; the code that stopped the step
        then answers each call, keeping the results of the ones that finished.
        """
        message: dict[str, Any] = {
            "role": "assistant",
            "content": "".join(state.streamed) or None,
            "tool_calls": [call.message() for call in state.started],
        }
        self._append(message)
        for call in state.started:
            self._names[call.id] = call.name
        state.pending = list(state.started)

    def _request(self) -> Request:
        messages = [self.system, *self.history] if self.system is not None else list(self.history)
        status = self.renderer.status(self._input)
        if status is not None:
            messages.append(status)
        params = {**self._model_params, **self.options.params}
        tools = [*(self._tools or ()), *self._client_specs] if self._client_specs else self._tools
        tools = self.mode.request_tools(tools)
        return Request(
            model=self.model.name, messages=messages, tools=tools, params=params, stream=self.stream
        )

    # ----------------------------------------------------------------- tools

    def _tool_message(self, call_id: str, content: str) -> dict[str, Any]:
        return {"role": "tool", "tool_call_id": call_id, "content": content}

    def sink_tool_finished(self, result: ToolResult) -> None:
        """Report a result that is given back some other way (the prompt mode's context message)."""
        if result.is_error:
            self._errors.add(result.call_id)
        self.sink(ToolFinished(result))

    def append_context(self, content: str) -> None:
        """Add a context message (the prompt mode's tool outputs) before the model answers."""
        self._append({"role": "user", "content": content})

    def _append_results(self, results: list[ToolResult]) -> None:
        """Give results back the way the mode says: ``role: tool`` messages, or one user message."""
        if self.mode.kind == "native":
            for result in results:
                self._append_result(result)
            return
        for result in results:
            self.sink_tool_finished(result)
        for message in self.mode.result_messages(results):
            self._append(message)

    def _append_result(self, result: ToolResult) -> None:
        if result.is_error:
            self._errors.add(result.call_id)
        self._append(
            self._tool_message(result.call_id, result.content),
            name=result.name,
            is_error=result.is_error or None,
            duration_s=round(result.duration_s, 4),
        )
        self.sink(ToolFinished(result))

    # ----------------------------------------------------------------- prompts and context

    def _render_system(self, first_input: str) -> None:
        self.first_input = first_input
        section = self.mode.system_section(self._tools or [])
        system = compose_system(self.renderer.system(first_input), self.instructions, section)
        self.system = system
        if system is not None and self.transcript is not None:
            self.transcript.prompt(system)

    def _fit_context(self) -> None:
        limit = self.limits.context_tokens
        if limit is None:
            return
        fixed = (ctxmod.message_chars(self.system) if self.system else 0) + self._tools_chars
        total = self._chars + fixed
        budget_chars = limit * ctxmod.CHARS_PER_TOKEN
        if total <= budget_chars:
            return
        starts = ctxmod.step_starts(self.history)
        protected = starts[-2] if len(starts) >= 2 else (starts[0] if starts else len(self.history))
        done = ctxmod.compress(
            self.history,
            over_chars=total - budget_chars,
            protected_from=protected,
            errors=self._errors,
            names=self._names,
        )
        if done:
            self._chars = sum(ctxmod.message_chars(m) for m in self.history)
            self._event(
                "compress",
                replaced=[{"index": c.index, "name": c.name, "chars": c.original_chars} for c in done],
                estimated_tokens=ctxmod.estimate_tokens(self._chars + fixed),
            )
            self.note(f"compressed {len(done)} old tool output(s) to fit limits.context_tokens ({limit})")


def _is_note(message: dict[str, Any]) -> bool:
    """Whether a message is a note the runner added (not a user's input)."""
    content = message.get("content")
    return isinstance(content, str) and content.startswith(NOTE_PREFIX)


def _usage_dict(reply: Reply) -> dict[str, Any]:
    usage = reply.usage
    data: dict[str, Any] = {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
    }
    if usage.cost_usd is not None:
        data["cost_usd"] = usage.cost_usd
    return data
