"""``runner serve`` as an A2A server, driven by the ``a2a-sdk`` client over HTTP on 127.0.0.1."""

from __future__ import annotations

import asyncio
import socket
import threading
from typing import Any

import httpx
import pytest
from a2a.types import a2a_pb2 as pb

from tests.a2a.conftest import sdk_client

pytestmark = pytest.mark.anyio

DONE = pb.TaskState.TASK_STATE_COMPLETED


def message(text: str, *, context_id: str = "", task_id: str = "") -> pb.SendMessageRequest:
    return pb.SendMessageRequest(
        message=pb.Message(
            message_id=f"m-{text[:8]}-{id(text)}",
            role=pb.Role.ROLE_USER,
            parts=[pb.Part(text=text)],
            context_id=context_id,
            task_id=task_id,
        )
    )


async def collect(client: Any, request: pb.SendMessageRequest) -> list[pb.StreamResponse]:
    return [event async for event in client.send_message(request)]


def answer_of(task: pb.Task) -> str:
    return "".join(part.text for artifact in task.artifacts for part in artifact.parts)


@pytest.mark.parametrize(
    ("binding", "version"),
    [("JSONRPC", "1.0"), ("HTTP+JSON", "1.0"), ("JSONRPC", "0.3"), ("HTTP+JSON", "0.3")],
)
async def test_send_message_blocking(agents, scripted, serve, binding: str, version: str) -> None:
    server = scripted([{"content": "Hello from helper."}])
    served = serve([agents.write("helper", server)])
    client = await sdk_client(
        served.agent_url("helper"), bindings=[binding], version=version, streaming=False
    )
    (event,) = await collect(client, message("hi"))
    task = event.task
    assert task.status.state == DONE
    assert answer_of(task) == "Hello from helper."
    assert task.context_id  # minted by the server
    await client.close()


ADD_TOOLS = '''
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
'''


def add_then(answer: str, **extra: Any) -> Any:
    """A model that calls ``add`` first, then answers ``answer`` (``extra``: more of the step)."""

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        if body["messages"][-1]["role"] == "user":
            return {"tool_calls": [{"id": "call_add", "name": "add", "arguments": {"a": 2, "b": 3}}]}
        return {"content": answer, **extra}

    return reply


@pytest.mark.parametrize(
    ("binding", "version"),
    [("JSONRPC", "1.0"), ("HTTP+JSON", "1.0"), ("JSONRPC", "0.3"), ("HTTP+JSON", "0.3")],
)
async def test_streaming_gives_status_updates_tool_steps_and_the_answer_as_artifact_chunks(
    agents, scripted, serve, binding: str, version: str
) -> None:
    server = scripted(add_then("The sum is five.", chunk_delay_s=0.03), chunks=4)
    served = serve([agents.write("summer", server, tools=ADD_TOOLS)])
    client = await sdk_client(served.agent_url("summer"), bindings=[binding], version=version)
    events = await collect(client, message("2 + 3?"))
    kinds = [event.WhichOneof("payload") for event in events]
    assert kinds[0] == "task" and kinds[-1] == "status_update"
    states = [e.status_update.status.state for e in events if e.HasField("status_update")]
    assert states[0] == pb.TaskState.TASK_STATE_WORKING and states[-1] == DONE
    notes = [
        part.text
        for e in events
        if e.HasField("status_update")
        for part in e.status_update.status.message.parts
    ]
    assert "running the tool add" in notes
    chunks = [e.artifact_update for e in events if e.HasField("artifact_update")]
    assert len(chunks) > 1  # the answer streams
    assert "".join(p.text for c in chunks for p in c.artifact.parts) == "The sum is five."
    assert chunks[-1].last_chunk and not chunks[0].append and all(c.append for c in chunks[1:])
    assert len({c.artifact.artifact_id for c in chunks}) == 1
    await client.close()


async def test_a_context_continues_the_conversation_and_each_task_has_its_own_artifacts(
    agents, scripted, serve, home
) -> None:
    server = scripted([{"content": "Noted: blue."}, {"content": "Your colour is blue."}])
    served = serve([agents.write("memo", server)])
    client = await sdk_client(served.agent_url("memo"), streaming=False)
    (first,) = await collect(client, message("My colour is blue."))
    context = first.task.context_id
    (second,) = await collect(client, message("What is my colour?", context_id=context))
    assert second.task.context_id == context and second.task.id != first.task.id
    assert answer_of(second.task) == "Your colour is blue."  # this task's answer only
    sent = server.requests[1]["messages"]
    texts = [m.get("content") for m in sent]
    assert any("My colour is blue." in str(t) for t in texts) and "Noted: blue." in texts
    assert (home / "sessions" / f"{context}.jsonl").is_file()  # runner sessions sees it
    await client.close()


