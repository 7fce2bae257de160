"""The fast path's httpx clients: each request on the least busy one, made only when needed."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import httpx

from runner.models.base import Request
from runner.models.client_pools import ClientPools
from runner.models.openai_compat import OpenAICompatModel
from runner.testing import ScriptedServer

REQUEST = Request(model="openai/scripted", messages=[{"role": "user", "content": "Hi"}])


def _pools(count: int) -> tuple[ClientPools, list[int]]:
    made: list[int] = []

    def make(pools: int) -> httpx.AsyncClient:
        made.append(pools)
        return httpx.AsyncClient()

    return ClientPools(make, count), made


async def test_one_caller_at_a_time_always_gets_the_first_client() -> None:
    pools, made = _pools(4)
    for _ in range(5):
        index, _client = pools.take()
        assert index == 0
        pools.give(index)
    assert made == [4]  # one client made, told how many there may be
    await pools.aclose()


async def test_concurrent_requests_spread_over_the_clients_least_busy_first() -> None:
    pools, made = _pools(3)
    taken = [pools.take()[0] for _ in range(7)]
    assert taken == [0, 1, 2, 0, 1, 2, 0]
    assert len(made) == 3 and len({id(c) for c in pools.clients}) == 3
    pools.give(1)
    pools.give(1)
    assert pools.take()[0] == 1  # the one with the fewest in flight
    await pools.aclose()
    assert pools.clients == []


async def test_an_extra_client_idle_for_the_keep_alive_expiry_is_closed_and_made_again() -> None:
    made: list[httpx.AsyncClient] = []

    def make(pools: int) -> httpx.AsyncClient:
        made.append(httpx.AsyncClient())
        return made[-1]

    pools = ClientPools(make, 2, idle_s=0.05)
    first, second = pools.take(), pools.take()
    assert (first[0], second[0]) == (0, 1)
    pools.give(1)
    pools.give(0)
    await asyncio.sleep(0.2)
    assert pools.clients == [made[0]]  # the first client stays
    assert made[1].is_closed and not made[0].is_closed
    busy = pools.take()
    again = pools.take()  # the first is busy: the extra one is made again, in its old place
    assert (busy[0], again[0]) == (0, 1) and again[1] is made[2]
    pools.give(1)
    pools.take()  # taken again before it expired: it stays
    await asyncio.sleep(0.2)
    assert not made[2].is_closed
    await pools.aclose()
    assert all(client.is_closed for client in made)


async def test_a_model_spreads_concurrent_streams_and_reuses_connections_afterwards() -> None:
    """Four streams at once go over four clients (four connections); later ones, one at a time,
    all go over the first client's kept-alive connection."""
    gate = threading.Barrier(4, timeout=20)
    lock = threading.Lock()
    answered = 0

    def held(body: dict[str, Any]) -> dict[str, Any]:
        nonlocal answered
        with lock:  # the server answers each request on a thread of its own
            answered += 1
            first_four = answered <= 4
        if first_four:
            gate.wait()  # the first four requests are in flight at once
        return {"content": "hi"}

    with ScriptedServer(held) as server:
        model = OpenAICompatModel("openai/scripted", api_base=server.base_url)

        async def one() -> str | None:
            events = [event async for event in model.stream(REQUEST)]
            return events[-1].reply.content  # type: ignore[union-attr]

        assert await asyncio.gather(*(one() for _ in range(4))) == ["hi"] * 4
        assert model._pools is not None and len(model._pools.clients) == 4
        for _ in range(3):
            assert await one() == "hi"
        await model.aclose()
    concurrent, later = server.peers[:4], server.peers[4:]
    assert len(set(concurrent)) == 4  # four connections for the four at once
    assert len(set(later)) == 1 and later[0] in concurrent  # one kept-alive connection reused
