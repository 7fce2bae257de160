"""One request's run: a session on the agent's shared runtime, in a task of its own, as output pieces.

The request's messages are restored into a new ``Session`` on the runtime its ``RuntimeHost`` has
now (kept to the end of the request, even if a reload lands meanwhile), which then runs the new
input with ``Session.run`` like every front door: turns that hooks queue run too. What the client
sees arrives as ``Piece`` values on a queue. A consumer that stops early (the client went away)
calls ``cancel``: the task is cancelled, the turn ends with every started call answered, and the
session lets go of its runtime. Tool sources stay open with the runtime, for the next request.
Shared by the HTTP server and the Open WebUI pipe.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from runner.agentfile.output_schema import OutputSchema
from runner.errors import ModelError, OutputError, RunnerError
from runner.models.base import ReasoningDelta, TextDelta, ToolCall, Usage
from runner.runtime.host import RuntimeHost
from runner.serve.details import ToolBlock
from runner.serve.history import ChatHistory
from runner.serve.outward import outward_redactor
from runner.serve.protocol import CLIENT_SCHEMA, ApiError, ChatRequest, model_params, request_limits
from runner.session import RunOptions, Session
from runner.session.events import (
    AssistantMessage,
    LoopEvent,
    Note,
    OutputReady,
    ReasoningChunk,
    StepStarted,
    TextChunk,
    ToolFinished,
    ToolStarted,
    TurnEnded,
    UsageUpdate,
)
from runner.session.gate import ConfirmFn
from runner.session.outcome import Outcome
from runner.store.transcript import Transcript
from runner.text import one_line
from runner.tools.schema import clean_schema

__all__ = [
    "ChatRun",
    "Continuation",
    "EndPiece",
    "ModelStep",
    "Piece",
    "ReasoningPiece",
    "RequestRun",
    "StepRunning",
    "TextPiece",
    "ToolBlock",
    "ToolRunning",
    "api_error",
    "check_output",
]

log = logging.getLogger("runner.serve")


#: Text for the message content (the one text-delta vocabulary: ``models.base.TextDelta``).
TextPiece = TextDelta


#: The model's reasoning (``delta.reasoning_content``), never part of the content.
ReasoningPiece = ReasoningDelta


@dataclass(frozen=True, slots=True)
class ToolRunning:
    """One of the agent's tools started (the pipe shows it as a status line)."""

    call_id: str
    name: str


@dataclass(frozen=True, slots=True)
class StepRunning:
    """A workflow's step started (the pipe shows it as a status line)."""

    key: str
    agent: str | None


@dataclass(frozen=True, slots=True)
class ModelStep:
    """The agent asks its model again (a step of a turn): the MCP door's progress; others ignore it."""

    turn: int
    step: int


@dataclass(frozen=True, slots=True)
class EndPiece:
    """The last piece: why the answer ends, the client's calls to run, the usage, or the error."""

    finish_reason: Literal["stop", "tool_calls"]
    client_calls: tuple[ToolCall, ...] = ()
    usage: Usage = field(default_factory=Usage)
    error: ApiError | None = None
    #: The answer had to be JSON: a stream ends with the error as an error event (OpenAI's
    #: ``data: {"error": ...}``, which the openai SDK raises), not as a note in the content.
    structured: bool = False
    #: How the run ended (``runner.session.outcome``): the response's ``runner`` field says it.
    outcome: Outcome | None = None

    def runner_field(self) -> dict[str, Any] | None:
        """What a response tells the client of the run's end, beside OpenAI's fields: the status
        and exit code every door gives, the reason, the session id (never an error's words: those
        are the error's, cleaned)."""
        outcome = self.outcome
        if outcome is None:
            return None
        return {
            "status": outcome.status,
            "reason": outcome.reason,
            "exit_code": outcome.exit_code(),
            "session_id": outcome.session_id,
        }


Piece = TextPiece | ReasoningPiece | ToolRunning | StepRunning | ModelStep | ToolBlock | EndPiece


@dataclass(frozen=True)
class Continuation:
    """A door that keeps its conversations server-side (A2A's ``contextId``): the session to run the
    request in, resumed from its transcript or new under ``session_id``; who answers a confirmation
    (``confirm``; None: nobody, the call is refused); ``plain``: notes and errors stay out of the
    answer's text (the door reports them its own way)."""

    session_id: str
    resume: Transcript | None = None
    confirm: ConfirmFn | None = None
    plain: bool = False