async def test_an_unknown_context_is_refused_and_runs_nothing(agents, scripted, serve) -> None:
    from a2a.utils.errors import InvalidParamsError

    server = scripted([])
    served = serve([agents.write("memo", server)])
    client = await sdk_client(served.agent_url("memo"), streaming=False)
    for context in ("20250101-000000-0123456789ab", "not-a-session", "../../etc/passwd"):
        with pytest.raises(InvalidParamsError, match="no conversation"):
            await collect(client, message("hello", context_id=context))
    assert server.requests == []
    await client.close()


async def test_another_keys_context_is_not_found(agents, scripted, serve) -> None:
    from a2a.utils.errors import InvalidParamsError, TaskNotFoundError

    server = scripted([{"content": "Hi A."}])
    served = serve([agents.write("memo", server)], api_keys=["key-a", "key-b"])
    first = await sdk_client(served.agent_url("memo"), streaming=False, key="key-a")
    other = await sdk_client(served.agent_url("memo"), streaming=False, key="key-b")
    (event,) = await collect(first, message("hello"))
    with pytest.raises(InvalidParamsError, match="no conversation"):
        await collect(other, message("and me?", context_id=event.task.context_id))
    with pytest.raises(TaskNotFoundError):
        await other.get_task(pb.GetTaskRequest(id=event.task.id))
    assert len(server.requests) == 1
    await first.close()
    await other.close()


async def test_an_expired_context_is_not_continued(agents, scripted, serve, monkeypatch) -> None:
    from a2a.utils.errors import InvalidParamsError

    monkeypatch.setenv("RUNNER_SERVE_CONVERSATION_IDLE_S", "0.001")
    server = scripted([{"content": "Hi."}])
    served = serve([agents.write("memo", server)])
    client = await sdk_client(served.agent_url("memo"), streaming=False)
    (event,) = await collect(client, message("hello"))
    await asyncio.sleep(0.05)  # past the (tiny) idle time
    with pytest.raises(InvalidParamsError, match="no conversation"):
        await collect(client, message("again", context_id=event.task.context_id))
    await client.close()


async def test_card_is_true_to_the_host_it_was_asked_on_and_lists_every_agent(
    agents, scripted, serve
) -> None:
    server = scripted([])
    agents.write("one", server)
    agents.write("two", server, tools=ADD_TOOLS)
    served = serve([agents.root], api_keys=["k1"], allowed_hosts=["localhost", "127.0.0.1"])
    port = served.url.rsplit(":", 1)[1]
    headers = {"authorization": "Bearer k1", "host": f"localhost:{port}"}
    async with httpx.AsyncClient(base_url=served.url, headers=headers) as http:
        listing = (await http.get("/a2a")).json()["agents"]
        card = (await http.get("/a2a/two/.well-known/agent-card.json")).json()
        refused = await http.get("/a2a/two/.well-known/agent-card.json", headers={"authorization": ""})
    assert sorted(c["name"] for c in listing) == ["one", "two"]
    assert refused.status_code == 401
    urls = {(i["protocolBinding"], i["protocolVersion"]): i["url"] for i in card["supportedInterfaces"]}
    base = f"http://localhost:{port}/a2a/two"
    assert urls == {
        ("JSONRPC", "1.0"): base,
        ("HTTP+JSON", "1.0"): base + "/rest",
        ("JSONRPC", "0.3"): base + "/v0.3",
        ("HTTP+JSON", "0.3"): base + "/v0.3/rest",
    }
    assert card["url"] == base + "/v0.3" and card["protocolVersion"] == "0.3"  # the 0.3 fields
    assert card["capabilities"]["streaming"] is True
    assert card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "bearer"
    assert "the two agent" in card["skills"][0]["description"]
    assert "python" in card["skills"][0]["tags"] or "add" in card["skills"][0]["tags"]


