"""The A2A tasks ``runner serve`` keeps: in memory, per owner, at most ``MAX_TASKS`` (1,000).

A task is kept for ``GetTask``, ``ListTasks`` and ``SubscribeToTask`` after it ended. When a save
would keep more than the bound, the oldest finished tasks (completed, failed, canceled, rejected)
are dropped first, then the oldest that wait for input; a running task is never dropped (how many
run at once is bounded by the clients' requests, not by this store). The conversation a task
belonged to stays: it is a session transcript (``runner sessions``), continued by ``contextId``.

The owner of a task is the agent it ran plus the SHA-256 of the API key that sent it (the SDK's
``ServerCallContext.user``): another key's task, or another agent's, is "not found".
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from a2a.auth.user import User
from a2a.server.context import ServerCallContext
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import a2a_pb2 as pb

__all__ = ["MAX_TASKS", "BoundedTaskStore", "Owner"]

MAX_TASKS = 1000

_FINISHED = frozenset(
    {
        pb.TaskState.TASK_STATE_COMPLETED,
        pb.TaskState.TASK_STATE_FAILED,
        pb.TaskState.TASK_STATE_CANCELED,
        pb.TaskState.TASK_STATE_REJECTED,
    }
)
_WAITING = frozenset({pb.TaskState.TASK_STATE_INPUT_REQUIRED, pb.TaskState.TASK_STATE_AUTH_REQUIRED})


class Owner(User):
    """Who a task belongs to: ``agent`` and the key's digest (``runner.serve.conversations.owner_tag``)."""

    def __init__(self, agent: str, tag: str) -> None:
        self.agent, self.tag = agent, tag

    @property
    def is_authenticated(self) -> bool:
        return bool(self.tag)

    @property
    def user_name(self) -> str:
        return f"{self.agent}\0{self.tag}"


class BoundedTaskStore(InMemoryTaskStore):
    """The SDK's in-memory store, with at most ``limit`` tasks over all owners (module docstring)."""

    def __init__(self, limit: int = MAX_TASKS) -> None:
        super().__init__()
        self.limit = limit
        self._order: OrderedDict[str, tuple[str, int]] = OrderedDict()  # task id -> (owner, state)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._order)

    async def save(self, task: pb.Task, context: ServerCallContext) -> None:
        await super().save(task, context)
        with self._lock:
            self._order[task.id] = (context.user.user_name, task.status.state)
            victims = self._victims()
        for task_id, owner in victims:
            await super().delete(task_id, ServerCallContext(user=_Named(owner)))

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        await super().delete(task_id, context)
        with self._lock:
            self._order.pop(task_id, None)

    def _victims(self) -> list[tuple[str, str]]:
        """The tasks to drop now (called under the lock): finished first, oldest first, then waiting."""
        over = len(self._order) - self.limit
        if over <= 0:
            return []
        chosen: list[tuple[str, str]] = []
        for states in (_FINISHED, _WAITING):
            for task_id, (owner, state) in self._order.items():  # oldest first: stops at the first few
                if len(chosen) >= over:
                    break
                if state in states:
                    chosen.append((task_id, owner))
        for task_id, _ in chosen:
            del self._order[task_id]
        return chosen


class _Named(User):
    def __init__(self, name: str) -> None:
        self._name = name

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def user_name(self) -> str:
        return self._name
