"""The batch's parts on their own: the rate limiter's window, the output file's resume rules, inputs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runner.batch.inputs import check_unique, input_hash, parse_lines
from runner.batch.item_result import ItemResult
from runner.batch.limiter import RateLimiter
from runner.batch.outfile import InputIndex, OutFile
from runner.errors import ConfigError


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_rpm_lets_n_requests_into_any_window_then_waits_for_the_oldest_to_leave() -> None:
    clock = Clock()
    limiter = RateLimiter(rpm=2, clock=clock)
    assert limiter.delay() == 0
    limiter._starts.extend([100.0, 110.0])
    assert limiter.delay() == pytest.approx(60.0)  # the first leaves the window at 160
    clock.now = 160.0
    assert limiter.delay() == pytest.approx(0.0)
    clock.now = 165.0
    assert limiter.delay() == 0 and len(limiter._starts) == 1


def test_tpm_counts_tokens_of_replies_and_waits_until_enough_of_them_left() -> None:
    clock = Clock()
    limiter = RateLimiter(tpm=1000, clock=clock)
    limiter.spent(600)
    clock.now = 110.0
    assert limiter.delay() == 0  # under the budget: the next request may go
    limiter.spent(600)
    assert limiter.delay() == pytest.approx(50.0)  # 1200 >= 1000 until the first 600 leave at 160
    clock.now = 160.0
    assert limiter.delay() == 0 and limiter._token_sum == 600


def _record(item_id: object, sha: str, status: str = "ok", agent: str = "A") -> str:
    result = ItemResult(id=item_id, line=0, status=status, input_sha256=sha, agent_sha256=agent)  # type: ignore[arg-type]
    return json.dumps(result.as_record()) + "\n"


INDEX = InputIndex({"1": (1, "h1"), "2": (2, "h2"), "3": (3, "h3")})


def test_resume_drops_a_torn_last_line_and_failed_lines_atomically(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    path.write_text(_record(2, "h2") + _record(1, "h1", "error") + _record(3, "h3")[:25], encoding="utf-8")
    out = OutFile(path)
    out.resume(INDEX, agent_sha256="A")
    assert out.done == {"2": "h2"} and out.kept == 1 and out.dropped == 1
    assert path.read_text(encoding="utf-8") == _record(2, "h2")
    assert not (tmp_path / "out.jsonl.tmp").exists()


def test_resume_refuses_a_line_that_is_not_json_in_the_middle(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    path.write_text("hello\n" + _record(1, "h1"), encoding="utf-8")
    with pytest.raises(ConfigError, match="line 1: not a line of a batch output"):
        OutFile(path).resume(INDEX, agent_sha256="A")
    assert path.read_text(encoding="utf-8").startswith("hello\n")


def test_resume_keeps_one_ok_line_per_item(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    path.write_text(_record(1, "h1") + _record(1, "h1") + _record(2, "h2"), encoding="utf-8")
    out = OutFile(path)
    out.resume(INDEX, agent_sha256="A")
    assert path.read_text(encoding="utf-8") == _record(1, "h1") + _record(2, "h2")


def test_put_in_order_sorts_by_the_input_line_and_leaves_an_ordered_file_alone(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    path.write_text(_record(3, "h3") + _record(1, "h1") + _record(2, "h2"), encoding="utf-8")
    out = OutFile(path)
    assert out.put_in_order(INDEX) is True
    assert [json.loads(line)["id"] for line in path.read_text(encoding="utf-8").splitlines()] == [1, 2, 3]
    mtime = path.stat().st_mtime_ns
    assert out.put_in_order(INDEX) is False and path.stat().st_mtime_ns == mtime


def test_an_items_hash_covers_its_input_and_vars_but_not_its_id() -> None:
    first, second, third = parse_lines(
        ['{"id": "a", "input": "x", "vars": {"k": 1}}', '"x"', '{"input": "x", "vars": {"k": 2}}']
    )
    assert first.sha256 == input_hash("x", {"k": 1}) and second.sha256 == input_hash("x", {})
    assert len({first.sha256, second.sha256, third.sha256}) == 3
    assert check_unique(iter([first, second, third])) == 3


def test_a_deeply_nested_line_is_a_malformed_item_not_a_crash() -> None:
    (item,) = parse_lines(["[" * 100_000 + "]" * 100_000])
    assert item.problem is not None and item.problem.startswith("input line 1:")


def test_a_batch_opens_one_model_client_per_eight_items_and_requests_go_to_the_least_busy() -> None:
    import asyncio
    import dataclasses

    from runner.agentfile import load_agent
    from runner.batch.limiter import LimitedModel
    from runner.batch.pooled_model import PooledModel, batch_model
    from runner.models.base import Request
    from runner.runtime.settings import RuntimeSettings
    from runner.testing import ScriptedModel, text

    config = load_agent(Path(__file__).resolve().parents[2] / "examples" / "weather.yaml")
    settings = RuntimeSettings(write_transcript=False)
    pooled = batch_model(config, settings, concurrency=32)
    assert isinstance(pooled, PooledModel) and len(pooled.models) == 4
    assert len({id(model) for model in pooled.models}) == 4
    assert batch_model(config, settings, concurrency=8) is None  # the runtime's own model
    recording = dataclasses.replace(settings, record=Path("/tmp/never-written.jsonl"))
    assert batch_model(config, recording, concurrency=32) is None  # one cassette, one model
    limited = batch_model(config, settings, concurrency=4, limiter=RateLimiter(rpm=5))
    assert isinstance(limited, LimitedModel)

    first, second = ScriptedModel([text("a"), text("c")]), ScriptedModel([text("b")])
    pool = PooledModel([first, second])
    request = Request(model="m", messages=[{"role": "user", "content": "x"}])

    async def both() -> list[Any]:
        async def streamed() -> Any:
            async for event in pool.stream(request):
                await asyncio.sleep(0.05)  # still busy while the second request starts
                last = event
            return last.reply.content

        return list(await asyncio.gather(streamed(), pool.complete(request)))

    results = asyncio.run(both())
    assert results[0] == "a" and results[1].content == "b"
    assert len(first.requests) == 1 and len(second.requests) == 1


def test_an_items_result_travels_as_json_and_comes_back_equal() -> None:
    import pickle

    (item,) = parse_lines(['{"id": "q", "input": "x", "vars": {"k": [1, 2]}}'])
    assert pickle.loads(pickle.dumps(item)) == item
    result = ItemResult(id="q", line=1, status="ok", answer="a", output={"k": [1]}, usage={"total_tokens": 3})
    record = json.loads(json.dumps(result.as_record()))
    assert "interrupted" not in record
    assert ItemResult.from_record({**record, "later_field": 1}) == result


def test_the_progress_shows_a_phase_while_the_event_loop_is_held() -> None:
    import io
    import time

    from runner.batch import BatchStats
    from runner.cli.batch_progress import BatchProgress

    stats, err = BatchStats(), io.StringIO()
    progress = BatchProgress(stats, total=3, err=err, phase_interval_s=0.3)
    stats.enter("starting a local Ray")
    progress.start()  # a thread: nothing here yields to an event loop, as ray.init does not
    try:
        deadline = time.monotonic() + 10
        while err.getvalue().count("batch: starting a local Ray ... ") < 2:
            assert time.monotonic() < deadline, err.getvalue()
            time.sleep(0.05)  # blocking, like ray.init
    finally:
        progress.stop()
    assert err.getvalue().startswith("batch: starting a local Ray ... 0 s\n")
