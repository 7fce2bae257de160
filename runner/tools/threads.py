"""Sync tools and hooks on worker threads, cheaply (SPEC 7: sync functions run in a worker thread).

Two sets of workers: ``TOOL_THREADS`` (``run_in_thread``: sync tools, sync hooks, file provenance) and
``MODEL_THREADS`` (litellm's blocking ``completion``), so that slow model calls never hold up tools.

``asyncio.to_thread`` costs two hand-offs per call on top of the thread switch: a
``concurrent.futures.Future`` chained to an asyncio future, and one wake-up of the event loop per
finished call. Measured on this project's 2-core machine, four trivial sync calls in one step took
about 570 µs that way; ``run_in_thread`` takes about 280 µs (``python -m bench.loop`` has the figure
that matters, per step). It does so by:

- a small pool of **daemon** worker threads (a sync tool that hangs past its timeout is abandoned, as
  SPEC 7 says; a daemon thread also never holds up the interpreter's exit), started on demand up to
  ``MAX_WORKERS`` and reused;
- results handed back through one inbox per event loop: the first result to arrive wakes the loop,
  results that arrive before it has run ride along on the same wake-up.

The caller's ``contextvars`` context is copied into the worker, as ``asyncio.to_thread`` does.
Cancelling the awaiting task abandons the call: the function runs to its end and its result is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import queue
import threading
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["MAX_WORKERS", "MODEL_THREADS", "TOOL_THREADS", "WorkerThreads", "run_in_thread"]

T = TypeVar("T")

#: The most worker threads of one set alive at once; more calls than this wait for a free worker.
MAX_WORKERS = 256

_Job = Callable[[], None]


class _Pool:
    """Daemon worker threads taking jobs from one queue; a new thread only when none is idle."""

    def __init__(self, name: str, max_workers: int) -> None:
        self._name = name
        self._max = max_workers
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0
        self._threads = 0
        self.running = 0
        """Jobs under way (a sync tool that timed out is still running here: it cannot be killed)."""

    def submit(self, job: _Job) -> None:
        with self._lock:
            if self._idle:
                self._idle -= 1  # that worker will take this job
                spawn = False
            else:
                spawn = self._threads < self._max
                self._threads += spawn
        if spawn:
            threading.Thread(target=self._work, name=f"{self._name}-{self._threads}", daemon=True).start()
        self._jobs.put(job)

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            with self._lock:
                self.running += 1
            try:
                job()
            finally:
                del job
                with self._lock:
                    self.running -= 1
                    self._idle += 1


class _Inbox:
    """Results for one event loop: one ``call_soon_threadsafe`` for however many arrive together."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._lock = threading.Lock()
        self._ready: list[tuple[asyncio.Future[Any], Any, BaseException | None]] = []
        self._scheduled = False

    def put(self, future: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
        with self._lock:
            self._ready.append((future, value, error))
            if self._scheduled:
                return
            self._scheduled = True
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is waiting any more
            self._loop.call_soon_threadsafe(self._deliver)

    def _deliver(self) -> None:
        with self._lock:
            ready, self._ready = self._ready, []
            self._scheduled = False
        for future, value, error in ready:
            if future.done():  # cancelled: the call was abandoned
                continue
            if error is None:
                future.set_result(value)
            else:
                future.set_exception(error)


_inboxes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Inbox] = weakref.WeakKeyDictionary()
_inboxes_lock = threading.Lock()


def _inbox(loop: asyncio.AbstractEventLoop) -> _Inbox:
    inbox = _inboxes.get(loop)
    if inbox is None:
        with _inboxes_lock:
            inbox = _inboxes.setdefault(loop, _Inbox(loop))
    return inbox


class WorkerThreads:
    """A named set of worker threads; ``await workers.run(fn, ...)`` runs ``fn`` on one of them."""

    def __init__(self, name: str, max_workers: int = MAX_WORKERS) -> None:
        self._pool = _Pool(name, max_workers)

    @property
    def running(self) -> int:
        """How many calls are under way on these threads."""
        return self._pool.running

    async def run(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` on a worker thread; its result or exception, here."""
        loop = asyncio.get_running_loop()
        inbox = _inbox(loop)
        future: asyncio.Future[T] = loop.create_future()
        context = contextvars.copy_context()

        def job() -> None:
            try:
                value = context.run(fn, *args, **kwargs)
            except StopIteration as exc:  # a future cannot carry StopIteration
                inbox.put(future, None, RuntimeError(f"StopIteration raised by {fn!r}: {exc}"))
            except BaseException as exc:
                inbox.put(future, None, exc)
            else:
                inbox.put(future, value, None)

        self._pool.submit(job)
        return await future


#: Sync tools and hooks.
TOOL_THREADS = WorkerThreads("runner-tool")
#: Blocking model calls (litellm's sync API); apart, so that slow model calls never hold up tools.
MODEL_THREADS = WorkerThreads("runner-model")
run_in_thread = TOOL_THREADS.run
