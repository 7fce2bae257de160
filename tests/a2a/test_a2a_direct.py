"""The direct path of a blocking ``SendMessage`` (``runner.serve.a2a.direct``): the same task as the
SDK's ``ActiveTask`` path gives, the store written only when the state changes, and a task on it
that can be cancelled, subscribed to and fails cleanly."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from a2a.types import a2a_pb2 as pb

from tests.a2a.conftest import sdk_client
from tests.a2a.test_a2a_serve import answer_of, collect, message

pytestmark = pytest.mark.anyio

DONE = pb.TaskState.TASK_STATE_COMPLETED
WORKING = pb.TaskState.TASK_STATE_WORKING


def _card() -> pb.AgentCard:
    interface = pb.AgentInterface(url="http://127.0.0.1/", protocol_binding="JSONRPC", protocol_version="1.0")
    return pb.AgentCard(
        name="unit",
        description="a unit",
        version="1",
        capabilities=pb.AgentCapabilities(streaming=True),
        supported_interfaces=[interface],
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[pb.AgentSkill(id="unit", name="unit", description="answers", tags=["unit"])],
    )


class _Executor:
    """Submitted, working, a status message, two artifact chunks, completed (or an error)."""

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail

    async def execute(self, context: Any, queue: Any) -> None:
        from a2a.server.tasks import TaskUpdater

        task = pb.Task(
            id=context.task_id,
            context_id=context.context_id,
            status=pb.TaskStatus(state=pb.TaskState.TASK_STATE_SUBMITTED),
            history=[context.message],
        )
        await queue.enqueue_event(task)
        updater = TaskUpdater(queue, context.task_id, context.context_id)
        await updater.start_work()
        await updater.update_status(WORKING, updater.new_agent_message([pb.Part(text="running a tool")]))
        if self.fail:
            raise RuntimeError("the executor broke")
        await updater.add_artifact([pb.Part(text="he")], artifact_id="a", name="answer")
        await updater.add_artifact([pb.Part(text="llo")], artifact_id="a", append=True, last_chunk=True)
        await updater.complete()

    async def cancel(self, context: Any, queue: Any) -> None:
        return None


def _handlers(executor: _Executor) -> tuple[Any, Any, list[int]]:
    """The direct handler (its store counting saves, by state) and the SDK's own, on ``executor``."""
    from a2a.server.request_handlers import DefaultRequestHandler

    from runner.serve.a2a.direct import DirectHandler
    from runner.serve.a2a.tasks import BoundedTaskStore

    saved: list[int] = []

    class Counting(BoundedTaskStore):
        async def save(self, task: pb.Task, context: Any) -> None:
            saved.append(task.status.state)
            await super().save(task, context)

    direct = DirectHandler(agent_executor=executor, task_store=Counting(), agent_card=_card())
    sdk = DefaultRequestHandler(agent_executor=executor, task_store=BoundedTaskStore(), agent_card=_card())
    return direct, sdk, saved


def _shape(task: pb.Task) -> tuple[Any, ...]:
    history = [(m.role, [p.text for p in m.parts]) for m in task.history]
    artifacts = [(a.artifact_id, a.name, [p.text for p in a.parts]) for a in task.artifacts]
    return task.status.state, [p.text for p in task.status.message.parts], history, artifacts


def _call() -> Any:
    from a2a.server.context import ServerCallContext

    from runner.serve.a2a.tasks import Owner

    return ServerCallContext(user=Owner("unit", "key-digest"))


async def test_the_direct_path_gives_the_sdks_task_and_saves_only_state_changes() -> None:
    direct, sdk, saved = _handlers(_Executor())
    got = await direct.on_message_send(message("hi"), _call())
    expected = await sdk.on_message_send(message("hi"), _call())
    assert _shape(got) == _shape(expected)
    assert answer_of(got) == "hello" and got.status.state == DONE
    assert saved == [pb.TaskState.TASK_STATE_SUBMITTED, WORKING, DONE]  # not at the chunks, nor the message
    stored = await direct.on_get_task(pb.GetTaskRequest(id=got.id), _call())
    assert _shape(stored) == _shape(got)
    assert direct._direct == {}  # nothing kept for a finished task
    await sdk.aclose()