class RequestRun:
    """One request's run as the server drives it (an agent's ``ChatRun`` or a ``WorkflowRun``): a
    task that puts ``Piece`` values on a queue, ending with an ``EndPiece``, and one access-log line."""

    #: How the access line names the run's transcript.
    session_word = "session"

    def __init__(self, name: str, on_done: Callable[[str], None] | None) -> None:
        self.name = name
        self.on_done = on_done
        """Called with one access-log line when the run has ended (its name, status, time, tokens)."""
        self.session_id: str | None = None
        self.delivered = False
        """Whether the consumer has taken the ``EndPiece``."""
        self._queue: asyncio.Queue[Piece] = asyncio.Queue()
        self._ended = False
        self._task: asyncio.Task[None] | None = None
        self._started = time.monotonic()

    @property
    def task(self) -> asyncio.Task[None] | None:
        """The task that runs the request (None before ``start``)."""
        return self._task

    async def start(self) -> None:
        """Start the run (raise ``ApiError`` when it cannot start)."""
        raise NotImplementedError

    def cancel(self) -> None:
        """Stop the run unless its answer was delivered (the client went away)."""
        raise NotImplementedError

    async def pieces(self) -> AsyncIterator[Piece]:
        """What the client should see, in order; the last one is an ``EndPiece``."""
        while True:
            piece = await self._queue.get()
            if isinstance(piece, EndPiece):
                self.delivered = True
                yield piece
                return
            yield piece

    async def wait_closed(self, timeout_s: float = 10.0) -> bool:
        """Wait until the run has ended (its sessions closed, their tools released); False on timeout."""
        if self._task is None:
            return True
        done, _ = await asyncio.wait({self._task}, timeout=timeout_s)
        return bool(done)

    def _put(self, piece: Piece) -> None:
        if self._ended:
            return
        if isinstance(piece, EndPiece):
            self._ended = True
            self._log(piece)
        self._queue.put_nowait(piece)

    def _notice(self, text: str) -> None:
        """What the model layer said while the run waited on it (a retry, its wait): a line of the
        server's log and of the reasoning, never of the content."""
        if self.on_done is not None:
            self.on_done(f"notice: {self.name}: {text}")
        self._put(ReasoningPiece(f"> {text}\n"))

    def _log(self, end: EndPiece) -> None:
        if self.on_done is None:
            return
        status = end.error.status if end.error is not None else 200
        usage = end.usage
        line = (
            f"request: {self.name} {status} {time.monotonic() - self._started:.2f} s "
            f"{usage.prompt_tokens}+{usage.completion_tokens} tokens"
            + (
                f" {end.finish_reason}"
                if end.error is None
                else f" ({one_line(end.error.message, 120, words=True)})"
            )
            + (f" {self.session_word} {self.session_id}" if self.session_id else "")
        )
        self.on_done(line)


URL = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s'\"<>)]+", re.IGNORECASE)


def api_error(exc: BaseException, redact: Callable[[str], str] = str) -> ApiError:
    """An error of the run as the API reports it: the model's failures are 502, the rest 500.

    A client learns that the model failed and why, never where the agent's model is: URLs in a
    model's error are replaced, and the agent's secrets are redacted. Only a model failure that may
    pass later (429, 5xx, network, timeout) invites a retry; the rest say ``x-should-retry: false``.
    """
    if isinstance(exc, ModelError):
        message = redact(URL.sub("(the agent's model endpoint)", exc.message))
        retry = None if exc.transient else False
        return ApiError(
            502, f"the model failed: {message}", type="server_error", code="model_error", retry=retry
        )
    if isinstance(exc, OutputError):  # the model never gave a valid answer (after its retries)
        return ApiError(502, redact(exc.message), type="server_error", code="output_invalid", retry=False)
    if isinstance(exc, RunnerError):
        return ApiError(500, redact(str(exc)), type="server_error", code="agent_error", retry=False)
    error = redact(f"internal error: {type(exc).__name__}: {exc}")
    return ApiError(500, error, type="server_error", retry=False)


def _shape(node: Any) -> Any:
    """A schema without what does not change the shape of the data (titles, descriptions, strictness)."""
    if isinstance(node, list):
        return [_shape(item) for item in node]
    if not isinstance(node, dict):
        return node
    dropped = ("title", "description", "additionalProperties", "required", "default", "examples", "strict")
    return {key: _shape(value) for key, value in node.items() if key not in dropped}