async def test_cancel_interrupts_the_run_and_a_finished_task_is_not_cancelable(
    agents, scripted, serve
) -> None:
    from a2a.utils.errors import TaskNotCancelableError, TaskNotFoundError

    asked = threading.Event()

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        if not asked.is_set():
            asked.set()
            return {"content": "too late", "delay_s": 30}
        return {"content": "quick"}

    server = scripted(reply)
    served = serve([agents.write("slow", server)])
    client = await sdk_client(served.agent_url("slow"))
    stream = client.send_message(message("take your time"))
    first = await anext(stream)
    task_id = first.task.id
    assert await asyncio.to_thread(asked.wait, 10)  # the model is working on it
    canceled = await client.cancel_task(pb.CancelTaskRequest(id=task_id))
    assert canceled.status.state == pb.TaskState.TASK_STATE_CANCELED
    await stream.aclose()
    got = await client.get_task(pb.GetTaskRequest(id=task_id))
    assert got.status.state == pb.TaskState.TASK_STATE_CANCELED
    with pytest.raises(TaskNotCancelableError):
        await client.cancel_task(pb.CancelTaskRequest(id=task_id))
    with pytest.raises(TaskNotFoundError):
        await client.cancel_task(pb.CancelTaskRequest(id="no-such-task"))
    fresh = await sdk_client(served.agent_url("slow"), streaming=False)
    (after,) = await collect(fresh, message("now"))
    assert after.task.status.state == DONE  # the server goes on
    await client.close()


async def test_list_tasks_get_task_and_subscribe(agents, scripted, serve) -> None:
    server = scripted([{"content": "one"}, {"content": "two", "delay_s": 0.3}])
    served = serve([agents.write("lister", server)])
    client = await sdk_client(served.agent_url("lister"), streaming=False)
    (first,) = await collect(client, message("first"))
    request = message("second", context_id=first.task.context_id)
    request.configuration.return_immediately = True
    (second,) = await collect(client, request)
    streamer = await sdk_client(served.agent_url("lister"))
    seen = [event async for event in streamer.subscribe(pb.SubscribeToTaskRequest(id=second.task.id))]
    assert seen[-1].status_update.status.state == DONE
    listed = await client.list_tasks(pb.ListTasksRequest(context_id=first.task.context_id))
    assert {t.id for t in listed.tasks} == {first.task.id, second.task.id}
    got = await client.get_task(pb.GetTaskRequest(id=second.task.id))
    assert answer_of(got) == "two"
    await client.close()
    await streamer.close()


async def test_push_notification_methods_answer_not_supported(agents, scripted, serve) -> None:
    from a2a.utils.errors import PushNotificationNotSupportedError

    server = scripted([{"content": "ok"}])
    served = serve([agents.write("pusher", server)])
    client = await sdk_client(served.agent_url("pusher"), streaming=False)
    (event,) = await collect(client, message("hi"))
    config = pb.TaskPushNotificationConfig(task_id=event.task.id, url="http://127.0.0.1:9/hook")
    with pytest.raises(PushNotificationNotSupportedError):
        await client.create_task_push_notification_config(config)
    with pytest.raises(PushNotificationNotSupportedError):
        await client.list_task_push_notification_configs(
            pb.ListTaskPushNotificationConfigsRequest(task_id=event.task.id)
        )
    await client.close()


async def test_a_file_part_is_refused_before_any_task(agents, scripted, serve) -> None:
    from a2a.utils.errors import ContentTypeNotSupportedError

    server = scripted([])
    served = serve([agents.write("texty", server)])
    client = await sdk_client(served.agent_url("texty"), streaming=False)
    request = message("look")
    request.message.parts.append(pb.Part(raw=b"\x89PNG", media_type="image/png", filename="a.png"))
    with pytest.raises(ContentTypeNotSupportedError, match="part 1 is a file"):
        await collect(client, request)
    listed = await client.list_tasks(pb.ListTasksRequest())
    assert list(listed.tasks) == [] and server.requests == []
    await client.close()


async def test_a_data_part_is_read_as_json_and_output_is_a_data_part(agents, scripted, serve) -> None:
    from google.protobuf import struct_pb2
    from google.protobuf.json_format import MessageToDict, ParseDict

    server = scripted([{"content": '{"total": 5, "note": "2 + 3"}'}])
    output = "output:\n  type: object\n  properties:\n    total: {type: integer}\n    note: {type: string}\n"
    served = serve([agents.write("summer", server, output + "  required: [total, note]\n")])
    client = await sdk_client(served.agent_url("summer"), streaming=False)
    request = message("add these")
    value = struct_pb2.Value()
    ParseDict({"a": 2, "b": 3}, value)
    request.message.parts.append(pb.Part(data=value))
    (event,) = await collect(client, request)
    assert event.task.status.state == DONE
    (artifact,) = event.task.artifacts
    (part,) = artifact.parts
    assert part.HasField("data") and MessageToDict(part.data) == {"total": 5, "note": "2 + 3"}
    assert '"a": 2' in str(server.requests[0]["messages"][-1]["content"])
    await client.close()