async def test_an_executor_that_raises_leaves_the_task_failed_and_the_error_goes_back() -> None:
    direct, _, _ = _handlers(_Executor(fail=True))
    with pytest.raises(RuntimeError, match="the executor broke"):
        await direct.on_message_send(message("hi"), _call())
    (task,) = (await direct.on_list_tasks(pb.ListTasksRequest(), _call())).tasks
    assert task.status.state == pb.TaskState.TASK_STATE_FAILED
    assert "the executor broke" in task.status.message.parts[0].text
    assert [m.parts[0].text for m in task.history] == ["hi", "running a tool"]
    assert direct._direct == {}


def _slow_model(delay_s: float) -> tuple[threading.Event, Any]:
    asked = threading.Event()

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        asked.set()
        return {"content": "took a while", "delay_s": delay_s}

    return asked, reply


async def _running_task(client: Any, asked: threading.Event) -> pb.Task:
    assert await asyncio.to_thread(asked.wait, 10)
    (task,) = (await client.list_tasks(pb.ListTasksRequest())).tasks
    assert task.status.state == WORKING
    return task


async def test_a_blocking_send_in_flight_is_canceled_by_cancel_task(agents, scripted, serve) -> None:
    asked, reply = _slow_model(30)
    served = serve([agents.write("slow", scripted(reply))])
    client = await sdk_client(served.agent_url("slow"), streaming=False)
    sending = asyncio.ensure_future(collect(client, message("take your time")))
    task = await _running_task(client, asked)
    canceled = await client.cancel_task(pb.CancelTaskRequest(id=task.id))
    assert canceled.status.state == pb.TaskState.TASK_STATE_CANCELED
    (answer,) = await asyncio.wait_for(sending, 15)
    assert answer.task.id == task.id and answer.task.status.state == pb.TaskState.TASK_STATE_CANCELED
    got = await client.get_task(pb.GetTaskRequest(id=task.id))
    assert got.status.state == pb.TaskState.TASK_STATE_CANCELED
    await client.close()


async def test_a_blocking_send_in_flight_can_be_subscribed_to(agents, scripted, serve) -> None:
    asked, reply = _slow_model(0.5)
    served = serve([agents.write("slowish", scripted(reply))])
    client = await sdk_client(served.agent_url("slowish"), streaming=False)
    sending = asyncio.ensure_future(collect(client, message("a moment")))
    task = await _running_task(client, asked)
    streamer = await sdk_client(served.agent_url("slowish"))
    seen = [event async for event in streamer.subscribe(pb.SubscribeToTaskRequest(id=task.id))]
    assert seen[0].task.id == task.id
    assert seen[-1].status_update.status.state == DONE
    assert "took a while" in "".join(p.text for e in seen for p in e.artifact_update.artifact.parts)
    (answer,) = await asyncio.wait_for(sending, 15)
    assert answer.task.status.state == DONE and answer_of(answer.task) == "took a while"
    await client.close()
    await streamer.close()


async def test_a_conversation_that_cannot_be_kept_fails_the_task_saying_so(
    agents, scripted, serve, home
) -> None:
    model = scripted([{"content": "never kept"}])
    served = serve([agents.write("helper", model)])
    (home / "serve" / "owners.jsonl").mkdir(parents=True)  # a folder where the owners' log goes
    client = await sdk_client(served.agent_url("helper"), streaming=False)
    (event,) = await collect(client, message("hi"))
    assert event.task.status.state == pb.TaskState.TASK_STATE_FAILED
    said = event.task.status.message.parts[0].text
    assert "cannot keep this conversation" in said and "owners.jsonl: Is a directory" in said
    assert model.requests == []  # nothing ran
    await client.close()


async def test_a_short_answer_after_a_slow_start_is_one_part(agents, scripted, serve) -> None:
    # the model takes longer than the chunk interval to start, then streams three chunks at once
    served = serve([agents.write("helper", scripted([{"content": "all in one", "delay_s": 0.1}], chunks=3))])
    client = await sdk_client(served.agent_url("helper"), streaming=False)
    (event,) = await collect(client, message("hi"))
    (artifact,) = event.task.artifacts
    assert [part.text for part in artifact.parts] == ["all in one"]
    await client.close()
