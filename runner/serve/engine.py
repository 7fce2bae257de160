"""One request's run: the agent's session in a task of its own, its events as output pieces.

The session is opened, driven and closed inside one task (``open_session`` must exit in the task
that entered it); what the client sees arrives as ``Piece`` values on a queue. A consumer that
stops early (the client went away) calls ``cancel``: the task is cancelled, the turn ends with
every started call answered, and the session's exit stack closes what it opened (MCP sessions,
subprocesses, HTTP clients). Shared by the HTTP server and the Open WebUI pipe.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal

from runner.agentfile.config import AgentConfig
from runner.errors import ModelError, RunnerError
from runner.loop.events import (
    AssistantMessage,
    LoopEvent,
    Note,
    ReasoningChunk,
    TextChunk,
    ToolFinished,
    ToolStarted,
    UsageUpdate,
)
from runner.loop.runtime import SessionConfig, open_session
from runner.loop.session import RunOptions, Session
from runner.models.base import Model, ToolCall, Usage
from runner.serve.details import ToolBlock
from runner.serve.history import Conversation
from runner.serve.models import ModelPool
from runner.serve.protocol import ApiError

__all__ = ["ChatRun", "EndPiece", "Piece", "ReasoningPiece", "TextPiece", "ToolBlock", "ToolRunning"]

log = logging.getLogger("runner.serve")


@dataclass(frozen=True, slots=True)
class TextPiece:
    """Text for the message content."""

    text: str


@dataclass(frozen=True, slots=True)
class ReasoningPiece:
    """The model's reasoning (``delta.reasoning_content``), never part of the content."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolRunning:
    """One of the agent's tools started (the pipe shows it as a status line)."""

    call_id: str
    name: str


@dataclass(frozen=True, slots=True)
class EndPiece:
    """The last piece: why the answer ends, the client's calls to run, the usage, or the error."""

    finish_reason: Literal["stop", "tool_calls"]
    client_calls: tuple[ToolCall, ...] = ()
    usage: Usage = field(default_factory=Usage)
    error: ApiError | None = None


Piece = TextPiece | ReasoningPiece | ToolRunning | ToolBlock | EndPiece


def _api_error(exc: BaseException) -> ApiError:
    """An error of the run as the API reports it: the model's failures are 502, the rest 500."""
    if isinstance(exc, ModelError):
        return ApiError(502, f"the model failed: {exc.message}", type="server_error", code="model_error")
    if isinstance(exc, RunnerError):
        return ApiError(500, str(exc), type="server_error", code="agent_error")
    return ApiError(500, f"internal error: {type(exc).__name__}: {exc}", type="server_error")


def _system_prompt(session: Session, first_input: str) -> dict[str, Any] | None:
    """The system message as the conversation's first request had it (rendered with its first input).

    Every request of a conversation thus sends the same system prompt, byte for byte, as a
    session that lived through all of them would (SPEC section 14, prefix stability).
    """
    session.first_input = first_input
    system = session.renderer.system(first_input)
    if session.instructions:
        text = "\n\n".join(([system["content"]] if system else []) + session.instructions)
        system = {"role": "system", "content": text}
    return system