async def test_a_limit_fails_naming_it_and_a_model_failure_fails_with_its_message(
    agents, scripted, serve
) -> None:
    looping = scripted(add_then("never"))
    broken = scripted([{"status": 400, "error": "the model refuses this"}])
    agents.write("looper", looping, "limits:\n  max_steps: 1\n", tools=ADD_TOOLS)
    agents.write("broken", broken)
    served = serve([agents.root])
    client = await sdk_client(served.agent_url("looper"), streaming=False)
    (event,) = await collect(client, message("go"))
    assert event.task.status.state == pb.TaskState.TASK_STATE_FAILED
    said = event.task.status.message.parts[0].text
    assert "limit" in said and "step" in said
    client = await sdk_client(served.agent_url("broken"), streaming=False)
    (event,) = await collect(client, message("go"))
    assert event.task.status.state == pb.TaskState.TASK_STATE_FAILED
    said = event.task.status.message.parts[0].text
    assert "the model failed" in said and "refuses" in said
    assert answer_of(event.task) == ""  # the error is the status, not the answer


async def test_a_tool_that_needs_confirmation_asks_with_input_required(agents, scripted, serve) -> None:
    server = scripted(add_then("Done: 5."))
    module = "a2a_confirm_tools"
    (agents.root / f"{module}.py").write_text(ADD_TOOLS, encoding="utf-8")
    served = serve([agents.write("careful", server, f"tools:\n  - python: {module}\n    confirm: true\n")])
    client = await sdk_client(served.agent_url("careful"), streaming=False)
    (event,) = await collect(client, message("2 + 3?"))
    task = event.task
    assert task.status.state == pb.TaskState.TASK_STATE_INPUT_REQUIRED
    assert "add" in task.status.message.parts[0].text
    (event,) = await collect(client, message("yes", context_id=task.context_id, task_id=task.id))
    assert event.task.id == task.id and event.task.status.state == DONE
    assert answer_of(event.task) == "Done: 5."
    assert server.requests[1]["messages"][-1]["content"] == "5"  # the tool ran
    await client.close()


async def test_the_task_store_keeps_1000_dropping_the_oldest_finished_first() -> None:
    from a2a.server.context import ServerCallContext

    from runner.serve.a2a.tasks import MAX_TASKS, BoundedTaskStore, Owner

    store = BoundedTaskStore()
    assert store.limit == MAX_TASKS == 1000
    me = ServerCallContext(user=Owner("agent", "digest"))
    running = pb.Task(id="live", context_id="c", status=pb.TaskStatus(state=pb.TaskState.TASK_STATE_WORKING))
    await store.save(running, me)
    for number in range(MAX_TASKS + 5):
        done = pb.Task(id=f"t{number}", context_id="c", status=pb.TaskStatus(state=DONE))
        await store.save(done, me)
    assert len(store) == MAX_TASKS
    assert await store.get("live", me) is not None  # a running task is never dropped
    for number in range(6):  # the six oldest finished ones went
        assert await store.get(f"t{number}", me) is None
    assert await store.get("t6", me) is not None and await store.get(f"t{MAX_TASKS + 4}", me) is not None


async def test_the_server_drops_its_oldest_finished_tasks_past_the_bound(
    agents, scripted, serve, monkeypatch
) -> None:
    from a2a.utils.errors import TaskNotFoundError

    monkeypatch.setattr("runner.serve.a2a.tasks.MAX_TASKS", 3)
    server = scripted([{"content": "ok"}], repeat=True)
    served = serve([agents.write("many", server)])
    client = await sdk_client(served.agent_url("many"), streaming=False)
    ids = [(await collect(client, message(f"n{n}")))[0].task.id for n in range(5)]
    listed = await client.list_tasks(pb.ListTasksRequest())
    assert {t.id for t in listed.tasks} == set(ids[2:])
    with pytest.raises(TaskNotFoundError):
        await client.get_task(pb.GetTaskRequest(id=ids[0]))
    await client.close()


