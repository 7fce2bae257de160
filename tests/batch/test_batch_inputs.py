"""Input lines Python cannot take fail alone (issue 23 item 10), and fix-and-rerun (item 16)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runner.batch import as_items
from runner.batch.inputs import MAX_DEPTH, parse_lines
from tests.batch.helpers import Raw, adder, make_agent, read_out, write_inputs
from tests.cli_run.conftest import Cli

HUGE = "9" * 5000  # past Python's int-to-str limit of 4300 digits: int() raises ValueError


def test_a_line_with_a_5000_digit_id_fails_alone_and_the_batch_writes_its_file(
    cli: Cli, serve: Any, tmp_path: Path
) -> None:
    server = serve(adder(), repeat=True)
    agent = make_agent(tmp_path / "a", server.base_url)
    inputs = write_inputs(tmp_path / "in.jsonl", ["first", Raw(f'{{"id": {HUGE}, "input": "x"}}'), "last"])
    result = cli("batch", str(agent), str(inputs), "-o", "out.jsonl")
    assert result.returncode == 1, result.stderr
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr
    lines = read_out(tmp_path / "out.jsonl")
    assert [(line["id"], line["status"]) for line in lines] == [(1, "ok"), (2, "error"), (3, "ok")]
    assert lines[1]["error"].startswith("input line 2: not JSON (ValueError: Exceeds the limit (4300 digits)")


def test_every_line_python_cannot_take_is_an_item_failing_with_its_line_number() -> None:
    deep = '{"input": "x", "vars": {"v": ' + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1) + "}}"
    fine = '{"input": "x", "vars": {"v": ' + "[" * (MAX_DEPTH - 2) + "]" * (MAX_DEPTH - 2) + "}}"
    lines = [
        f'{{"id": {HUGE}, "input": "x"}}',  # the int-digits limit, in an id
        f'{{"input": "x", "vars": {{"n": -{HUGE}}}}}',  # and in a value
        '{"input": "x", "vars": {"n": NaN}}',  # not JSON, though Python's decoder takes it
        '{"input": "x", "vars": {"n": -Infinity}}',
        deep,
        "[" * 100_000 + "]" * 100_000,  # deeper than the decoder's stack
        fine,
        '{"input": "x", "vars": {"s": "[[[[' + "[" * 200 + '"}}',  # brackets in a string are text
        '{"id": "\\ud800", "input": "x"}',  # a lone surrogate id: written as U+FFFD, found again
        '{"input": "x", "vars": {"big": 1e999}}',  # JSON allows it; it reads as inf
    ]
    items = list(parse_lines(lines))
    problems = [item.problem for item in items]
    assert [p is None for p in problems] == [False] * 6 + [True] * 4
    assert problems[0] is not None and problems[0].startswith("input line 1: not JSON (ValueError: Exceeds")
    assert problems[2] == "input line 3: not JSON (ValueError: NaN is not a JSON value)"
    assert problems[4] == f"input line 5: nested {MAX_DEPTH + 3} levels deep (at most {MAX_DEPTH})"
    assert problems[5] == f"input line 6: nested 100000 levels deep (at most {MAX_DEPTH})"
    assert items[8].id == "\ufffd"
    assert all(item.sha256 for item in items)


def test_python_values_that_cannot_be_hashed_fail_alone() -> None:
    cycle: dict[str, Any] = {}
    cycle["self"] = cycle
    values = [
        {"id": 10**5000, "input": "x"},
        {"input": "x", "vars": cycle},
        {"input": "x", "vars": {1: object()}},
        "ok",
    ]
    items = list(as_items(values))
    assert [item.problem is None for item in items] == [False, False, False, True]
    assert all(
        item.problem.startswith(f"input line {n}: cannot be used") for n, item in enumerate(items[:3], 1)
    )


def test_fixing_lines_that_did_not_end_ok_and_rerunning_needs_no_force(
    cli: Cli, serve: Any, tmp_path: Path
) -> None:
    server = serve(adder(), repeat=True)  # an input holding "fail" gets a 400
    agent = make_agent(tmp_path / "a", server.base_url)
    inputs = tmp_path / "in.jsonl"
    broken = ["a", Raw('{"input": "b"'), "please fail", Raw('{"id": "k", "input": 5}'), "e"]
    write_inputs(inputs, broken)
    assert cli("batch", str(agent), str(inputs), "-o", "out.jsonl").returncode == 1
    first = read_out(tmp_path / "out.jsonl")
    assert [line["status"] for line in first] == ["ok", "error", "error", "error", "ok"]
    # each line that did not end ok is fixed: its input changes (and line 4's id: it had none before)
    write_inputs(inputs, ["a", {"input": "b"}, "please pass", {"id": "k", "input": "five"}, "e"])
    before = len(server.requests)
    result = cli("batch", str(agent), str(inputs), "-o", "out.jsonl")
    assert result.returncode == 0, result.stderr
    assert "2 items done before are kept, 3 lines dropped to run again" in result.stderr
    lines = read_out(tmp_path / "out.jsonl")
    assert [(line["id"], line["status"]) for line in lines] == [
        (1, "ok"),
        (2, "ok"),
        (3, "ok"),
        ("k", "ok"),
        (5, "ok"),
    ]
    assert [line["answer"] for line in lines[1:4]] == [
        "ANSWER b: 5",
        "ANSWER please pass: 5",
        "ANSWER five: 5",
    ]
    assert lines[0] == first[0] and lines[4] == first[4]  # the ok lines were not run again
    assert len(server.requests) - before == 6  # three items, two model calls each
    # an ok line whose input changed is still another batch's answer: refused unless --force
    write_inputs(inputs, ["A", {"input": "b"}, "please pass", {"id": "k", "input": "five"}, "e"])
    text = (tmp_path / "out.jsonl").read_text(encoding="utf-8")
    refused = cli("batch", str(agent), str(inputs), "-o", "out.jsonl")
    assert refused.returncode == 2 and "line 1: id 1 ended ok with another input" in refused.stderr
    assert (tmp_path / "out.jsonl").read_text(encoding="utf-8") == text
    forced = cli("batch", str(agent), str(inputs), "-o", "out.jsonl", "--force")
    assert forced.returncode == 0, forced.stderr
    assert read_out(tmp_path / "out.jsonl")[0]["answer"] == "ANSWER A: 5"
