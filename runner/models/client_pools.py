"""Several httpx clients to one endpoint, each request on the least busy (the fast path's pools).

httpcore's connection pool does work proportional to the square of its connections on every request
start and end (``_assign_requests_to_connections`` counts the idle connections once per idle
connection). With one pool for every session of a ``runner serve`` process, 64 concurrent streams
pay that on every request; ``POOLS`` clients of a quarter of the connections each cut the server's
CPU per relayed stream to about two thirds (``python -m bench.telemetry --pools 1,4``).

A request goes to the client with the fewest requests in flight, the first on a tie, and clients are
made only when needed: one caller at a time always gets the first, so its kept-alive connection is
reused exactly as with one client. An extra client closes once idle for the keep-alive expiry.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import httpx

__all__ = ["POOLS", "ClientPools"]

#: How many clients a model spreads its requests over (a seam for the benchmark: 1 is one pool).
POOLS = 4


class ClientPools:
    """Up to ``count`` clients made by ``make(count)``; ``take`` a client, ``give`` it back.

    The first client lives as long as the pools; an extra one that stays idle for ``idle_s`` (the
    connections' keep-alive expiry) is closed, with its connections, and made again when needed.
    httpcore closes expired connections only at its pool's next request, which an extra client
    may not get for a long time: without this, its expired connections stayed open.
    """

    __slots__ = ("_busy", "_clients", "_closing", "_idle_s", "_make", "_timers", "count")

    def __init__(
        self, make: Callable[[int], httpx.AsyncClient], count: int = 0, *, idle_s: float | None = None
    ) -> None:
        self.count = max(1, count or POOLS)
        self._make = make
        self._idle_s = idle_s
        self._clients: list[httpx.AsyncClient | None] = []
        self._busy: list[int] = []
        self._timers: dict[int, asyncio.TimerHandle] = {}
        self._closing: set[asyncio.Task[None]] = set()

    def take(self) -> tuple[int, httpx.AsyncClient]:
        """The least busy client (made when every one made so far is busy and there is room)."""
        clients, busy = self._clients, self._busy
        live = [i for i, client in enumerate(clients) if client is not None]
        index = min(live, key=busy.__getitem__) if live else -1
        if index < 0 or (busy[index] and len(live) < self.count):
            index = clients.index(None) if len(live) < len(clients) else len(clients)
            if index == len(clients):
                clients.append(None)
                busy.append(0)
            clients[index] = self._make(self.count)
        timer = self._timers.pop(index, None)
        if timer is not None:
            timer.cancel()
        busy[index] += 1
        client = clients[index]
        assert client is not None
        return index, client

    def give(self, index: int) -> None:
        """The request on client ``index`` ended."""
        self._busy[index] -= 1
        if index and not self._busy[index] and self._idle_s is not None:
            loop = asyncio.get_running_loop()
            self._timers[index] = loop.call_later(self._idle_s, self._expire, index)

    def _expire(self, index: int) -> None:
        """Close extra client ``index`` if it is still idle."""
        self._timers.pop(index, None)
        if index >= len(self._clients) or self._busy[index]:
            return
        client, self._clients[index] = self._clients[index], None
        if client is not None:
            task = asyncio.ensure_future(client.aclose())
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    @property
    def clients(self) -> list[httpx.AsyncClient]:
        """The clients open now."""
        return [client for client in self._clients if client is not None]

    async def aclose(self) -> None:
        """Close every client."""
        for timer in self._timers.values():
            timer.cancel()
        clients, self._clients, self._busy, self._timers = self.clients, [], [], {}
        for client in clients:
            await client.aclose()
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)
