"""Await code the runner does not trust to behave: tools and python hooks (issue 12).

A tool or hook is someone else's code. Three things it can do would otherwise hang or kill a run:

- raise ``KeyboardInterrupt`` or call ``sys.exit()`` (a ``BaseException`` that asyncio lets escape
  the event loop, which then stops for good): ``contained`` turns it into ``Escaped``, an ordinary
  error the caller reports like any other exception;
- swallow ``asyncio.CancelledError`` (``asyncio.wait_for`` then waits for it forever, defeating the
  call's timeout, ``limits.timeout_s`` and Ctrl+C): ``bounded`` runs the work in a task of its own,
  and when its deadline passes or the caller is cancelled it cancels that task and waits at most
  ``GRACE_S`` for it; a task still running after that is abandoned (kept referenced, never awaited
  again) and the caller goes on;
- block a worker thread (a sync function): it is abandoned the same way (threads cannot be killed).

``run_to_end`` is ``asyncio.run`` for front doors that own their loop (``runner.Agent.run_sync``,
``runner test``): it does not wait forever for abandoned tasks when the loop closes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Coroutine
from typing import Any, TypeVar

__all__ = ["GRACE_S", "Escaped", "bounded", "contained", "run_to_end"]

T = TypeVar("T")

#: How long a cancelled tool or hook gets to finish before it is abandoned, in seconds.
GRACE_S = 1.0

_abandoned: set[asyncio.Task[Any]] = set()


class Escaped(Exception):
    """A tool or hook raised a ``BaseException`` that is not cancellation (``KeyboardInterrupt``,
    ``SystemExit``, ``GeneratorExit``); ``original`` is it."""

    def __init__(self, original: BaseException) -> None:
        detail = str(original)
        name = type(original).__name__
        super().__init__(f"{name}: {detail}" if detail and detail != "None" else name)
        self.original = original


async def contained(work: Awaitable[T]) -> T:
    """Await ``work``; a ``BaseException`` other than cancellation comes out as ``Escaped``."""
    try:
        return await work
    except asyncio.CancelledError:
        raise
    except Exception:
        raise
    except BaseException as exc:
        raise Escaped(exc) from None


async def bounded(
    work: Awaitable[T], timeout_s: float | None, *, isolate: bool = True, grace_s: float = GRACE_S
) -> T:
    """Await ``work`` within ``timeout_s`` (None: no limit); ``TimeoutError`` when it runs out.

    With ``isolate`` (someone else's async code) the work runs in a task of its own so that, when it
    ignores cancellation, it can be left behind: after a timeout, or when the caller is cancelled
    (Ctrl+C, ``limits.timeout_s``, a client that went away), the caller gets control back within
    ``grace_s``. Work that only awaits a worker thread (a sync tool or hook) cannot ignore its
    cancellation and needs no task (``isolate=False``, cheaper). Errors come out as they are,
    ``KeyboardInterrupt`` and ``SystemExit`` as ``Escaped``.
    """
    if not isolate:
        async with asyncio.timeout(timeout_s):
            return await contained(work)
    task = asyncio.ensure_future(contained(work))
    try:
        done, _ = await asyncio.wait((task,), timeout=timeout_s)
    except asyncio.CancelledError:
        await _stop(task, grace_s)
        raise
    if not done:
        await _stop(task, grace_s)
        raise TimeoutError
    return task.result()


async def _stop(task: asyncio.Task[Any], grace_s: float) -> None:
    """Cancel ``task`` and give it ``grace_s`` to end; abandon it if it does not."""
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.wait((task,), timeout=grace_s)
    if task.done():
        if not task.cancelled():
            task.exception()  # retrieved: its result no longer matters
        return
    _abandoned.add(task)
    task.add_done_callback(_abandoned.discard)
    task._log_destroy_pending = False  # type: ignore[attr-defined]  # it is left pending on purpose


def run_to_end(main: Coroutine[Any, Any, T], *, grace_s: float = GRACE_S) -> T:
    """Run ``main`` in a new event loop and close it, like ``asyncio.run``, except that tasks still
    running at the end get ``grace_s`` after their cancellation, not forever."""
    loop = asyncio.new_event_loop()
    try:
        asyncio.set_event_loop(loop)
        return loop.run_until_complete(main)
    finally:
        try:
            pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
            for task in pending:
                task.cancel()
            if pending:
                loop.run_until_complete(asyncio.wait(pending, timeout=grace_s))
            for task in pending:
                if task.done() and not task.cancelled():
                    task.exception()
                else:
                    task._log_destroy_pending = False  # type: ignore[attr-defined]
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            asyncio.set_event_loop(None)
            loop.close()
