"""A remote A2A agent that is not what it says or misbehaves: each ends clearly, the tool within its
timeout (``tools: - a2a:`` with ``timeout_s``)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from a2a.types import a2a_pb2 as pb
from google.protobuf.json_format import MessageToDict
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from runner.errors import RunnerError
from runner.testing.model import text, tool_call
from runner.testing.run import run_agent
from tests.a2a.conftest import Served
from tests.a2a.test_a2a_call import caller, tool_results

pytestmark = pytest.mark.anyio


def card(
    url: str, *, streaming: bool = True, binding: str = "JSONRPC", version: str = "1.0"
) -> dict[str, Any]:
    return {
        "name": "odd",
        "description": "a remote that misbehaves",
        "version": "1",
        "supportedInterfaces": [{"url": url, "protocolBinding": binding, "protocolVersion": version}],
        "capabilities": {"streaming": streaming},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [],
    }


def sse(request_id: Any, event: pb.StreamResponse) -> bytes:
    body = {"jsonrpc": "2.0", "id": request_id, "result": MessageToDict(event)}
    return f"data: {json.dumps(body)}\n\n".encode()


def working(task_id: str, note: str) -> pb.StreamResponse:
    status = pb.TaskStatus(
        state=pb.TaskState.TASK_STATE_WORKING,
        message=pb.Message(message_id=note, role=pb.Role.ROLE_AGENT, parts=[pb.Part(text=note)]),
    )
    return pb.StreamResponse(
        status_update=pb.TaskStatusUpdateEvent(task_id=task_id, context_id="c1", status=status)
    )


class Remote:
    """A fake A2A server on 127.0.0.1: a card (or not), and a JSON-RPC endpoint that behaves as told."""

    def __init__(self, behaviour: str, *, card_body: Any = None, streaming: bool = True) -> None:
        self.behaviour = behaviour
        self.card_body = card_body
        self.streaming = streaming
        self.calls = 0
        app = Starlette(
            routes=[
                Route("/.well-known/agent-card.json", self.card, methods=["GET"]),
                Route("/rpc", self.rpc, methods=["POST"]),
            ]
        )
        self.served = Served(app).start()

    async def card(self, request: Request) -> Response:
        body = self.card_body
        if body is None:
            body = card(self.served.url + "/rpc", streaming=self.streaming)
        if isinstance(body, str):
            return PlainTextResponse(body)
        return JSONResponse(body)

    async def rpc(self, request: Request) -> Response:
        self.calls += 1
        request_id = (await request.json())["id"]
        if self.behaviour == "never":  # until the caller hangs up
            while not await request.is_disconnected():
                await asyncio.sleep(0.05)
            return Response(status_code=499)
        task = pb.StreamResponse(
            task=pb.Task(
                id="t1", context_id="c1", status=pb.TaskStatus(state=pb.TaskState.TASK_STATE_SUBMITTED)
            )
        )

        async def forever() -> AsyncIterator[bytes]:
            yield sse(request_id, task)
            n = 0
            while True:
                n += 1
                yield sse(request_id, working("t1", f"still at it {n}"))
                await asyncio.sleep(0.05)

        async def drop() -> AsyncIterator[bytes]:
            yield sse(request_id, task)
            yield sse(request_id, working("t1", "halfway"))
            raise ConnectionResetError("the remote fell over")

        stream = forever() if self.behaviour == "forever" else drop()
        return StreamingResponse(stream, media_type="text/event-stream")

    def stop(self) -> None:
        self.served.stop()


@pytest.fixture
def remote() -> Any:
    started: list[Remote] = []

    def start(behaviour: str, **options: Any) -> Remote:
        one = Remote(behaviour, **options)
        started.append(one)
        return one

    yield start
    for one in started:
        one.stop()


async def one_call(path: Path) -> Any:
    return await run_agent(path, "go", script=[tool_call("odd", message="hello"), text("done")])


@pytest.mark.parametrize(
    ("card_body", "said"),
    [
        ("this is not json", "does not parse"),
        ({"name": "odd", "supportedInterfaces": "nope"}, "does not parse"),
        ({**card("http://127.0.0.1:1/rpc", binding="GRPC")}, "no interface runner speaks"),
        ({**card("http://127.0.0.1:1/rpc", version="2.5")}, "no interface runner speaks"),
    ],
    ids=["not-json", "not-a-card", "grpc-only", "unknown-version"],
)
async def test_a_bad_card_is_refused_with_its_url(remote, tmp_path, card_body: Any, said: str) -> None:
    fake = remote("never", card_body=card_body)
    with pytest.raises(RunnerError, match=said) as caught:
        await one_call(caller(tmp_path, fake.served.url))
    assert fake.served.url in str(caught.value)
    assert fake.calls == 0


async def test_a_card_that_points_elsewhere_is_refused(remote, tmp_path) -> None:
    fake = remote("never")
    fake.card_body = card("http://127.0.0.2:9/rpc")
    with pytest.raises(RunnerError, match="points elsewhere"):
        await one_call(caller(tmp_path, fake.served.url))


async def test_a_card_that_advertises_its_bind_address_is_read_as_its_own_host(remote, tmp_path) -> None:
    fake = remote("drop")
    port = fake.served.url.rsplit(":", 1)[1]
    fake.card_body = card(f"http://0.0.0.0:{port}/rpc")
    run = await one_call(caller(tmp_path, fake.served.url))
    assert fake.calls == 1 and "stopped answering" in tool_results(run)[0]


@pytest.mark.parametrize(("behaviour", "streaming"), [("never", False), ("never", True), ("forever", True)])
async def test_a_remote_that_never_finishes_ends_the_tool_within_its_timeout(
    remote, tmp_path, behaviour: str, streaming: bool
) -> None:
    fake = remote(behaviour, streaming=streaming)
    body = "    timeout_s: 1\n"
    path = caller(tmp_path, fake.served.url)
    path.write_text(path.read_text(encoding="utf-8") + body, encoding="utf-8")
    started = time.monotonic()
    run = await one_call(path)
    took = time.monotonic() - started
    (result,) = tool_results(run)
    assert "did not finish within 1 s" in result or "timed out after 1 s" in result
    assert took < 5
    assert fake.calls == 1


async def test_a_remote_that_drops_the_connection_mid_stream_is_a_clear_failure(remote, tmp_path) -> None:
    fake = remote("drop")
    run = await one_call(caller(tmp_path, fake.served.url))
    (result,) = tool_results(run)
    assert "odd" in result and ("stopped answering" in result or "failed" in result)
    assert run.outcome.status == "ok"  # the model read the failure and answered
