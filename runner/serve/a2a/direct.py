"""A blocking ``SendMessage`` that starts a task, run without the SDK's ``ActiveTask`` machinery.

The SDK's handler runs every message through an ``ActiveTask``: a producer and a consumer task,
two event queues, the task saved (deep-copied) at every event. For the common call — a new task
whose answer the client waits for — ``DirectHandler`` runs the executor in the request's own task
instead, its events going through the SDK's ``TaskManager`` into the same task store, written
only when the task's state changes (the artifact chunks and same-state status messages of a run
are in the task saved at its next state). Everything else — streaming, ``returnImmediately``, a
message to an existing task (the answer to ``input-required``), ``GetTask``, ``ListTasks`` — is
the SDK's. What stays the protocol's on this path:

- the result is the task at its first terminal or interrupted state (``input-required``), with the
  history and artifacts the SDK's path gives; the run goes on in the background after a question;
- ``CancelTask`` of such a task (running, or waiting for input) interrupts its run here and answers
  the canceled task; ``SubscribeToTask`` gets the task, then its events to that state;
- an executor that raises leaves the task ``failed`` (the error goes back as the SDK's would); a
  request cancelled under it leaves it ``canceled``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any

from a2a.server.agent_execution import RequestContext
from a2a.server.agent_execution.active_task import INTERRUPTED_TASK_STATES, TERMINAL_TASK_STATES
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import DefaultRequestHandler, validate_request_params
from a2a.server.tasks import TaskManager
from a2a.types import a2a_pb2 as pb
from a2a.utils.task import apply_history_length, validate_history_length

__all__ = ["DirectHandler"]

#: How long ``CancelTask`` waits for a cancelled run to reach its end state.
CANCEL_WAIT_S = 10.0


class _SavingOnChange(TaskManager):
    """The SDK's ``TaskManager``, writing the store only when the task's state changes."""

    saved_state: int | None = None

    async def _save_task(self, task: pb.Task) -> None:
        if self.saved_state is not None and task.status.state == self.saved_state:
            self._current_task = task  # applied in memory; saved with the next state
            return
        await super()._save_task(task)
        self.saved_state = task.status.state


@dataclass
class _Direct:
    """One task run on the direct path: its manager, its end, who is subscribed."""

    manager: _SavingOnChange
    context: RequestContext
    paused: asyncio.Event = field(default_factory=asyncio.Event)  # terminal or interrupted
    ended: asyncio.Event = field(default_factory=asyncio.Event)  # terminal
    subscribers: list[asyncio.Queue[Any]] = field(default_factory=list)
    runs: dict[str, _Direct] = field(default_factory=dict)  # the handler's, left at the end

    def forget(self) -> None:
        task_id = self.context.task_id or ""
        if self.runs.get(task_id) is self:
            del self.runs[task_id]

    async def enqueue_event(self, event: Any) -> None:
        """What the executor's ``TaskUpdater`` writes to (the SDK's ``EventQueue`` interface)."""
        task = await self.manager.save_task_event(event)
        for queue in self.subscribers:
            queue.put_nowait(event)
        state = task.status.state if task is not None else None
        if state in TERMINAL_TASK_STATES:
            self.ended.set()
            self.paused.set()
            self.forget()
        elif state in INTERRUPTED_TASK_STATES:
            self.paused.set()

    def snapshot(self) -> pb.Task:
        task = pb.Task()
        current = self.manager._current_task
        if current is not None:
            task.CopyFrom(current)
        return task

    async def end_as(self, state: Any, text: str) -> None:
        """Write an end the executor did not reach (it raised, or the request was cancelled)."""
        if self.ended.is_set() or self.manager._current_task is None:
            return
        from a2a.server.tasks import TaskUpdater

        # this object is the queue (``enqueue_event``), as for the executor's updaters
        updater = TaskUpdater(self, self.manager.task_id or "", self.manager.context_id or "")  # type: ignore[arg-type]
        await updater.update_status(state, updater.new_agent_message([pb.Part(text=text)]))


class DirectHandler(DefaultRequestHandler):
    """The SDK's handler with the direct path for a blocking ``SendMessage`` of a new task."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._direct: dict[str, _Direct] = {}

    @validate_request_params
    async def on_message_send(self, params: pb.SendMessageRequest, context: ServerCallContext) -> Any:
        configuration = params.configuration
        if params.message.task_id:  # an answer to a question: the SDK's ActiveTask takes the task on
            result = await super().on_message_send(params, context)
            taken = self._direct.get(params.message.task_id)
            if taken is not None:
                taken.forget()
            return result
        if configuration.return_immediately:
            return await super().on_message_send(params, context)
        return await self.send_new(params, context)

    async def send_new(self, params: pb.SendMessageRequest, context: ServerCallContext) -> pb.Task:
        """A blocking ``SendMessage`` of a new task (``params`` has its required fields: checked
        by ``on_message_send``, or built with them by ``fast.plain_send``)."""
        configuration = params.configuration
        validate_history_length(configuration)
        context_id = params.message.context_id or None
        request = await self._request_context_builder.build(
            params=params, task_id=None, context_id=context_id, task=None, context=context
        )
        assert request.task_id is not None
        manager = _SavingOnChange(
            self.task_store, context, request.task_id, request.context_id, params.message
        )
        direct = self._direct[request.task_id] = _Direct(manager=manager, context=request, runs=self._direct)
        runner = asyncio.create_task(self._run(direct))  # set ``paused`` however it ends
        try:
            await direct.paused.wait()
            if direct.ended.is_set() or runner.done():
                await runner  # its last steps; the executor's error, as the SDK's path raises it
        except asyncio.CancelledError:
            runner.cancel()
            raise
        return apply_history_length(direct.snapshot(), configuration)

    async def _run(self, direct: _Direct) -> None:
        try:
            await self.agent_executor.execute(direct.context, direct)  # type: ignore[arg-type]
        except asyncio.CancelledError:
            await asyncio.shield(direct.end_as(pb.TaskState.TASK_STATE_CANCELED, "the request was cancelled"))
            raise
        except Exception as exc:
            await direct.end_as(pb.TaskState.TASK_STATE_FAILED, f"the agent failed: {exc}"[:500])
            raise
        finally:
            direct.paused.set()
            if direct.manager._current_task is None:
                direct.forget()

    async def _local(self, task_id: str) -> _Direct | None:
        """The direct run of ``task_id`` when no ``ActiveTask`` took it over (a later message)."""
        direct = self._direct.get(task_id)
        if direct is None or direct.ended.is_set() or await self._active_task_registry.get(task_id):
            return None
        return direct

    async def on_cancel_task(self, params: pb.CancelTaskRequest, context: ServerCallContext) -> Any:
        direct = await self._local(params.id)
        if direct is None or await self.task_store.get(params.id, context) is None:
            return await super().on_cancel_task(params, context)
        await self.agent_executor.cancel(direct.context, direct)  # type: ignore[arg-type]
        try:
            await asyncio.wait_for(direct.ended.wait(), CANCEL_WAIT_S)
        except TimeoutError:
            await direct.end_as(pb.TaskState.TASK_STATE_CANCELED, "the run was cancelled")
        return direct.snapshot()

    async def on_subscribe_to_task(
        self, params: pb.SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Any, None]:
        direct = await self._local(params.id)
        if direct is None or await self.task_store.get(params.id, context) is None:
            async for event in super().on_subscribe_to_task(params, context):
                yield event
            return
        queue: asyncio.Queue[Any] = asyncio.Queue()
        direct.subscribers.append(queue)
        try:
            yield direct.snapshot()
            while not direct.ended.is_set() or not queue.empty():
                event = await queue.get()
                yield event
                state = event.status.state if isinstance(event, pb.TaskStatusUpdateEvent) else None
                if state in TERMINAL_TASK_STATES:
                    return
        finally:
            direct.subscribers.remove(queue)