def check_output(agent: OutputSchema | None, client: OutputSchema | None, *, owner: str = "agent") -> None:
    """Refuse a client's ``response_format`` that asks for another shape than the agent's ``output:``
    (or a workflow's ``output_schema``: ``owner``); ``json_object`` asks only for an object; the same
    schema, strict or not, is no conflict."""
    if agent is None or client is None:
        return
    if client.name == "json_object" and client.schema == {"type": "object"}:
        if agent.schema.get("type") in ("object", None):
            return
    elif _shape(clean_schema(client.schema)) == _shape(clean_schema(agent.schema)):
        return
    by_tool = client.where != CLIENT_SCHEMA  # a forced tool_choice: its parameters are the shape
    raise ApiError(
        400,
        f"the shape {client.where} asks for conflicts with this {owner}'s own output schema; send "
        f"none (the {owner} answers with its own JSON) or the same schema",
        param="tool_choice" if by_tool else "response_format",
        code="response_format_conflict",
    )


class ChatRun(RequestRun):
    """Runs one conversation turn of an agent and hands out what the client should see."""

    def __init__(
        self,
        host: RuntimeHost,
        chat: ChatHistory,
        *,
        options: RunOptions,
        on_done: Callable[[str], None] | None = None,
        tool_details: bool = True,
        answer_tool: str | None = None,
        continuation: Continuation | None = None,
    ) -> None:
        super().__init__(host.config.name, on_done)
        self.continuation = continuation
        self.host = host
        self.answer_tool = answer_tool
        """The client tool the answer is a call of (a forced ``tool_choice``); None: the content."""
        self.tool_details = tool_details
        """Whether tool calls show in the answer (``<details>`` blocks); False: the text only."""
        self.chat = chat
        self.options = options
        self._opened = asyncio.Event()
        self._arguments: dict[str, str] = {}
        self._usage = Usage()
        self._outcome: Outcome | None = None
        self._said = False  # some text of an earlier turn went out (the next turn's text is set apart)
        self._turn_over = False
        self._structured = False  # the answer is JSON (output:, response_format): nothing else in the content
        self._answer: str | None = None  # the last structured answer (a turn a hook queued replaces it)

    @classmethod
    def for_request(
        cls,
        host: RuntimeHost,
        history: ChatHistory,
        chat: ChatRequest,
        *,
        on_done: Callable[[str], None] | None = None,
        tool_details: bool = True,
        continuation: Continuation | None = None,
    ) -> ChatRun:
        """The run of ``chat`` on the agent of ``host``: the request's parameters and limits (which
        only lower the agent's), its client tools and answer schema; ``tool_details`` False (the
        server's ``--plain``) or the agent's own ``serve:`` setting hides tool calls;
        ``continuation``: the server-side conversation it continues."""
        config = host.config
        options = RunOptions(
            params=model_params(config, chat),
            client_tools=list(chat.client_tools),
            limits=request_limits(chat),
            output=chat.output,
            confirm=continuation.confirm if continuation is not None else None,
        )
        return cls(
            host,
            history,
            options=options,
            on_done=on_done,
            tool_details=tool_details and config.tool_details,
            answer_tool=chat.answer_tool,
            continuation=continuation,
        )

    async def start(self) -> None:
        """Open the session; raise ``ApiError`` when it cannot be opened (a tool source down, ...)."""
        task = self._task = asyncio.create_task(self._main(), name=f"runner-serve-{self.name}")
        opened = asyncio.create_task(self._opened.wait())
        try:
            await asyncio.wait({task, opened}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            task.cancel()
            raise
        finally:
            opened.cancel()
        if not self._opened.is_set():
            error = task.exception() if not task.cancelled() else asyncio.CancelledError()
            assert error is not None
            if not isinstance(error, ApiError):
                error = api_error(error, outward_redactor(self.host.config.secrets))
            raise error

    def cancel(self) -> None:
        """Stop the run unless its answer was delivered (the client went away)."""
        if self._task is not None and not self._task.done() and not self.delivered:
            self._task.cancel()

    # ----------------------------------------------------------------- the task

    def _sink(self, event: LoopEvent) -> None:
        if isinstance(event, OutputReady):
            self._answer = event.text  # sent when the run is over: only one answer is the content
        elif isinstance(event, TextChunk):
            if self._turn_over and self._said:
                self._put(TextPiece("\n\n"))  # a turn a hook queued: its answer follows the first
            self._turn_over = False
            self._said = self._said or bool(event.text)
            self._put(TextPiece(event.text))
        elif isinstance(event, TurnEnded):
            self._turn_over = True
        elif isinstance(event, ReasoningChunk):
            self._put(ReasoningPiece(event.text))
        elif isinstance(event, AssistantMessage):
            for call in event.message.get("tool_calls") or ():
                self._arguments[call["id"]] = call["function"]["arguments"]
        elif isinstance(event, ToolStarted):
            self._put(ToolRunning(event.call_id, event.name))
        elif isinstance(event, StepStarted):
            self._put(ModelStep(event.turn, event.step))
        elif isinstance(event, ToolFinished) and self.tool_details and not self._structured:
            result = event.result
            if result.arguments is not None:
                arguments = json.dumps(result.arguments)
            else:
                arguments = self._arguments.get(result.call_id) or "{}"
            self._put(ToolBlock(result.call_id, result.name, arguments, result.content))
        elif isinstance(event, UsageUpdate):
            self._usage = event.session
        elif isinstance(event, Note) and event.source == "model":
            self._notice(event.text)  # a retry and its wait: never in the content
        elif isinstance(event, Note) and event.level in ("warning", "error") and not self._plain:
            self._put(TextPiece(f"\n\n> {event.text}\n\n"))

    @property
    def _plain(self) -> bool:
        """Notes and errors stay out of the answer's text (a JSON answer; a door that says them apart)."""
        return self._structured or (self.continuation is not None and self.continuation.plain)

    async def _main(self) -> None:
        more = self.continuation
        resumed = {"session_id": more.session_id, "resume": more.resume} if more is not None else {}
        try:
            session = await Session.open(
                self.host, follow=False, sink=self._sink, options=self.options, **resumed
            )
        except BaseException as exc:
            if isinstance(exc, RunnerError) and not isinstance(exc, ApiError):
                raise api_error(exc, outward_redactor(self.host.config.secrets)) from None
            raise
        try:
            self.session_id = session.session_id
            check_output(session.runtime.output, self.options.output)
            self._structured = session.output_plan is not None
            chat = self.chat
            if more is None or more.resume is None:  # a resumed session has its history already
                prompts, variables = session.runtime.prompts, session.variables
                parts = chat.parts(
                    lambda text: prompts.user(text, variables),
                    key=session.runtime.provenance.config_sha256 or None,
                )
                # The transcript holds the whole conversation; the system prompt is the session's
                # own, composed from the conversation's first input as one long session would have.
                session.conversation.restore_parts(
                    parts, first_input=chat.first_input, copy=not session.runtime.shares_messages
                )
            self._opened.set()
            inputs = [chat.text] if chat.text is not None else []
            result = await session.run(inputs, continue_waiting=not inputs)
            self._outcome = result.outcome
            if result.reason == "client_tools":
                self._put(self._end("tool_calls", tuple(result.client_calls)))
            elif self._structured:
                self._put_answer(result.reason)
            else:
                self._put(self._end("stop"))
        except asyncio.CancelledError:
            self._outcome = Outcome("interrupted", "interrupted", session_id=self.session_id)
            self._put(self._end("stop", error=ApiError(499, "the run was cancelled")))
            raise
        except Exception as exc:
            if not self._opened.is_set():
                raise
            if not isinstance(exc, RunnerError):
                log.exception("agent %s: the run failed", self.name)
            error = api_error(exc, outward_redactor(self.host.config.secrets))
            self._outcome = Outcome.of_error(exc, session_id=self.session_id, usage=self._usage)
            if not self._plain:
                self._put(TextPiece(f"\n\n**Error:** {error.message}\n"))
            self._put(self._end("stop", error=error, structured=self._structured))
        finally:
            await asyncio.shield(session.close())

    def _end(
        self,
        finish_reason: Literal["stop", "tool_calls"],
        calls: tuple[ToolCall, ...] = (),
        *,
        error: ApiError | None = None,
        structured: bool = False,
    ) -> EndPiece:
        return EndPiece(
            finish_reason, calls, self._usage, error, structured=structured, outcome=self._outcome
        )

    def _put_answer(self, reason: str) -> None:
        """The end of a structured run: its JSON answer (the content, or the call of ``answer_tool``),
        or an error when the run stopped before an answer matched (a limit, a hook)."""
        if self._answer is None:
            error = ApiError(
                502,
                f"the agent stopped ({reason}) before giving an answer that matches the requested schema",
                type="server_error",
                code="output_missing",
                retry=False,
            )
            self._put(self._end("stop", error=error, structured=True))
        elif self.answer_tool is not None:
            call = ToolCall(f"call_{uuid.uuid4().hex[:24]}", self.answer_tool, self._answer)
            self._put(self._end("tool_calls", (call,)))
        else:
            self._put(TextPiece(self._answer))
            self._put(self._end("stop"))
