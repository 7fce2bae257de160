"""A cancelled model call gives its connection back (issue 23, item 22).

A ``serve`` client that goes away, a Ctrl+C or a timeout cancels the task that reads the model's
answer. httpcore frees a connection in a step that only anyio's own cancellation cannot stop: a
plain ``Task.cancel()`` that landed there left the connection busy in the pool for good, and once
the pool's 256 were taken every request waited for one until the server was restarted. Here the
cancellation is made to land exactly there, and the scripted server counts the connections that
stay open.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from runner.models.base import Completed, Request
from runner.models.openai_compat import OpenAICompatModel
from runner.testing import ScriptedServer

Serve = Callable[..., ScriptedServer]


class _CancelAtEnd(httpx.AsyncByteStream):
    """A body that cancels the task reading it once it has been read to its end."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.inner:
            yield chunk
        task = asyncio.current_task()
        assert task is not None
        task.cancel()  # delivered at the next suspension: while httpx closes the response

    async def aclose(self) -> None:
        await self.inner.aclose()


class CancelWhileClosing(httpx.AsyncBaseTransport):
    """The real transport; while ``armed``, the reader of an answer is cancelled as the answer closes."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.armed = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        if self.armed:
            response.stream = _CancelAtEnd(response.stream)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


def settled(server: ScriptedServer, expected: int, timeout_s: float = 5.0) -> int:
    """The server's open connections, once they are ``expected`` (or after ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    while server.open_connections != expected and time.monotonic() < deadline:
        time.sleep(0.01)  # the server sees a closed connection a moment after the client closed it
    return server.open_connections


async def _streamed(model: OpenAICompatModel, request: Request) -> str | None:
    async for event in model.stream(request):
        if isinstance(event, Completed):
            return event.reply.content
    return None


async def _whole(model: OpenAICompatModel, request: Request) -> str | None:
    return (await model.complete(request)).content


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
async def test_a_cancel_landing_while_an_answer_closes_gives_the_connection_back(
    serve: Serve, stream: bool
) -> None:
    server = serve([{"content": "fine"}], repeat=True)
    transport = CancelWhileClosing()
    model = OpenAICompatModel("openai/scripted", api_base=server.base_url, transport=transport)
    request = Request(model="openai/scripted", messages=[{"role": "user", "content": "hi"}], stream=stream)
    ask = _streamed if stream else _whole
    try:
        for _ in range(6):
            transport.armed = True
            cancelled = asyncio.create_task(ask(model, request))
            with pytest.raises(asyncio.CancelledError):
                await cancelled
            transport.armed = False
            assert await ask(model, request) == "fine"  # a request that completes, on the same pool
        # One connection, reused by every request: none was left behind by the cancelled ones.
        assert settled(server, 1) == 1
        assert len(server.requests) == 12
    finally:
        await model.aclose()
    assert settled(server, 0) == 0
