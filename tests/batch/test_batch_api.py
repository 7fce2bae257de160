"""The batch from Python: run_batch and Batch with in-process models (order, window, budgets, rates)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from runner.agentfile import load_agent
from runner.batch import Batch, BatchLimits, DuplicateIds, RateLimiter, as_items, run_batch
from runner.errors import ModelError
from runner.models.base import Reply, Request, StreamEvent, Usage, events_of
from runner.runtime.settings import RuntimeSettings
from runner.testing import ScriptedModel, text

ROOT = Path(__file__).resolve().parent.parent.parent
WEATHER = ROOT / "examples" / "weather.yaml"


class EchoModel:
    """Answers each request with its user input, after ``delays[input]`` seconds; records starts."""

    name = "echo"
    supports_tools = True
    structured_output = "response_format"

    def __init__(self, delays: dict[str, float] | None = None, *, usage: Usage | None = None) -> None:
        self.delays = delays or {}
        self.usage = usage or Usage(10, 5, 15, 0.01)
        self.starts: list[float] = []
        self.gate: dict[str, asyncio.Event] = {}
        self.fail: dict[str, ModelError] = {}

    async def complete(self, request: Request) -> Reply:
        self.starts.append(time.monotonic())
        prompt = next(m["content"] for m in reversed(request.messages) if m["role"] == "user")
        if prompt in self.fail:
            raise self.fail[prompt]
        if prompt in self.gate:
            await self.gate[prompt].wait()
        await asyncio.sleep(self.delays.get(prompt, 0.0))
        return Reply(content=f"echo {prompt}", usage=self.usage, finish_reason="stop")

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        for event in events_of(await self.complete(request)):
            yield event

    async def aclose(self) -> None:
        pass


def _batch(model: Any, inputs: list[Any], **kwargs: Any) -> Batch:
    limits = kwargs.pop("limits", BatchLimits(concurrency=4))
    settings = RuntimeSettings(write_transcript=False)
    return Batch(
        load_agent(WEATHER), as_items(inputs), settings=settings, model=model, limits=limits, **kwargs
    )


async def _all(batch: Batch) -> list[Any]:
    return [result async for result in batch.results()]


def test_run_batch_yields_in_input_order_though_items_finish_out_of_order() -> None:
    model = EchoModel({"slow": 0.3})

    async def main() -> list[Any]:
        return [r async for r in run_batch(WEATHER, ["slow", "a", "b"], model=model, concurrency=3)]

    results = asyncio.run(main())
    assert [r.answer for r in results] == ["echo slow", "echo a", "echo b"]
    assert all(r.ok and r.usage["total_tokens"] == 15 for r in results)
    assert [r.as_record()["id"] for r in results] == [1, 2, 3]


def test_unordered_yields_as_items_finish() -> None:
    batch = _batch(EchoModel({"slow": 0.3}), ["slow", "a"], ordered=False)
    assert [r.answer for r in asyncio.run(_all(batch))] == ["echo a", "echo slow"]


def test_a_stuck_item_holds_back_at_most_the_window_of_items() -> None:
    model = EchoModel()
    model.gate["0"] = asyncio.Event()
    taken: list[int] = []

    def inputs() -> Any:
        for n in range(1000):
            taken.append(n)
            yield str(n)

    async def main() -> list[Any]:
        batch = _batch(model, [], limits=BatchLimits(concurrency=4), window=16)
        batch.items = as_items(inputs())
        results = []
        async for result in batch.results():
            results.append(result)
            if len(results) == 1:
                assert len(taken) <= 16 + 2  # the window, plus the one the feeder holds
        return results

    async def release() -> list[Any]:
        task = asyncio.create_task(main())
        while len(taken) < 16:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)  # the others finished meanwhile; nothing more may be taken
        assert len(taken) <= 16 + 2
        model.gate["0"].set()
        return await task

    results = asyncio.run(release())
    assert [r.answer for r in results] == [f"echo {n}" for n in range(1000)]


def test_a_spent_cost_budget_starts_no_new_item() -> None:
    model = EchoModel(usage=Usage(10, 5, 15, 0.25))
    batch = _batch(model, [str(n) for n in range(10)], limits=BatchLimits(concurrency=1, max_cost_usd=0.5))
    results = asyncio.run(_all(batch))
    assert len(results) == 2 and all(r.ok for r in results)
    assert batch.stats.stopped == "the batch cost $0.5000 (--max-cost-usd 0.5)"
    assert batch.stats.cost_usd == pytest.approx(0.5) and len(model.starts) == 2


def test_duplicate_ids_from_python_raise_naming_both_positions() -> None:
    async def main() -> None:
        async for _ in run_batch(
            WEATHER, [{"id": "a", "input": "x"}, {"id": "a", "input": "y"}], model=EchoModel()
        ):
            pass

    with pytest.raises(DuplicateIds, match="inputs 1 and 2 have the same id 'a'"):
        asyncio.run(main())


def test_a_failing_item_is_a_result_and_retries_apply_to_transient_failures_only() -> None:
    model = EchoModel()
    model.fail["bad"] = ModelError("refused", status=400)
    model.fail["busy"] = ModelError("overloaded", status=503, retryable=True)

    async def no_wait(seconds: float) -> None:
        pass

    batch = _batch(model, ["bad", "busy", "fine"], limits=BatchLimits(concurrency=2, retries=2))
    results = asyncio.run(_all(batch))
    assert [r.status for r in results] == ["error", "error", "ok"]
    assert results[0].attempts == 1 and not results[0].transient
    assert results[1].attempts == 3 and results[1].transient and "overloaded" in (results[1].error or "")
    assert batch.stats.transient_retries == 2


def test_requests_of_all_items_share_one_rate_limiter() -> None:
    model = EchoModel()
    limiter = RateLimiter(rpm=3, window_s=0.5)
    batch = _batch(model, [str(n) for n in range(7)], limits=BatchLimits(concurrency=7), limiter=limiter)
    results = asyncio.run(_all(batch))
    assert all(r.ok for r in results) and len(model.starts) == 7
    starts = sorted(model.starts)
    for i in range(len(starts) - 3):
        assert starts[i + 3] - starts[i] >= 0.5 - 0.02  # never a 4th request within one window
    assert limiter.waited_s > 0


def test_interrupt_stops_running_items_and_starts_no_new_one() -> None:
    model = EchoModel({str(n): 30.0 for n in range(6)})

    async def main() -> tuple[Batch, list[Any]]:
        batch = _batch(model, [str(n) for n in range(6)], limits=BatchLimits(concurrency=2))
        loop = asyncio.get_running_loop()
        loop.call_later(0.3, batch.interrupt)
        return batch, await _all(batch)

    started = time.monotonic()
    batch, results = asyncio.run(main())
    assert time.monotonic() - started < 20  # not the 30 s the model takes (generous: a loaded machine)
    assert len(results) == 2 and all(r.interrupted and r.status == "interrupted" for r in results)
    assert batch.stats.interrupted == 2 and len(model.starts) == 2


def test_scripted_model_items_carry_the_session_id_and_vars() -> None:
    model = ScriptedModel([text("A"), text("B")])
    batch = _batch(
        model, [{"input": "x", "vars": {"units": "imperial"}}, "y"], limits=BatchLimits(concurrency=1)
    )
    results = asyncio.run(_all(batch))
    assert [r.answer for r in results] == ["A", "B"]
    assert "imperial" in model.requests[0].messages[0]["content"]
    assert "imperial" not in model.requests[1].messages[0]["content"]
    assert results[0].session_id != results[1].session_id