async def test_a_served_workflow_is_an_a2a_agent_with_its_steps_as_status(agents, scripted, serve) -> None:
    from tests.serve.test_serve_workflow import PLAN_WORKFLOW, PLANNER
    from tests.workflow.helpers import Models, team, user_text

    models = Models(
        {"planner": lambda body: {"tasks": ["a", "b"]}, "researcher": lambda body: user_text(body).upper()}
    )
    server = scripted(models)
    team(agents.root, server.base_url, {"planner": PLANNER, "researcher": ""}, PLAN_WORKFLOW)
    served = serve([agents.root])
    client = await sdk_client(served.agent_url("research"))
    events = await collect(client, message("the moon"))
    assert events[-1].status_update.status.state == DONE
    notes = [
        part.text
        for e in events
        if e.HasField("status_update")
        for part in e.status_update.status.message.parts
    ]
    assert any("plan" in note for note in notes)
    answer = "".join(
        p.text for e in events if e.HasField("artifact_update") for p in e.artifact_update.artifact.parts
    )
    assert answer == "RESEARCH A | RESEARCH B"
    await client.close()


async def test_without_the_a2a_sdk_the_server_starts_and_its_a2a_paths_say_what_to_install(
    agents, scripted, home, monkeypatch
) -> None:
    import importlib.util

    from runner.runtime import RuntimeSettings
    from runner.serve.app import create_app
    from runner.serve.catalog import load_catalog
    from runner.serve.reload import CatalogHolder

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "a2a" else real(name, *a)
    )
    paths = [agents.write("plain", scripted([]))]
    app = create_app(CatalogHolder(paths, load_catalog(paths)), settings=RuntimeSettings(home=home))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        for path in ("/a2a", "/a2a/plain/.well-known/agent-card.json"):
            answer = await http.get(path)
            assert answer.status_code == 501 and "runner[a2a]" in answer.json()["error"]["message"]
        assert (await http.get("/v1/models")).status_code == 200


async def test_a_task_waiting_for_input_can_be_canceled(agents, scripted, serve) -> None:
    server = scripted(add_then("never said"))
    module = "a2a_confirm_cancel_tools"
    (agents.root / f"{module}.py").write_text(ADD_TOOLS, encoding="utf-8")
    served = serve([agents.write("careful", server, f"tools:\n  - python: {module}\n    confirm: true\n")])
    client = await sdk_client(served.agent_url("careful"), streaming=False)
    (event,) = await collect(client, message("2 + 3?"))
    assert event.task.status.state == pb.TaskState.TASK_STATE_INPUT_REQUIRED
    canceled = await client.cancel_task(pb.CancelTaskRequest(id=event.task.id))
    assert canceled.status.state == pb.TaskState.TASK_STATE_CANCELED
    got = await client.get_task(pb.GetTaskRequest(id=event.task.id))
    assert got.status.state == pb.TaskState.TASK_STATE_CANCELED
    assert len(server.requests) == 1  # the tool never ran, the model was not asked again
    await client.close()


@pytest.mark.parametrize("path", ["", "/", "/v0.3", "/rest/message:send", "/v0.3/rest/message:send"])
async def test_a_body_over_the_servers_limit_is_413_on_every_binding_and_runs_nothing(
    agents, scripted, serve, path: str
) -> None:
    """The door reads the body within ``RUNNER_SERVE_MAX_BODY_BYTES`` before the SDK does (the
    SDK reads a body whole, however large)."""
    server = scripted([{"content": "never"}])
    served = serve([agents.write("memo", server)], max_body_bytes=2_000)
    text = "x" * 5_000
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
        "messageId": "m1", "role": "ROLE_USER", "parts": [{"text": text}]}}}  # fmt: skip
    async with httpx.AsyncClient() as http:
        answer = await http.post(served.agent_url("memo") + path, json=body, headers={"A2A-Version": "1.0"})
    assert answer.status_code == 413, answer.text
    assert "larger than 2000 bytes" in answer.json()["error"]["message"]
    assert server.requests == []


async def test_a_body_that_does_not_arrive_in_time_is_408_and_closed(agents, scripted, serve) -> None:
    server = scripted([{"content": "never"}])
    served = serve([agents.write("memo", server)], body_timeout_s=0.3)
    host, port = served.url.removeprefix("http://").rsplit(":", 1)
    head = (
        b"POST /a2a/memo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: 100000\r\n\r\n"
    )
    with socket.create_connection((host, int(port)), timeout=15) as sock:
        sock.sendall(head + b'{"jsonrpc": "2.0", "id": 1, ')  # and nothing more
        response = b""
        while chunk := sock.recv(65536):
            response += chunk
    assert response.split(b" ", 2)[1] == b"408", response[:300]
    assert b"did not arrive within 0.3 s" in response
    assert server.requests == []
