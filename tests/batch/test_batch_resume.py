"""Resuming `runner batch`: what a rerun keeps, what it runs again, what it refuses; budgets; kills."""

from __future__ import annotations

import json
import os
import re
import signal
import time
from pathlib import Path
from typing import Any

from runner.store.transcript import read_transcript
from tests.batch.helpers import adder, make_agent, read_out, write_inputs
from tests.cli_run.conftest import Cli


def _wait_for_lines(path: Path, count: int, timeout_s: float = 30) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists():
            lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.endswith("}")]
            if len(lines) >= count:
                return [json.loads(line) for line in lines]
        time.sleep(0.02)
    raise AssertionError(f"{path} never had {count} lines")


def test_a_rerun_keeps_ok_lines_runs_the_failed_and_ends_in_order_one_line_each(
    cli: Cli, serve: Any, tmp_path: Path
) -> None:
    broken = {"on": True}
    inner = adder()

    def step(body: dict[str, Any]) -> dict[str, Any]:
        if broken["on"] and body["messages"][-1]["content"] == "b":
            return {"status": 400, "error": "not today"}
        return inner(body)

    server = serve(step, repeat=True)
    agent = make_agent(tmp_path / "a", server.base_url)
    inputs = write_inputs(tmp_path / "in.jsonl", ["a", "b", "c", "d"])
    assert cli("batch", str(agent), str(inputs), "-o", "out.jsonl").returncode == 1
    first = read_out(tmp_path / "out.jsonl")
    assert [line["status"] for line in first] == ["ok", "error", "ok", "ok"]  # items after a failed one
    broken["on"] = False
    before = len(server.requests)
    result = cli("batch", str(agent), str(inputs), "-o", "out.jsonl")
    assert result.returncode == 0, result.stderr
    assert "3 items done before are kept, 1 lines dropped to run again" in result.stderr
    lines = read_out(tmp_path / "out.jsonl")
    assert [(line["id"], line["status"]) for line in lines] == [(1, "ok"), (2, "ok"), (3, "ok"), (4, "ok")]
    assert lines[0] == first[0] and lines[2] == first[2]  # kept as they were
    assert len(server.requests) - before == 2  # only item 2 ran again
    # a third run has nothing to do and changes nothing
    text = (tmp_path / "out.jsonl").read_text(encoding="utf-8")
    assert cli("batch", str(agent), str(inputs), "-o", "out.jsonl").returncode == 0
    assert (tmp_path / "out.jsonl").read_text(encoding="utf-8") == text


def test_unordered_leaves_lines_in_the_order_items_finished(cli: Cli, serve: Any, tmp_path: Path) -> None:
    def step(body: dict[str, Any]) -> dict[str, Any]:
        slow = body["messages"][-1]["content"] == "slow"
        return {"content": body["messages"][-1]["content"], "delay_s": 1.0 if slow else 0.0}

    server = serve(step, repeat=True)
    agent = make_agent(tmp_path / "a", server.base_url)
    inputs = write_inputs(tmp_path / "in.jsonl", ["slow", "fast"])
    result = cli("batch", str(agent), str(inputs), "-o", "u.jsonl", "--unordered", "-c", "2")
    assert result.returncode == 0
    assert [line["answer"] for line in read_out(tmp_path / "u.jsonl")] == ["fast", "slow"]
    assert cli("batch", str(agent), str(inputs), "-o", "o.jsonl", "-c", "2").returncode == 0
    assert [line["answer"] for line in read_out(tmp_path / "o.jsonl")] == ["slow", "fast"]


def test_an_output_file_of_another_agent_or_input_is_refused_unless_force(
    cli: Cli, serve: Any, tmp_path: Path
) -> None:
    server = serve(adder(), repeat=True)
    agent = make_agent(tmp_path / "a", server.base_url)
    other = make_agent(tmp_path / "b", server.base_url, "limits:\n  max_steps: 9\n")
    inputs = write_inputs(tmp_path / "in.jsonl", ["a", "b"])
    assert cli("batch", str(agent), str(inputs), "-o", "out.jsonl").returncode == 0
    text = (tmp_path / "out.jsonl").read_text(encoding="utf-8")
    result = cli("batch", str(other), str(inputs), "-o", "out.jsonl")
    assert result.returncode == 2
    assert "out.jsonl is the output of another batch: line 1: written by another agent file" in result.stderr
    assert "--force" in result.stderr
    assert (tmp_path / "out.jsonl").read_text(encoding="utf-8") == text  # untouched
    changed = write_inputs(tmp_path / "in2.jsonl", ["a", "B"])
    result = cli("batch", str(agent), str(changed), "-o", "out.jsonl")
    assert (
        result.returncode == 2
        and "line 2: id 2 ended ok with another input (input line 2 changed since)" in result.stderr
    )
    fewer = write_inputs(tmp_path / "in3.jsonl", [{"id": "z", "input": "a"}])
    result = cli("batch", str(agent), str(fewer), "-o", "out.jsonl")
    assert result.returncode == 2 and "id 1 is not in the input" in result.stderr
    result = cli("batch", str(other), str(inputs), "-o", "out.jsonl", "--force")
    assert result.returncode == 0, result.stderr
    lines = read_out(tmp_path / "out.jsonl")
    assert [line["id"] for line in lines] == [1, 2] and lines[0]["agent_sha256"] != json.loads(
        text.split("\n")[0]
    )["agent_sha256"]


