"""One ``tools/call``: the agent's turn (or the workflow's run) through the chat door's run machinery.

``McpCalls.call`` checks the arguments, opens the conversation a ``session_id`` names (owned by the
caller's key: ``runner.serve.conversations``), starts the run ``open_request_run`` makes (a
``ChatRun`` resumed from the transcript, or a ``WorkflowRun``), reports a progress line for each
model step, tool call and workflow step, and turns the run's end into a ``CallAnswer``:

- ``ok`` / ``stopped``: the answer's text, and ``{response, session_id}`` as structured content;
- a limit, a failed run, bad arguments, an unknown or foreign ``session_id``: ``is_error`` with a
  text that says why (never a protocol error: a model reads it and can correct itself); so is a
  conversation the server cannot record (its owners' log unwritable: the run is stopped);
- the caller's cancellation (``notifications/cancelled``, a closed stream, a vanished client):
  the run is cancelled, its tools are released, and the cancellation goes on up.

An unknown tool is the one protocol error (``UnknownTool``): the server answers it as MCP says.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio

from runner.errors import StorageError
from runner.serve.catalog import ServedAgent, ServedWorkflow
from runner.serve.conversations import ConversationNotFound, Conversations
from runner.serve.dispatch import open_request_run
from runner.serve.engine import (
    Continuation,
    EndPiece,
    ModelStep,
    RequestRun,
    StepRunning,
    TextPiece,
    ToolRunning,
)
from runner.serve.history import parse_conversation
from runner.serve.mcp.tools import Shapes, ToolShape, tool_shape
from runner.serve.protocol import ApiError, ChatRequest
from runner.serve.state import ServeState
from runner.serve.workflow_run import WorkflowRun
from runner.session.outcome import Outcome
from runner.store.transcript import Transcript
from runner.text import one_line

__all__ = ["CallAnswer", "McpCalls", "Progress", "UnknownTool"]

#: Reports one line of progress (the SDK sends it only when the request carried a progress token).
Progress = Callable[[str], Awaitable[None]]

#: The most characters of a ``message`` (the chat door's body limit bounds it there).
MAX_MESSAGE_CHARS = 1_000_000


class UnknownTool(Exception):
    """A ``tools/call`` names no served agent or workflow (a protocol error, -32602)."""


@dataclass(frozen=True)
class CallAnswer:
    """What a call answers: its text, its structured content, whether it is an error."""

    text: str
    structured: dict[str, Any] | None = None
    is_error: bool = False


def _refused(text: str) -> CallAnswer:
    return CallAnswer(text, is_error=True)


class McpCalls:
    """The tools of one server's catalog, and how each call runs."""

    def __init__(self, state: ServeState, conversations: Conversations) -> None:
        self.state = state
        self.conversations = conversations
        self._shapes: Shapes = {}

    def tools(self) -> list[ToolShape]:
        """Every served agent's and workflow's tool, agents first (the catalog's order)."""
        current = self.state.catalog.current
        served: list[ServedAgent | ServedWorkflow] = [*current.agents.values(), *current.workflows.values()]
        return [tool_shape(item, self._shapes) for item in served]

    def shape(self, name: str) -> ToolShape:
        """The tool ``name`` (``UnknownTool`` when nothing is served under that name)."""
        holder = self.state.catalog
        served = holder.get(name) or holder.workflow(name)
        if served is None:
            names = ", ".join(sorted(holder.current.names())[:20]) or "none"
            raise UnknownTool(f"unknown tool '{name[:100]}' (served: {names})")
        return tool_shape(served, self._shapes)

    async def call(
        self, name: str, arguments: dict[str, Any] | None, *, key: str | None, progress: Progress
    ) -> CallAnswer:
        """Run tool ``name`` once for the caller holding ``key`` (None: no keys, or stdio)."""
        shape = self.shape(name)
        checked = _arguments(shape, arguments)
        if isinstance(checked, CallAnswer):
            return checked
        message, session_id = checked
        if session_id is None:
            return await self._run(shape, message, None, key=key, progress=progress)
        try:
            transcript = self.conversations.open(session_id, key)
            if transcript.header.get("agent") not in (None, name):
                raise ConversationNotFound(f"no conversation '{session_id[:80]}'")
        except ConversationNotFound as exc:
            return _refused(f"{exc.message} for {name}: start a new one by leaving session_id out")
        lock = self.conversations.lock(session_id)
        if lock.locked():
            await progress("waiting for this conversation's previous turn to end")
        async with lock:
            transcript = self.conversations.open(session_id, key)  # what the turn before wrote
            return await self._run(shape, message, transcript, key=key, progress=progress)

    async def _run(
        self,
        shape: ToolShape,
        message: str,
        resume: Transcript | None,
        *,
        key: str | None,
        progress: Progress,
    ) -> CallAnswer:
        chat = ChatRequest(model=shape.name, messages=[{"role": "user", "content": message}])
        state = self.state
        try:
            run = open_request_run(
                state.catalog,
                chat,
                parse_conversation(chat.messages),
                report=state.report,
                tool_details=False,
                continuation=None if resume is None else Continuation(resume.session_id, resume),
            )
            await run.start()
        except ApiError as exc:
            return _refused(f"{shape.name} could not start: {exc.message}")
        state.track(run)
        async with _finished(run):
            if run.session_id is not None and resume is None and shape.continues:
                try:  # one line appended to the owners' log: microseconds, less than a thread hop
                    self.conversations.claim(run.session_id, key, door="mcp")
                except StorageError as exc:  # the run stops (``_finished``); the server's log says why
                    state.report(f"mcp: {shape.name}: {exc.message}")
                    return _refused(f"{shape.name} could not start: the server cannot record conversations")
            return await self._collect(shape, run, progress)

    async def _collect(self, shape: ToolShape, run: RequestRun, progress: Progress) -> CallAnswer:
        texts: list[str] = []
        async for piece in run.pieces():
            if isinstance(piece, TextPiece):
                texts.append(piece.text)
            elif isinstance(piece, ToolRunning):
                await progress(f"tool {piece.name}")
            elif isinstance(piece, ModelStep):
                await progress(f"step {piece.step} of turn {piece.turn}")
            elif isinstance(piece, StepRunning):
                await progress(f"workflow step {piece.key}" + (f" ({piece.agent})" if piece.agent else ""))
            elif isinstance(piece, EndPiece):
                return _answer(shape, run, "".join(texts), piece)
        return _refused(f"{shape.name} ended without an answer")  # pragma: no cover - an EndPiece always ends


