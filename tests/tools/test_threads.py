"""``run_in_thread``: sync tools and hooks on the runner's worker threads."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time

import pytest

from runner.tools import threads
from runner.tools.threads import run_in_thread

request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="none")


def _until_idle(timeout: float = 10) -> None:
    """Wait until no job runs on the tool threads (a worker marks itself idle as its job ends)."""
    deadline = time.monotonic() + timeout
    while threads.TOOL_THREADS.running:
        assert time.monotonic() < deadline, "a tool thread is still busy"
        time.sleep(0.005)


async def test_result_and_arguments_come_back() -> None:
    def combine(a: int, b: int, *, scale: int = 1) -> int:
        return (a + b) * scale

    assert await run_in_thread(combine, 2, 3, scale=10) == 50


async def test_runs_off_the_event_loop_thread_on_a_daemon_thread() -> None:
    loop_thread = threading.current_thread()
    worker = await run_in_thread(threading.current_thread)
    assert worker is not loop_thread
    assert worker.daemon
    assert worker.name.startswith("runner-tool-")


async def test_exceptions_propagate_with_their_type() -> None:
    def fail() -> None:
        raise KeyError("missing")

    with pytest.raises(KeyError, match="missing"):
        await run_in_thread(fail)


async def test_system_exit_is_delivered_not_swallowed() -> None:
    def leave() -> None:
        raise SystemExit(3)

    with pytest.raises(SystemExit):
        await run_in_thread(leave)


async def test_stop_iteration_becomes_a_runtime_error() -> None:
    def empty() -> object:
        return next(iter(()))

    with pytest.raises(RuntimeError, match="StopIteration"):
        await run_in_thread(empty)


async def test_the_callers_context_variables_are_visible() -> None:
    request_id.set("req-7")
    assert await run_in_thread(request_id.get) == "req-7"


async def test_calls_run_in_parallel() -> None:
    def nap() -> tuple[float, float]:
        start = time.perf_counter()
        time.sleep(0.2)
        return start, time.perf_counter()

    spans = await asyncio.gather(*(run_in_thread(nap) for _ in range(4)))
    assert max(start for start, _ in spans) < min(end for _, end in spans)  # they overlapped


async def test_many_results_finishing_together_each_reach_their_caller() -> None:
    values = await asyncio.gather(*(run_in_thread(lambda i=i: i * i) for i in range(200)))
    assert values == [i * i for i in range(200)]


async def test_cancelling_the_caller_abandons_the_call() -> None:
    finished = threading.Event()

    def slow() -> str:
        time.sleep(0.2)
        finished.set()
        return "late"

    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.05):
            await run_in_thread(slow)
    # The thread runs to its end; its result is dropped without an error on the loop.
    assert await asyncio.to_thread(finished.wait, 2)
    _until_idle()
    await asyncio.sleep(0)  # the dropped result's hand-off reaches the loop
    assert await run_in_thread(lambda: "next") == "next"


async def test_idle_workers_are_reused() -> None:
    await run_in_thread(lambda: None)
    _until_idle()  # the worker marks itself idle after delivering
    before = threading.active_count()
    for _ in range(20):
        await run_in_thread(lambda: None)
    assert threading.active_count() == before


def test_a_result_for_a_closed_loop_is_dropped() -> None:
    release = threading.Event()
    done = threading.Event()

    def wait() -> str:
        release.wait(2)
        done.set()
        return "after the loop closed"

    async def start_and_leave() -> None:
        task = asyncio.create_task(run_in_thread(wait))
        await asyncio.sleep(0.01)
        task.cancel()

    asyncio.run(start_and_leave())
    release.set()
    assert done.wait(2)
    _until_idle()  # the worker's hand-off to the closed loop must not raise or hang


def test_the_pool_never_starts_more_than_its_limit() -> None:
    pool = threads._Pool("test-pool", 2)
    started = threading.Barrier(3, timeout=2)
    release = threading.Event()
    ran: list[int] = []

    def job(i: int) -> None:
        ran.append(i)
        if i < 2:
            started.wait()
            release.wait(2)

    before = threading.active_count()
    for i in range(3):
        pool.submit(lambda i=i: job(i))
    started.wait()  # the first two run at once; the third waits for a free worker
    assert threading.active_count() - before == 2
    assert sorted(ran) == [0, 1]
    release.set()
    deadline = time.monotonic() + 2
    while 2 not in ran and time.monotonic() < deadline:
        time.sleep(0.01)
    assert 2 in ran