def test_a_spent_token_budget_starts_no_new_item_exit_3_and_a_rerun_continues(
    cli: Cli, serve: Any, tmp_path: Path
) -> None:
    server = serve(adder(), repeat=True)
    agent = make_agent(tmp_path / "a", server.base_url)
    inputs = write_inputs(tmp_path / "in.jsonl", ["a", "b", "c", "d", "e"])
    result = cli(
        "batch", str(agent), str(inputs), "-o", "out.jsonl", "-c", "1", "--max-tokens", "150", "--json"
    )
    assert result.returncode == 3, result.stderr
    lines = read_out(tmp_path / "out.jsonl")
    per_item = lines[0]["usage"]["total_tokens"]
    assert 0 < per_item < 150 <= per_item * 2
    assert [line["status"] for line in lines] == ["ok", "ok"]  # the second started under budget, finished
    assert "batch stopped: its budget was spent (--max-tokens 150); 3 items not started" in result.stderr
    summary = json.loads(result.stdout)
    # issue 23 item 21: one token total in the summary (the stop's own count was a second one)
    summary_lines = result.stderr[result.stderr.rindex("batch: 5 items") :]
    assert re.findall(r"(\d+) tokens", summary_lines) == [str(summary["tokens"])]
    assert summary["not_started"] == 3 and summary["exit_code"] == 3 and summary["stopped"]
    result = cli("batch", str(agent), str(inputs), "-o", "out.jsonl", "-c", "1")
    assert result.returncode == 0
    assert [line["id"] for line in read_out(tmp_path / "out.jsonl")] == [1, 2, 3, 4, 5]


def test_ctrl_c_cancels_running_items_keeps_their_transcripts_and_a_rerun_completes(
    cli: Cli, serve: Any, tmp_path: Path
) -> None:
    server = serve(adder(delay_s=0.4), repeat=True)
    agent = make_agent(tmp_path / "a", server.base_url)
    items = [f"item {n}" for n in range(12)]
    inputs = write_inputs(tmp_path / "in.jsonl", items)
    out = tmp_path / "out.jsonl"
    process = cli.popen("batch", str(agent), str(inputs), "-o", str(out), "-c", "3")
    _wait_for_lines(out, 1)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 130, stderr
    assert "batch interrupted" in stderr
    done = read_out(out)
    assert 1 <= len(done) < 12 and {line["status"] for line in done} == {"ok"}
    written = {line["session_id"] for line in done}
    interrupted = [p for p in cli.transcripts() if p.stem not in written]
    assert interrupted  # items that were running have transcripts too, whole and readable
    for path in interrupted:
        transcript = read_transcript(path)
        assert transcript.header["agent"] == "adder"
        assert all(line.endswith("}") for line in path.read_text(encoding="utf-8").splitlines())
    result = cli("batch", str(agent), str(inputs), "-o", str(out), "-c", "3")
    assert result.returncode == 0, result.stderr
    lines = read_out(out)
    assert [line["id"] for line in lines] == list(range(1, 13))
    assert [line["answer"] for line in lines] == [f"ANSWER {item}: 5" for item in items]


def test_kill_9_mid_batch_then_a_rerun_ends_with_one_line_per_item(
    cli: Cli, serve: Any, tmp_path: Path
) -> None:
    server = serve(adder(delay_s=0.2), repeat=True)
    agent = make_agent(tmp_path / "a", server.base_url)
    items = [{"id": f"k{n}", "input": f"item {n}"} for n in range(16)]
    inputs = write_inputs(tmp_path / "in.jsonl", items)
    out = tmp_path / "out.jsonl"
    process = cli.popen("batch", str(agent), str(inputs), "-o", str(out), "-c", "4")
    _wait_for_lines(out, 3)
    os.kill(process.pid, signal.SIGKILL)
    process.communicate(timeout=30)
    survived = read_out(out)
    assert 3 <= len(survived) < 16
    result = cli("batch", str(agent), str(inputs), "-o", str(out), "-c", "4")
    assert result.returncode == 0, result.stderr
    lines = read_out(out)
    assert [line["id"] for line in lines] == [f"k{n}" for n in range(16)]
    assert all(line["status"] == "ok" for line in lines)
    kept = {line["id"]: line for line in lines}
    assert all(kept[line["id"]] == line for line in survived)  # what survived the kill was kept
