"""``runner serve`` as an A2A server, driven by the ``a2a-sdk`` client over HTTP on 127.0.0.1."""

from __future__ import annotations

import asyncio
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
    ("binding", "version"), [("JSONRPC", "1.0"), ("HTTP+JSON", "1.0"), ("JSONRPC", "0.3"), ("HTTP+JSON", "0.3")]
)
async def test_send_message_blocking(agents, scripted, serve, binding: str, version: str) -> None:
    server = scripted([{"content": "Hello from helper."}])
    served = serve([agents.write("helper", server)])
    client = await sdk_client(served.agent_url("helper"), bindings=[binding], version=version, streaming=False)
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


def add_then(answer: str) -> Any:
    """A model that calls ``add`` first, then answers ``answer``."""

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        if body["messages"][-1]["role"] == "user":
            return {"tool_calls": [{"id": "call_add", "name": "add", "arguments": {"a": 2, "b": 3}}]}
        return {"content": answer}

    return reply


@pytest.mark.parametrize(("binding", "version"), [("JSONRPC", "1.0"), ("HTTP+JSON", "0.3")])
async def test_streaming_gives_status_updates_tool_steps_and_the_answer_as_artifact_chunks(
    agents, scripted, serve, binding: str, version: str
) -> None:
    server = scripted(add_then("The sum is five."))
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


async def test_card_is_true_to_the_host_it_was_asked_on_and_lists_every_agent(agents, scripted, serve) -> None:
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
