"""One request to a workflow model: the workflow run once, its steps as reasoning, its output as the answer.

``open_workflow_run`` checks what a request may ask of a workflow (``workflow_input``,
``lowered_workflow``) and makes a ``WorkflowRun``, which the server drives like an agent's
``ChatRun``: ``start``, ``pieces``, ``cancel``, ``wait_closed``. The run is a ``WorkflowEngine`` on
the workflow's shared pool of agent runtimes, with a workflow transcript (as ``runner run`` writes
it) whose session id the access line names.

- The input is the text of the last message, which must be a user message; earlier messages are
  not given to the workflow (it is one-shot: each request is one run from its first step).
- Each step's start and end is a line of ``reasoning_content`` (Open WebUI folds it away; plain
  clients ignore it); a step start is also a ``StepRunning`` piece (the pipe's status line).
- The answer is the workflow's output: a string as it is, anything else as JSON text. Exit 3 with
  an output (a loop that hit ``max_iterations``) answers it with the note after it (as a quoted
  line; in the reasoning instead when the answer is JSON); without an output, and exit 1 (a step
  failed), are errors in OpenAI's shape, 502 ``workflow_limit`` / ``workflow_failed``, secrets
  redacted and URLs hidden. Streamed, an error is an error event, then ``[DONE]``.
- A consumer that goes away calls ``cancel``: the engine is interrupted (every child session ends
  its turn cleanly, nothing new starts), and the run is cancelled outright only if it has not ended
  within ``INTERRUPT_GRACE_S``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

from runner.agentfile.output_schema import OutputSchema
from runner.agentfile.workflow import WorkflowConfig
from runner.errors import ConfigErrors, RunnerError
from runner.models.base import ToolCall, Usage
from runner.runnable.target import Target
from runner.runnable.workflow import WorkflowRunner, run_record
from runner.runtime.settings import RuntimeSettings
from runner.serve.catalog import ServedWorkflow
from runner.serve.engine import (
    URL,
    EndPiece,
    ReasoningPiece,
    RequestRun,
    StepRunning,
    TextPiece,
    check_output,
)
from runner.serve.outward import outward_redactor
from runner.serve.protocol import ApiError, ChatRequest
from runner.serve.reload import CatalogHolder
from runner.workflow import WorkflowEngine, WorkflowRecord, WorkflowResult
from runner.workflow.outcomes import answer_text, checked_output
from runner.workflow.progress import step_line

__all__ = [
    "INTERRUPT_GRACE_S",
    "SERVED_MAX_STEPS",
    "SERVED_MAX_TOKENS",
    "WorkflowRun",
    "lowered_workflow",
    "open_workflow_run",
    "served_workflow",
    "workflow_input",
]

log = logging.getLogger("runner.serve")

#: How long an interrupted workflow may take to end its child sessions before it is cancelled.
INTERRUPT_GRACE_S = 5.0
#: A served workflow always runs within a budget: these apply when its ``limits`` set none (a
#: client's request, or a planner's answer it sees, must not start an unbounded run).
SERVED_MAX_STEPS = 100
SERVED_MAX_TOKENS = 2_000_000


def _bad(message: str, param: str) -> ApiError:
    return ApiError(400, message, param=param)


def workflow_input(chat: ChatRequest) -> str:
    """The workflow's input: the text of the request's last message (400 when it cannot be one)."""
    if chat.client_tools:
        names = ", ".join(tool["function"]["name"] for tool in chat.client_tools[:5])
        raise _bad(
            f"a workflow cannot call the client's tools ({names}): its steps run the team's agents "
            "with their own tools; send the request without 'tools' (or with tool_choice 'none')",
            "tools",
        )
    if "max_tool_calls" in chat.limits:
        raise _bad(
            "'limits.max_tool_calls' does not apply to a workflow (it has no shared tool-call budget; "
            "each step's agent has its own limits)",
            "limits.max_tool_calls",
        )
    index = len(chat.messages) - 1
    last = chat.messages[index]
    if last.get("role") != "user":
        raise _bad(
            f"a workflow's input is the last message, which must be a user message "
            f"(messages[{index}] is '{last.get('role')}')",
            f"messages[{index}].role",
        )
    content = last.get("content")
    if isinstance(content, str):
        return content
    texts: list[str] = []
    for number, part in enumerate(content or ()):
        if part.get("type") != "text":
            where = f"messages[{index}].content[{number}]"
            raise _bad(
                f"a workflow's input is text; '{where}' is a '{str(part.get('type'))[:40]}' part", where
            )
        texts.append(part.get("text", ""))
    return "\n".join(texts)


def _lower(current: float | None, request: float | None) -> float | None:
    if request is None:
        return current
    return request if current is None else min(current, request)


def served_workflow(workflow: WorkflowConfig) -> WorkflowConfig:
    """The workflow with the server's default budget where its ``limits`` set none:
    ``max_steps`` ``SERVED_MAX_STEPS``, and ``max_tokens`` ``SERVED_MAX_TOKENS`` unless it sets
    ``max_tokens`` or ``max_cost_usd`` (the file's own limits, higher or lower, always win)."""
    limits = workflow.limits
    defaulted = dataclasses.replace(
        limits,
        max_steps=SERVED_MAX_STEPS if limits.max_steps is None else limits.max_steps,
        max_tokens=(
            SERVED_MAX_TOKENS
            if limits.max_tokens is None and limits.max_cost_usd is None
            else limits.max_tokens
        ),
    )
    return workflow if defaulted == limits else dataclasses.replace(workflow, limits=defaulted)


def lowered_workflow(workflow: WorkflowConfig, chat: ChatRequest) -> WorkflowConfig:
    """The workflow with its shared budget lowered by the request (never raised): ``max_tokens``
    lowers ``limits.max_tokens`` (every token its steps use), ``limits.timeout_s`` its
    ``timeout_s``, ``limits.max_steps`` its ``max_steps`` (the agent steps it may run)."""
    limits = workflow.limits
    max_tokens = _lower(limits.max_tokens, chat.max_tokens)
    max_steps = _lower(limits.max_steps, chat.limits.get("max_steps"))
    lowered = dataclasses.replace(
        limits,
        max_tokens=None if max_tokens is None else int(max_tokens),
        timeout_s=_lower(limits.timeout_s, chat.limits.get("timeout_s")),
        max_steps=None if max_steps is None else int(max_steps),
    )
    return workflow if lowered == limits else dataclasses.replace(workflow, limits=lowered)


def open_workflow_run(
    holder: CatalogHolder,
    served: ServedWorkflow,
    chat: ChatRequest,
    *,
    on_done: Callable[[str], None] | None = None,
) -> WorkflowRun:
    """The run of ``served`` for ``chat`` (``ApiError`` 400 when the request asks what it cannot do)."""
    text = workflow_input(chat)
    own = served.workflow.output_schema
    if own is not None:
        where = "the workflow's output_schema"
        check_output(OutputSchema(own, where=where), chat.output, owner="workflow")
    return WorkflowRun(
        served,
        holder,
        text=text,
        workflow=lowered_workflow(served_workflow(served.workflow), chat),
        settings=holder.settings,
        output=chat.output if own is None else None,
        answer_tool=chat.answer_tool,
        json_answer=own is not None or chat.output is not None,
        on_done=on_done,
    )


class WorkflowRun(RequestRun):
    """Runs a served workflow once for one request and hands out what the client should see."""

    session_word = "workflow session"

    def __init__(
        self,
        served: ServedWorkflow,
        holder: CatalogHolder,
        *,
        text: str,
        workflow: WorkflowConfig,
        settings: RuntimeSettings,
        output: OutputSchema | None = None,
        answer_tool: str | None = None,
        json_answer: bool = False,
        on_done: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__(served.name, on_done)
        self.served = served
        self.holder = holder
        self.text = text
        self.workflow = workflow
        self.settings = settings
        self.output = output
        """The client's schema, checked against the final output (the workflow has none of its own)."""
        self.answer_tool = answer_tool
        self.json_answer = json_answer
        """The answer must be JSON (an ``output_schema``, a ``response_format``): notes stay out of it."""
        self.target = Target("workflow", served.path, workflow=served.workflow, configs=dict(served.configs))
        self.secrets = self.target.secrets
        self._redact = outward_redactor(self.secrets)
        self._stop = asyncio.Event()

    async def start(self) -> None:
        """Open the workflow's transcript and start the run."""
        record = run_record(self.target, self.settings, self.text, {})
        self.session_id = record.session_id
        self._task = asyncio.create_task(self._main(record), name=f"runner-serve-workflow-{self.name}")

    def cancel(self) -> None:
        """Stop the run unless its answer was delivered (the client went away)."""
        if self._task is not None and not self._task.done() and not self.delivered:
            self._stop.set()

    # ----------------------------------------------------------------- the task

    def _clean(self, text: str) -> str:
        """Text for the client: secrets redacted, URLs (a model's endpoint) hidden."""
        return self._redact(URL.sub("(a URL)", text))

    def _on_event(self, event: dict[str, Any]) -> None:
        """A step's start or end: a line of reasoning (as ``runner run`` prints it on stderr)."""
        if event.get("type") == "step_start":
            self._put(StepRunning(event.get("key", ""), event.get("agent")))
        line = step_line(event, cost=False)
        if line is not None and event.get("type") != "step_reused":
            self._put(ReasoningPiece(self._clean(line) + "\n"))

    async def _main(self, record: WorkflowRecord) -> None:
        try:
            async with self.holder.workflow_agents(self.served) as agents:
                runner = WorkflowRunner(self.target, self.settings, agents=agents)
                engine = runner.engine(
                    self.text, record=record, on_event=self._on_event, workflow=self.workflow
                )
                result = await self._supervise(engine)
        except asyncio.CancelledError:
            self._put(EndPiece("stop", (), Usage(), ApiError(499, "the run was cancelled"), structured=True))
            raise
        except Exception as exc:  # an agent's runtime that cannot open (a tool source down), a bug
            self._put(EndPiece("stop", (), Usage(), self._broken(exc), structured=True))
            return
        finally:
            record.close()  # the engine closes it; not when it had to be cancelled
        await self._finish(result)

    async def _supervise(self, engine: WorkflowEngine) -> WorkflowResult:
        """Run ``engine`` to its end; ``cancel`` (or this task's cancellation) interrupts it."""
        running = asyncio.create_task(engine.run())
        stopping = asyncio.create_task(self._stop.wait())
        try:
            await asyncio.wait({running, stopping}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            await asyncio.shield(self._interrupt(engine, running))
            raise
        finally:
            stopping.cancel()
        if not running.done():
            await asyncio.shield(self._interrupt(engine, running))
        return running.result()

    @staticmethod
    async def _interrupt(engine: WorkflowEngine, running: asyncio.Task[WorkflowResult]) -> None:
        """Interrupt until the run ends (a step that was just starting is interrupted too), then, past
        the grace period, cancel it."""
        deadline = time.monotonic() + INTERRUPT_GRACE_S
        while not running.done() and time.monotonic() < deadline:
            engine.interrupt()
            await asyncio.wait({running}, timeout=0.05)
        if not running.done():
            running.cancel()
            with contextlib.suppress(BaseException):
                await running

    async def _finish(self, result: WorkflowResult) -> None:
        """The answer, or the error, of a run that ended (its status: the run's ``Outcome``)."""
        usage, outcome = result.usage, result.outcome
        notes = [self._clean(note) for note in result.notes]

        def end(reason: Any, calls: tuple[ToolCall, ...] = (), error: ApiError | None = None) -> EndPiece:
            return EndPiece(reason, calls, usage, error, structured=error is not None, outcome=outcome)

        if outcome.status == "interrupted":
            self._put(end("stop", error=ApiError(499, "the run was interrupted")))
            return
        if outcome.status == "error" or (outcome.status == "limit" and result.output is None):
            self._put(end("stop", error=self._failure(result.exit_code, notes, transient=result.transient)))
            return
        value, problem = await self._checked(result.output)
        if problem is not None:
            error = ApiError(502, problem, type="server_error", code="output_invalid", retry=False)
            self._put(end("stop", error=error))
            return
        structured = self.json_answer or not isinstance(value, str | None)
        for note in notes if structured else ():
            self._put(ReasoningPiece(f"note: {note}\n"))
        if self.answer_tool is not None:
            call = ToolCall(f"call_{uuid.uuid4().hex[:24]}", self.answer_tool, answer_text(value))
            self._put(end("tool_calls", (call,)))
            return
        self._put(TextPiece(answer_text(value)))
        for note in notes if not structured else ():
            self._put(TextPiece(f"\n\n> {note}\n\n"))
        self._put(end("stop"))

    def _broken(self, exc: Exception) -> ApiError:
        """A run that raised instead of ending: a 500 saying why (the error of the runner, cleaned)."""
        if isinstance(exc, RunnerError):
            errors = list(exc) if isinstance(exc, ConfigErrors) else [exc]
            why = self._clean("; ".join(str(error) for error in errors[:3]))
            return ApiError(
                500,
                f"workflow {self.name} could not run: {why}",
                type="server_error",
                code="workflow_error",
                retry=False,
            )
        log.exception("workflow %s: the run failed", self.name, exc_info=exc)
        return ApiError(500, f"internal error: {type(exc).__name__}", type="server_error", retry=False)

    def _failure(self, code: int, notes: list[str], *, transient: bool = False) -> ApiError:
        """The error of a run that stopped: at a limit (never worth a retry), or failed (worth one
        only when a step's model failed in a way that may pass: 429, 5xx, network)."""
        why = "; ".join(notes) or "no reason recorded"
        if code == 3:
            hint = self._limit_hint(why)
            return ApiError(
                502,
                f"workflow {self.name} stopped at a limit before it had an output: {why}{hint}",
                type="server_error",
                code="workflow_limit",
                retry=False,
            )
        return ApiError(
            502,
            f"workflow {self.name} failed: {why}",
            type="server_error",
            code="workflow_failed",
            retry=None if transient else False,
        )

    def _limit_hint(self, why: str) -> str:
        """Whose limit stopped the run, when it was not the file's own: the server's default budget
        (``served_workflow``), or the request's lowering of it."""
        own = self.served.workflow.limits
        defaulted = served_workflow(self.served.workflow).limits
        for name in ("max_steps", "max_tokens"):
            used = getattr(self.workflow.limits, name)
            if getattr(own, name) is None and f"limits.{name}" in why and used == getattr(defaulted, name):
                return (
                    f" (the server's default limits.{name} for a served workflow that sets none; "
                    f"set limits.{name} in the workflow to allow more)"
                )
        if self.workflow.limits != defaulted:
            return " (the request's max_tokens or limits lowered the workflow's limits)"
        return ""

    async def _checked(self, value: Any) -> tuple[Any, str | None]:
        """The output checked against the client's schema (``checked_output``); the value and why it
        does not match (None: it does, or there is no schema)."""
        if self.output is None:
            return value, None
        return await checked_output(self.output, value, label=self.output.where, clean=self._clean)
