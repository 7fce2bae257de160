"""The SDK's ``AgentExecutor`` for one served agent or workflow: a task is one request run.

``execute`` opens the run the chat door would (``dispatch.open_request_run``: the agent's turn in
the conversation's session, or the workflow once) and turns its pieces into task events:

- the task goes ``working``; each tool the agent starts (a workflow's step) is a ``working`` status
  whose message names it; the answer's text streams as chunks of one artifact (``answer``); a
  structured answer (``output:``) is one data part instead;
- the run's end is the task's state: done → ``completed``, a limit → ``failed`` naming the limit,
  interrupted → ``canceled``, an error (the model failing) → ``failed`` with the error's message;
- a tool that asks for confirmation (``confirm: true``) makes the task ``input-required`` with the
  question; the next message of that task answers it ("yes", "always", anything else is no) and
  the same run goes on. An unanswered question is refused after the conversation idle time.

``contextId`` is the conversation (``runner.serve.conversations``): the request context builder
(``serving.py``) mints a session id for a new one and refuses one the key does not own; here a new
one is claimed by its key (the task fails, running nothing, if its owner record cannot be
written), and a known one is resumed from its transcript, one turn at a time.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import a2a_pb2 as pb
from google.protobuf import struct_pb2

from runner.errors import RunnerError
from runner.serve.conversations import ConversationNotFound, Conversations
from runner.serve.dispatch import open_request_run
from runner.serve.engine import (
    Continuation,
    EndPiece,
    RequestRun,
    StepRunning,
    TextPiece,
    ToolRunning,
)
from runner.serve.history import ChatHistory
from runner.serve.protocol import ApiError, ChatRequest
from runner.serve.reload import CatalogHolder
from runner.session.outcome import Outcome
from runner.tools.a2a import whole_numbers

__all__ = ["RunnerExecutor", "message_text"]

#: The answer's text goes out at most this often (what arrives meanwhile joins one chunk).
CHUNK_INTERVAL_S = 0.02

#: How long a question (``input-required``) waits for its answer without an idle limit.
DEFAULT_ASK_WAIT_S = 3600.0


def message_text(message: pb.Message) -> str:
    """The input a message carries: its text parts, and its data parts as JSON, joined by lines."""
    from a2a.utils.errors import ContentTypeNotSupportedError, InvalidParamsError

    texts: list[str] = []
    for number, part in enumerate(message.parts):
        kind = part.WhichOneof("content")
        if kind == "text":
            texts.append(part.text)
        elif kind == "data":
            from google.protobuf.json_format import MessageToDict

            texts.append(json.dumps(whole_numbers(MessageToDict(part.data)), ensure_ascii=False))
        else:
            media = f" ({part.media_type[:60]})" if part.media_type else ""
            raise ContentTypeNotSupportedError(
                message=f"message part {number} is a file{media}: this agent takes text and data parts only"
            )
    text = "\n".join(texts)
    if not text.strip():
        raise InvalidParamsError(message="the message has no text: send a text or data part")
    return text


def _status(updater: TaskUpdater, text: str) -> pb.Message:
    return updater.new_agent_message([pb.Part(text=text)])


@dataclass
class _Job:
    """One task's run, alive across the messages that answer its questions."""

    task_id: str = ""
    run: RequestRun | None = None
    updater: TaskUpdater | None = None
    answer: asyncio.Future[str] | None = None
    paused: asyncio.Event = field(default_factory=asyncio.Event)  # a question is out, or the run ended
    ended: bool = False
    lock: asyncio.Lock | None = None  # the conversation's, held until the run ends

    def unlock(self) -> None:
        if self.lock is not None and self.lock.locked():
            self.lock.release()
        self.lock = None


