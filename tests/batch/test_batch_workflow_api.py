"""A workflow batch from Python: run_batch and WorkflowBatch with an in-process model (one agent pool,
the cost budget across every step, the shared rate limiter, Ctrl+C)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import runner.workflow.agents as workflow_agents
from runner.batch import BatchLimits, RateLimiter, as_items, run_batch
from runner.batch.workflow_batch import WorkflowBatch
from runner.errors import ConfigError
from runner.models.base import Usage
from runner.runtime.settings import RuntimeSettings
from runner.workflow.loading import team_workflow
from tests.batch.test_batch_api import EchoModel
from tests.workflow.helpers import team

WORKFLOW = """workflow:
  - {id: one, agent: first, input: "one {{ input }}"}
  - {id: two, agent: second, input: "two {{ steps.one.output }}"}
"""


@pytest.fixture
def team_file(tmp_path: Path) -> Path:
    return team(tmp_path, "http://127.0.0.1:9/v1", {"first": "", "second": ""}, WORKFLOW)


def _batch(path: Path, model: Any, inputs: list[Any], **options: Any) -> WorkflowBatch:
    team = team_workflow(path)
    assert team is not None
    settings = options.pop("settings", RuntimeSettings(write_transcript=False))
    return WorkflowBatch(path, team.workflow, as_items(inputs), settings=settings, model=model, **options)


async def _all(batch: WorkflowBatch) -> list[Any]:
    return [result async for result in batch.results()]


def test_run_batch_takes_a_team_file_and_runs_its_workflow_per_input(team_file: Path) -> None:
    async def main() -> list[Any]:
        return [r async for r in run_batch(team_file, ["a", {"id": "x", "input": "b"}], model=EchoModel())]

    results = asyncio.run(main())
    assert [(r.id, r.status, r.answer) for r in results] == [
        (1, "ok", "echo two echo one a"),
        ("x", "ok", "echo two echo one b"),
    ]
    assert results[0].usage["total_tokens"] == 30 and results[0].steps == 2


def test_run_batch_with_agent_name_runs_one_team_agent_and_refuses_ray_for_a_workflow(
    team_file: Path,
) -> None:
    async def main(**options: Any) -> list[Any]:
        return [r async for r in run_batch(team_file, ["a"], model=EchoModel(), **options)]

    (only,) = asyncio.run(main(agent_name="second"))
    assert only.answer == "echo a" and only.steps == 1
    with pytest.raises(ConfigError, match="batch of workflows runs on the local backend"):
        asyncio.run(main(backend="ray"))


def test_the_batch_opens_each_agent_once_for_all_items(team_file: Path, monkeypatch: Any) -> None:
    opened: list[str] = []
    original = workflow_agents.open_runtime

    async def counting(config: Any, *args: Any, **kwargs: Any) -> Any:
        opened.append(config.name)
        return await original(config, *args, **kwargs)

    monkeypatch.setattr(workflow_agents, "open_runtime", counting)
    batch = _batch(team_file, EchoModel(), [f"n{n}" for n in range(6)], limits=BatchLimits(concurrency=3))
    results = asyncio.run(_all(batch))
    assert [r.status for r in results] == ["ok"] * 6
    assert sorted(opened) == ["first", "second"]


def test_the_cost_budget_counts_every_step_of_every_item(team_file: Path) -> None:
    model = EchoModel(usage=Usage(10, 5, 15, 0.25))  # 0.5 a workflow (two steps)
    batch = _batch(
        team_file, model, [str(n) for n in range(6)], limits=BatchLimits(concurrency=1, max_cost_usd=0.75)
    )
    results = asyncio.run(_all(batch))
    assert len(results) == 2 and all(r.ok for r in results)
    assert [r.cost_usd for r in results] == [0.5, 0.5]
    assert batch.stats.stopped == "the batch cost $1.0000 (--max-cost-usd 0.75)"
    assert len(model.starts) == 4  # the third workflow never started


class CountingLimiter(RateLimiter):
    def __init__(self) -> None:
        super().__init__(rpm=1000)
        self.turns = 0

    async def acquire(self) -> None:
        self.turns += 1
        await super().acquire()


def test_one_rate_limiter_holds_every_step_of_every_item(team_file: Path) -> None:
    model, limiter = EchoModel(), CountingLimiter()
    batch = _batch(team_file, model, ["a", "b", "c"], limits=BatchLimits(concurrency=3), limiter=limiter)
    assert all(r.ok for r in asyncio.run(_all(batch)))
    assert limiter.turns == len(model.starts) == 6


def test_interrupt_stops_the_running_workflows_and_they_are_marked_not_written(team_file: Path) -> None:
    model = EchoModel()
    model.gate["one hold"] = asyncio.Event()  # never set: that workflow's first step waits
    batch = _batch(team_file, model, ["a", "hold", "c"], limits=BatchLimits(concurrency=3), ordered=False)

    async def main() -> list[Any]:
        results = []
        async for result in batch.results():
            results.append(result)
            if len(results) == 2:
                batch.interrupt()
        return results

    results = asyncio.run(asyncio.wait_for(main(), 20))
    by_id = {r.id: r for r in results}
    assert by_id[1].ok and by_id[3].ok and not by_id[1].interrupted
    assert by_id[2].interrupted and by_id[2].status == "interrupted"
    assert batch.stats.interrupted == 1 and batch.stats.ok == 2


def test_a_cassette_is_refused_for_a_workflow_batch(team_file: Path, tmp_path: Path) -> None:
    settings = RuntimeSettings(write_transcript=False, replay=tmp_path / "c.yaml")
    with pytest.raises(ConfigError, match="does not record or replay a cassette"):
        _batch(team_file, None, ["a"], settings=settings)
