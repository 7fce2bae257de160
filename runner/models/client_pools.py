"""Several httpx clients to one endpoint, each request on the least busy (the fast path's pools).

httpcore's connection pool does work proportional to the square of its connections on every request
start and end (``_assign_requests_to_connections`` counts the idle connections once per idle
connection). With one pool for every session of a ``runner serve`` process, 64 concurrent streams
pay that on every request; ``POOLS`` clients of a quarter of the connections each cut the server's
CPU per relayed stream to about two thirds (``python -m bench.telemetry --pools 1,4``).

A request goes to the client with the fewest requests in flight, the first on a tie, and clients are
made only when needed: one caller at a time always gets the first, so its kept-alive connection is
reused exactly as with one client.
"""

from __future__ import annotations

from collections.abc import Callable

import httpx

__all__ = ["POOLS", "ClientPools"]

#: How many clients a model spreads its requests over (a seam for the benchmark: 1 is one pool).
POOLS = 4


class ClientPools:
    """Up to ``count`` clients made by ``make(count)``; ``take`` a client, ``give`` it back."""

    __slots__ = ("_busy", "_clients", "_make", "count")

    def __init__(self, make: Callable[[int], httpx.AsyncClient], count: int = 0) -> None:
        self.count = max(1, count or POOLS)
        self._make = make
        self._clients: list[httpx.AsyncClient] = []
        self._busy: list[int] = []

    def take(self) -> tuple[int, httpx.AsyncClient]:
        """The least busy client (made when every one made so far is busy and there is room)."""
        busy = self._busy
        index = min(range(len(busy)), key=busy.__getitem__) if busy else -1
        if index < 0 or (busy[index] and len(busy) < self.count):
            self._clients.append(self._make(self.count))
            busy.append(0)
            index = len(busy) - 1
        busy[index] += 1
        return index, self._clients[index]

    def give(self, index: int) -> None:
        """The request on client ``index`` ended."""
        self._busy[index] -= 1

    @property
    def clients(self) -> list[httpx.AsyncClient]:
        """The clients made so far."""
        return list(self._clients)

    async def aclose(self) -> None:
        """Close every client."""
        clients, self._clients, self._busy = self._clients, [], []
        for client in clients:
            await client.aclose()
