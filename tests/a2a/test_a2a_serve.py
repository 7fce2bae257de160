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
