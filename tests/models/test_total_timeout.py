"""A model call is bounded as a whole by ``model.total_timeout_s`` (issue 23, item 24).

``model.timeout_s`` bounds each wait for data, so a server that drips a chunk every 0.2 s forever
kept ``run``, a batch item or a served request going forever. These tests check a timeout, so
they measure the clock.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable

import pytest

from runner.errors import ModelError
from runner.models.base import Completed, Model, Reply, Request, StreamEvent, TextDelta
from runner.models.resilient import ResilientModel
from runner.testing import ScriptedServer

Serve = Callable[..., ScriptedServer]
Connect = Callable[..., Model]
DRIP = 1000  # chunks of a stream that goes on for 200 s


def ask(stream: bool) -> Request:
    return Request(model="openai/scripted-model", messages=[{"role": "user", "content": "Hi"}], stream=stream)


async def test_a_stream_that_drips_forever_ends_with_an_error_naming_the_bound(
    serve: Serve, connect: Connect
) -> None:
    server = serve([{"content": "warm"}, {"content": "x " * DRIP, "chunk_delay_s": 0.2}], chunks=DRIP)
    inner = connect(server.base_url, timeout_s=5.0)
    [event async for event in inner.stream(ask(True))]  # litellm's first stream takes seconds to start
    model = ResilientModel(inner, retries=2, total_timeout_s=1.0)
    started = time.monotonic()
    shown: list[str] = []
    with pytest.raises(ModelError) as caught:
        async for event in model.stream(ask(True)):
            if isinstance(event, TextDelta):
                shown.append(event.text)
    elapsed = time.monotonic() - started
    assert caught.value.message == (
        "openai/scripted-model: the answer did not end within 1 s (model.total_timeout_s)"
    )
    assert "model.total_timeout_s" in (caught.value.hint or "")
    assert shown, "the stream was dripping when the bound ended it"
    assert 1.0 <= elapsed < 30  # the bound, well before the stream's 200 s (generous: a loaded machine)
    assert len(server.requests) == 2  # the warm-up, then the drip: not retried


async def test_a_whole_answer_that_never_comes_ends_with_the_same_error(
    serve: Serve, connect: Connect
) -> None:
    server = serve([{"content": "late", "delay_s": 4.0}, {"content": "late", "delay_s": 4.0}])
    model = ResilientModel(connect(server.base_url, timeout_s=10.0), retries=1, total_timeout_s=0.5)
    started = time.monotonic()
    with pytest.raises(ModelError) as caught:
        await model.complete(ask(False))
    assert "within 0.5 s (model.total_timeout_s)" in caught.value.message
    assert time.monotonic() - started < 3.0
    assert len(server.requests) == 1


class _Slow:
    """A model whose stream gives one event at once and completes after ``gap_s``."""

    name = "slow"
    supports_tools = True

    def __init__(self, gap_s: float) -> None:
        self.gap_s = gap_s

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        yield TextDelta("a")
        await asyncio.sleep(self.gap_s)
        yield Completed(Reply(content="a", finish_reason="stop"))

    async def complete(self, request: Request) -> Reply:
        raise NotImplementedError

    async def aclose(self) -> None:
        return None


async def test_the_bound_never_cancels_the_callers_own_work_between_events() -> None:
    model = ResilientModel(_Slow(0.0), retries=0, total_timeout_s=0.2)
    events = model.stream(ask(True))
    assert isinstance(await anext(events), TextDelta)
    await asyncio.sleep(0.4)  # the caller's own await, past the bound: not cancelled
    with pytest.raises(ModelError, match=r"within 0\.2 s"):
        await anext(events)
    await events.aclose()


async def test_a_stream_within_the_bound_is_untouched() -> None:
    model = ResilientModel(_Slow(0.05), retries=0, total_timeout_s=5.0)
    events = [event async for event in model.stream(ask(True))]
    assert isinstance(events[-1], Completed) and events[-1].reply.content == "a"
    # the timer is gone with the request: nothing fires later
    await asyncio.sleep(0)