class ChatRun:
    """Runs one conversation turn of an agent and hands out what the client should see."""

    def __init__(
        self,
        spec: AgentConfig,
        conversation: Conversation,
        *,
        options: RunOptions,
        config: SessionConfig,
        model: Model | None = None,
        models: ModelPool | None = None,
    ) -> None:
        self.spec = spec
        self.models = models
        self.conversation = conversation
        self.options = options
        self.config = config
        self.model = model
        self.session_id: str | None = None
        self.delivered = False
        """Whether the consumer has taken the ``EndPiece``."""
        self._queue: asyncio.Queue[Piece] = asyncio.Queue()
        self._opened = asyncio.Event()
        self._ended = False
        self._task: asyncio.Task[None] | None = None
        self._arguments: dict[str, str] = {}
        self._usage = Usage()

    @property
    def task(self) -> asyncio.Task[None] | None:
        """The task that owns the session (None before ``start``)."""
        return self._task

    async def start(self) -> None:
        """Open the session; raise ``ApiError`` when it cannot be opened (a tool source down, ...)."""
        task = self._task = asyncio.create_task(self._main(), name=f"runner-serve-{self.spec.name}")
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
            raise error if isinstance(error, ApiError) else _api_error(error)

    async def pieces(self) -> AsyncIterator[Piece]:
        """What the client should see, in order; the last one is an ``EndPiece``."""
        while True:
            piece = await self._queue.get()
            if isinstance(piece, EndPiece):
                self.delivered = True
                yield piece
                return
            yield piece

    def cancel(self) -> None:
        """Stop the run unless its answer was delivered (the client went away)."""
        if self._task is not None and not self._task.done() and not self.delivered:
            self._task.cancel()

    async def wait_closed(self, timeout_s: float = 10.0) -> bool:
        """Wait until the session is closed (its tools released); False on timeout."""
        if self._task is None:
            return True
        done, _ = await asyncio.wait({self._task}, timeout=timeout_s)
        return bool(done)

    # ----------------------------------------------------------------- the task

    def _put(self, piece: Piece) -> None:
        if self._ended:
            return
        if isinstance(piece, EndPiece):
            self._ended = True
        self._queue.put_nowait(piece)

    def _sink(self, event: LoopEvent) -> None:
        if isinstance(event, TextChunk):
            self._put(TextPiece(event.text))
        elif isinstance(event, ReasoningChunk):
            self._put(ReasoningPiece(event.text))
        elif isinstance(event, AssistantMessage):
            for call in event.message.get("tool_calls") or ():
                self._arguments[call["id"]] = call["function"]["arguments"]
        elif isinstance(event, ToolStarted):
            self._put(ToolRunning(event.call_id, event.name))
        elif isinstance(event, ToolFinished):
            result = event.result
            if result.arguments is not None:
                arguments = json.dumps(result.arguments)
            else:
                arguments = self._arguments.get(result.call_id) or "{}"
            self._put(ToolBlock(result.call_id, result.name, arguments, result.content))
        elif isinstance(event, UsageUpdate):
            self._usage = event.session
        elif isinstance(event, Note) and event.level in ("warning", "error"):
            self._put(TextPiece(f"\n\n> {event.text}\n\n"))

    async def _main(self) -> None:
        try:
            model = self.model
            if model is None and self.models is not None:
                model = self.models.get(self.spec)
            async with open_session(
                self.spec, sink=self._sink, options=self.options, config=self.config, model=model
            ) as session:
                self.session_id = session.session_id
                history = self.conversation.history(session.renderer.user)
                system = _system_prompt(session, self.conversation.first_input) if history else None
                if session.transcript is not None:  # the transcript holds the whole conversation
                    if system is not None:
                        session.transcript.prompt(system)
                    for message in history:
                        name = self.conversation.names.get(message.get("tool_call_id", ""))
                        session.transcript.message(message, **({"name": name} if name else {}))
                session.restore(history, system=system)
                self._opened.set()
                result = await session.run_turn(self.conversation.text)
                if result.reason == "client_tools":
                    self._put(EndPiece("tool_calls", tuple(result.client_calls), self._usage))
                else:
                    self._put(EndPiece("stop", (), self._usage))
        except asyncio.CancelledError:
            self._put(EndPiece("stop", (), self._usage, ApiError(499, "the run was cancelled")))
            raise
        except Exception as exc:
            if not self._opened.is_set():
                raise
            if not isinstance(exc, RunnerError):
                log.exception("agent %s: the run failed", self.spec.name)
            error = _api_error(exc)
            self._put(TextPiece(f"\n\n**Error:** {error.message}\n"))
            self._put(EndPiece("stop", (), self._usage, error))
