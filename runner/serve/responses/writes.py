"""Stored records written after their answer: ``RecordWrites`` and the responses that start them.

A stored response's record is staged in the store (findable at once: ``ResponseStore.stage``)
before its body or its last event goes out, and written to disk once the answer is sent:
``StoredJSON`` and ``StoredEvents`` start the write when their sending ends (sent, or failed:
a staged record is always written or dropped, never left staged). The write runs in a worker
thread on a task of its own, so the request is over for the client when its body is, and the
server waits for every write at shutdown (``RecordWrites.drain``, from the door's lifespan);
with ``MAX_IN_FLIGHT`` writes in flight, an answer waits for its own record's write first. A
write that fails is logged with the response's id and the reason, and the record is dropped
(``ResponseStore.save``): later requests get the 404 of an unknown id.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable

import anyio
from starlette.types import Receive, Scope, Send

from runner.errors import RunnerError
from runner.serve.http import JSON, Events
from runner.serve.responses.store import ResponseStore, StoredResponse

__all__ = ["RecordWrites", "StoredEvents", "StoredJSON"]

log = logging.getLogger("runner.serve")

#: Writes in flight past which an answer waits for its own record's write (as before they were
#: written after the answer): a disk slower than the rate of stored answers holds back answers
#: instead of growing the records waiting in memory.
MAX_IN_FLIGHT = 256


class RecordWrites:
    """The record writes of one server in flight (each on a task of its own)."""

    def __init__(self, store: Callable[[], ResponseStore], report: Callable[[str], None]) -> None:
        self._store = store
        self._report = report
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self, stored: StoredResponse) -> None:
        """Write ``stored`` (staged already) in a worker thread, from now on."""
        task = asyncio.get_running_loop().create_task(self._write(stored))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def __len__(self) -> int:
        return len(self._tasks)

    @property
    def full(self) -> bool:
        """Whether an answer should wait for its record's write (``now``) instead."""
        return len(self._tasks) >= MAX_IN_FLIGHT

    async def now(self, stored: StoredResponse) -> None:
        """Write ``stored`` (staged already) before its answer goes out; a failure as ``start``'s."""
        await self._write(stored)

    async def _write(self, stored: StoredResponse) -> None:
        try:
            await anyio.to_thread.run_sync(self._store().save, stored)
        except Exception as exc:  # the answer is out already: say so in the log, drop the record
            reason = exc.message if isinstance(exc, RunnerError) else f"{type(exc).__name__}: {exc}"
            line = (
                f"responses: the stored response {stored.response['id']} was not written ({reason}); "
                "it is dropped, and later requests for it get 404"
            )
            log.error(line)
            self._report(f"error: {line}")

    async def drain(self) -> None:
        """Wait for every write in flight, then write what was staged and never started."""
        while self._tasks:
            await asyncio.wait(set(self._tasks))
        for stored in self._store().staged():
            await self._write(stored)


class _ThenWrite:
    """A response that calls ``then`` once its sending ends, sent or failed (the record's write)."""

    then: Callable[[], None]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)  # type: ignore[misc]
        finally:
            self.then()


class StoredJSON(_ThenWrite, JSON):
    """A whole answer whose record is written once it is sent (``then``)."""

    def __init__(self, content: object, *, then: Callable[[], None]) -> None:
        try:
            super().__init__(content)
        except BaseException:  # not rendered: nothing will be sent, the record is written now
            then()
            raise
        self.then = then


class StoredEvents(_ThenWrite, Events):
    """A stream whose record (if its run staged one) is written once the stream is sent (``then``)."""

    def __init__(self, content: AsyncIterator[bytes], *, then: Callable[[], None], sep: str) -> None:
        super().__init__(content, sep=sep)
        self.then = then