class RunnerExecutor(AgentExecutor):
    """Runs the served agent or workflow ``name`` for each task (module docstring)."""

    def __init__(
        self,
        holder: CatalogHolder,
        name: str,
        conversations: Conversations,
        *,
        report: Callable[[str], None],
        track: Callable[[RequestRun], None],
        tool_details: bool = True,
    ) -> None:
        self.holder = holder
        self.name = name
        self.conversations = conversations
        self.report = report
        self.track = track
        self.tool_details = tool_details
        self._jobs: dict[str, _Job] = {}

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id is not None and context.context_id is not None and context.message is not None
        text = message_text(context.message)
        job = self._jobs.get(context.task_id)
        if job is not None and job.answer is not None and not job.answer.done():
            job.paused.clear()
            job.updater = TaskUpdater(event_queue, context.task_id, context.context_id)
            await job.updater.start_work()
            job.answer.set_result(text)
            await job.paused.wait()
            if job.ended:
                self._jobs.pop(context.task_id, None)
            return
        job = self._jobs[context.task_id] = _Job(task_id=context.task_id)
        job.updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        if context.current_task is None:
            await event_queue.enqueue_event(
                pb.Task(
                    id=context.task_id,
                    context_id=context.context_id,
                    status=pb.TaskStatus(state=pb.TaskState.TASK_STATE_SUBMITTED),
                    history=[context.message],
                )
            )
        key = context.call_context.state.get("runner_key")
        lock = self.conversations.lock(context.context_id)
        await lock.acquire()
        job.lock = lock
        try:
            fresh = context.call_context.state.get("runner_minted") == context.context_id
            await self._turn(job, text, context.context_id, key, fresh=fresh)
        finally:
            if job.ended:
                job.unlock()
                self._jobs.pop(context.task_id, None)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        job = self._jobs.get(context.task_id or "")
        if job is None or job.run is None:
            return
        if job.answer is not None and not job.answer.done():
            job.answer.cancel()
        job.run.cancel()
        await job.run.wait_closed()

    # ----------------------------------------------------------------- one turn

    async def _turn(self, job: _Job, text: str, context_id: str, key: str | None, *, fresh: bool) -> None:
        assert job.updater is not None
        await job.updater.start_work()
        try:
            continuation = self._continuation(job, context_id, key, fresh=fresh)
        except RunnerError as exc:  # the owner record cannot be written: nothing runs
            job.ended = True
            await job.updater.failed(_status(job.updater, f"cannot keep this conversation: {exc.message}"))
            return
        chat = ChatRequest(model=self.name, messages=[{"role": "user", "content": text}])
        history = ChatHistory(text=text, first_input=text)
        try:
            run = open_request_run(
                self.holder,
                chat,
                history,
                report=self.report,
                tool_details=self.tool_details,
                continuation=continuation,
            )
            await run.start()
        except ApiError as exc:
            job.ended = True
            await job.updater.failed(_status(job.updater, exc.message))
            return
        job.run = run
        self.track(run)
        pump = asyncio.create_task(self._pump(job, run))
        try:
            await job.paused.wait()
        except asyncio.CancelledError:
            run.cancel()
            await asyncio.shield(run.wait_closed())
            pump.cancel()
            raise
        if job.ended:
            await pump

    def _continuation(self, job: _Job, context_id: str, key: str | None, *, fresh: bool) -> Continuation:
        """How the turn continues ``context_id``: a new one (``fresh``: minted for this message, or
        not known yet) is claimed by ``key``; a known one is resumed from its transcript."""
        resume = None
        if not fresh and self.conversations.owns(context_id, key):
            try:
                resume = self.conversations.open(context_id, key)
            except ConversationNotFound:
                resume = None  # claimed, but its first turn wrote nothing: it starts again
        else:
            self.conversations.claim(context_id, key, door="a2a")
        is_agent = self.holder.get(self.name) is not None

        async def confirm(tool: Any, arguments: dict[str, Any]) -> Any:
            return await self._ask(job, tool, arguments)

        return Continuation(
            session_id=context_id, resume=resume, confirm=confirm if is_agent else None, plain=True
        )

    async def _ask(self, job: _Job, tool: Any, arguments: dict[str, Any]) -> str:
        """A confirmation as an ``input-required`` task; the next message is the answer."""
        updater = job.updater
        assert updater is not None
        shown = json.dumps(arguments, ensure_ascii=False)[:400]
        question = f"May I run the tool {tool.name} with {shown}? Answer yes, always or no."
        loop = asyncio.get_running_loop()
        job.answer = loop.create_future()
        await updater.requires_input(_status(updater, question))
        job.paused.set()
        wait = self.conversations.idle_s or DEFAULT_ASK_WAIT_S
        try:
            answer = await asyncio.wait_for(asyncio.shield(job.answer), wait)
        except TimeoutError:
            return "no"
        word = answer.strip().lower().rstrip(".!")
        return word if word in ("yes", "always") else "no"

    async def _pump(self, job: _Job, run: RequestRun) -> None:
        """The run's pieces as task events, to the end state."""
        artifact = uuid.uuid4().hex
        held: str | None = None  # text not sent yet: sent when more arrives (or as the last chunk)
        sent = False
        flushed = time.monotonic()
        end: EndPiece | None = None
        try:
            async for piece in run.pieces():
                updater = job.updater
                assert updater is not None
                if isinstance(piece, TextPiece):
                    if not piece.text:
                        continue
                    now = time.monotonic()
                    if held is not None and now - flushed >= CHUNK_INTERVAL_S:
                        await self._chunk(updater, artifact, held, append=sent, last=False)
                        sent, held, flushed = True, None, now
                    elif held is None and not sent:
                        flushed = now  # the first chunk waits from the first text, not the run's start
                    held = piece.text if held is None else held + piece.text
                elif isinstance(piece, ToolRunning):
                    await updater.update_status(
                        pb.TaskState.TASK_STATE_WORKING, _status(updater, f"running the tool {piece.name}")
                    )
                elif isinstance(piece, StepRunning):
                    who = f" ({piece.agent})" if piece.agent else ""
                    await updater.update_status(
                        pb.TaskState.TASK_STATE_WORKING,
                        _status(updater, f"running the step {piece.key}{who}"),
                    )
                elif isinstance(piece, EndPiece):
                    end = piece
            updater = job.updater
            assert updater is not None and end is not None
            outcome = end.outcome
            if outcome is not None and outcome.data is not None and end.error is None:
                await self._data(updater, artifact, outcome.data)
            elif held is not None:
                await self._chunk(updater, artifact, held, append=sent, last=True)
            await self._finish(updater, end)
        finally:
            job.ended = True
            job.unlock()
            job.paused.set()
            if self._jobs.get(job.task_id) is job:  # ended however it ended (a cancel, an error)
                del self._jobs[job.task_id]

    @staticmethod
    async def _chunk(updater: TaskUpdater, artifact: str, text: str, *, append: bool, last: bool) -> None:
        await updater.add_artifact(
            [pb.Part(text=text, media_type="text/plain")],
            artifact_id=artifact,
            name="answer",
            append=append,
            last_chunk=last,
        )

    @staticmethod
    async def _data(updater: TaskUpdater, artifact: str, data: Any) -> None:
        value = struct_pb2.Value()
        from google.protobuf.json_format import ParseDict

        ParseDict(data, value)
        await updater.add_artifact(
            [pb.Part(data=value, media_type="application/json")],
            artifact_id=artifact,
            name="answer",
            last_chunk=True,
        )

    @staticmethod
    async def _finish(updater: TaskUpdater, end: EndPiece) -> None:
        """The run's end as the task's end state (module docstring)."""
        outcome = end.outcome
        status = outcome.status if outcome is not None else "error"
        if status in ("ok", "stopped") and end.error is None:
            await updater.complete()
        elif status == "interrupted":
            await updater.cancel(_status(updater, "the run was cancelled"))
        elif status == "limit":
            await updater.failed(_status(updater, f"the run reached a limit: {_why(outcome)}"))
        else:
            message = end.error.message if end.error is not None else _why(outcome)
            await updater.failed(_status(updater, message))


def _why(outcome: Outcome | None) -> str:
    if outcome is None:
        return "the run failed"
    return outcome.why() or outcome.reason