@contextlib.asynccontextmanager
async def _finished(run: RequestRun) -> AsyncIterator[None]:
    """Stop ``run`` when the caller goes away before its answer, and wait until its tools are released."""
    try:
        yield
    finally:
        if not run.delivered:
            run.cancel()
            with anyio.CancelScope(shield=True):
                await run.wait_closed()


def _arguments(shape: ToolShape, arguments: dict[str, Any] | None) -> tuple[str, str | None] | CallAnswer:
    """The message and session id of a call, or the error result naming the argument that is wrong."""
    given = arguments or {}
    allowed = set(shape.input_schema["properties"])
    extra = sorted(set(given) - allowed)
    if extra:
        what = ", ".join(repr(one_line(str(k), 40)) for k in extra[:5])
        return _refused(f"{shape.name} takes only {', '.join(sorted(allowed))}; not {what}")
    message = given.get("message")
    if not isinstance(message, str):
        kind = "missing" if message is None else f"a {_json_type(message)}"
        return _refused(f"arguments.message must be a string (the question for {shape.name}); it is {kind}")
    if len(message) > MAX_MESSAGE_CHARS:
        return _refused(f"arguments.message is longer than {MAX_MESSAGE_CHARS} characters")
    session_id = given.get("session_id")
    if session_id is not None and not isinstance(session_id, str):
        return _refused(
            f"arguments.session_id must be a string (a session_id {shape.name} gave); "
            f"it is a {_json_type(session_id)}"
        )
    return message, session_id or None


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    names: dict[type, str] = {dict: "object", list: "array", str: "string"}
    return names.get(type(value), type(value).__name__)


def _answer(shape: ToolShape, run: RequestRun, text: str, end: EndPiece) -> CallAnswer:
    """The result of a run that ended: its answer, or an error result saying why."""
    outcome = end.outcome
    session_id = run.session_id or (outcome.session_id if outcome is not None else None) or ""
    later = f" (session_id {session_id})" if session_id and shape.continues else ""
    if end.error is not None:
        return _refused(f"{shape.name} failed: {end.error.message}{later}")
    if outcome is not None and outcome.status in ("limit", "error", "interrupted"):
        why = one_line(outcome.why() or outcome.status, 500, words=True)
        partial = f"\n\n{text.strip()}" if text.strip() else ""
        return _refused(f"{shape.name} stopped ({outcome.status}): {why}{later}{partial}")
    response = _response(shape, text, outcome, workflow=isinstance(run, WorkflowRun))
    return CallAnswer(text, {"response": response, "session_id": session_id})


def _response(shape: ToolShape, text: str, outcome: Outcome | None, *, workflow: bool) -> Any:
    """The ``response`` of the structured content: the text, or the structured answer's data."""
    if not shape.structured:
        return text
    if outcome is not None and outcome.data is not None and not workflow:
        return outcome.data
    try:
        return json.loads(text)
    except ValueError:
        return text
