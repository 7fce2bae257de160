"""The ``files`` toolset against hostile files and patterns: bounded time, bounded memory, a free loop.

Issue 12: ``files_search`` with ``(a+)+$`` over a file the model wrote held the interpreter (a 10 s
tool timeout returned after 61 s), and ``files_read`` of a 400 MB single-line file used 881 MB.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from typing import Any, TypeVar

import pytest

import toolsets._files_read as files_read
from runner.errors import ToolError
from runner.tools.base import RunContext, Tool
from runner.tools.threads import TOOL_THREADS
from toolsets._files_search import MAX_PIECE_BYTES, compile_query

T = TypeVar("T")
MB = 1 << 20
# A pattern RE2 runs slowly (its DFA gives up; ~10 µs a byte here): stands in for any long search.
SLOW_PATTERN = "(?i)a[ab]{999}c"


def write_repeated(path: Path, block: bytes, total: int, tail: bytes = b"") -> None:
    """``total`` bytes of ``block`` repeated (a few big writes), then ``tail``."""
    with path.open("wb") as handle:
        whole, rest = divmod(total, len(block))
        for _ in range(whole):
            handle.write(block)
        handle.write(block[:rest] + tail)


def write_random_ab(path: Path, size: int) -> None:
    """One line of ``size`` random a/b bytes: slow for ``SLOW_PATTERN``, never a match."""
    table = bytes(ord("a") + (n & 1) for n in range(256))
    path.write_bytes(random.Random(12).randbytes(size).translate(table))


class Ticker:
    """An asyncio task ticking every 50 ms; ``max_gap`` is the longest the loop kept it waiting."""

    def __init__(self) -> None:
        self.ticks = 0
        self.max_gap = 0.0

    async def run(self) -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(0.05)
            now = time.monotonic()
            self.max_gap = max(self.max_gap, now - last)
            self.ticks += 1
            last = now


@pytest.fixture
async def ticker() -> AsyncIterator[Ticker]:
    """A ticker running for the test."""
    ticker = Ticker()
    task = asyncio.create_task(ticker.run())
    yield ticker
    task.cancel()


async def timed(call: Awaitable[T]) -> tuple[T | BaseException, float]:
    """The outcome of ``call`` (its result or exception) and how long it took."""
    started = time.monotonic()
    try:
        outcome: T | BaseException = await call
    except (ToolError, TimeoutError) as exc:
        outcome = exc
    return outcome, time.monotonic() - started


async def wait_for_idle_workers(baseline: int, within_s: float) -> float:
    """Seconds until the tool worker threads are back to ``baseline`` calls; fails past ``within_s``."""
    started = time.monotonic()
    while TOOL_THREADS.running > baseline:
        assert time.monotonic() - started < within_s, "the abandoned search kept running"
        await asyncio.sleep(0.02)
    return time.monotonic() - started


@pytest.fixture
async def tools(load_builtin: Any) -> dict[str, Tool]:
    """The file tools with root ``tmp_path/ws`` and a 2 s search limit."""
    loaded: dict[str, Tool] = await load_builtin("files", {"root": "ws", "search_timeout_s": 2})
    return loaded


async def test_the_backtracking_attack_answers_at_once_and_the_loop_keeps_ticking(
    tools: dict[str, Tool], run_ctx: RunContext, tmp_path: Path, ticker: Ticker
) -> None:
    # With Python's re, (a+)+$ over 30 a's and a '!' already takes minutes; this line has 4 million
    # (under the 5 MB a folder search reads, so the whole folder is searched).
    write_repeated(tmp_path / "ws" / "attack.txt", b"a" * MB, 4 * MB, tail=b"!")
    (tmp_path / "ws" / "ok.txt").write_text("aaaa\nb\n")
    outcome, elapsed = await timed(tools["files_search"].call({"query": "(a+)+$", "regex": True}, run_ctx))
    assert outcome == "ok.txt:1: aaaa"
    assert elapsed < 10, f"took {elapsed:.1f} s"  # the tool timeout; RE2 needs well under 1 s
    assert ticker.max_gap < 1.0, f"the event loop stalled for {ticker.max_gap:.2f} s"


async def test_a_slow_search_stops_at_search_timeout_with_an_error_and_the_loop_stays_free(
    tools: dict[str, Tool], run_ctx: RunContext, tmp_path: Path, ticker: Ticker
) -> None:
    write_random_ab(tmp_path / "ws" / "slow.txt", 4 * MB)  # ~40 s of RE2 work: only the limit ends it
    baseline = TOOL_THREADS.running
    outcome, elapsed = await timed(
        tools["files_search"].call({"query": SLOW_PATTERN, "regex": True, "path": "slow.txt"}, run_ctx)
    )
    assert isinstance(outcome, ToolError), outcome
    assert str(outcome).startswith(
        "files_search stopped after 2 s (the files toolset's search_timeout_s limit) while searching slow.txt"
    )
    assert 1.9 < elapsed < 2 + 5, f"took {elapsed:.1f} s"
    await wait_for_idle_workers(baseline, within_s=5)
    assert ticker.ticks >= 10 and ticker.max_gap < 1.0, (
        f"{ticker.ticks} ticks, longest gap {ticker.max_gap:.2f} s"
    )


async def test_a_tool_timeout_ends_the_call_on_time_and_the_abandoned_search_stops(
    load_builtin: Any, run_ctx: RunContext, tmp_path: Path, ticker: Ticker
) -> None:
    tools = await load_builtin("files", {"root": "ws", "search_timeout_s": 600})
    write_random_ab(tmp_path / "ws" / "slow.txt", 4 * MB)
    baseline = TOOL_THREADS.running
    call = tools["files_search"].call({"query": SLOW_PATTERN, "regex": True, "path": "slow.txt"}, run_ctx)
    outcome, elapsed = await timed(asyncio.wait_for(call, timeout=1.0))  # what the executor does
    assert isinstance(outcome, TimeoutError)
    assert elapsed < 1 + 4, f"a 1 s timeout returned after {elapsed:.1f} s"
    # the worker sees the call was abandoned within one bounded piece, not after 600 s
    await wait_for_idle_workers(baseline, within_s=10)
    assert ticker.max_gap < 1.0


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("(?=x)y", "invalid perl operator: (?=. files_search uses RE2 syntax"),
        (r"(a)\1", "invalid escape sequence: \\1"),
        ("(?:a{1000}){1000}", "invalid repetition size"),
        ("x\udcff", "contains a lone surrogate"),
        ("|".join(f"{c}[ab]{{999}}" for c in "cdefghijklmnopqrstuvwxyz"), "is too large"),
    ],
)
async def test_patterns_re2_cannot_bound_are_refused_with_a_clear_error(
    tools: dict[str, Tool], run_ctx: RunContext, query: str, message: str
) -> None:
    with pytest.raises(ToolError, match=re.escape(message)):
        await tools["files_search"].call({"query": query, "regex": True}, run_ctx)


def test_anchors_and_word_boundaries_mean_the_line_across_piece_edges(tmp_path: Path) -> None:
    piece = compile_query("x", regex=True, case_sensitive=True).piece_bytes
    assert piece == MAX_PIECE_BYTES
    path = tmp_path / "long.txt"
    path.write_bytes(b"a" * piece + b"b tail\n" + b"c" * piece + b"\nnext line end\n")

    def found(query: str) -> list[tuple[int, str]]:
        matcher = compile_query(query, regex=True, case_sensitive=True)
        return list(matcher.matching_lines(path, deadline=time.monotonic() + 30, stop=None))

    assert found("^b") == []  # 'b' starts the second piece, not the line
    assert found("a$") == []  # 'a' ends the first piece, not the line
    assert found(r"\bb\b") == []  # 'ab' around the edge: no boundary before 'b'
    assert found("b tail$") == [(1, "...b tail")]  # found in the second piece, on line 1
    assert found("c$") == [(2, "c" * 1024)]
    assert found("^next line end$") == [(3, "next line end")]


async def test_read_decodes_across_chunk_edges_into_valid_text(
    tools: dict[str, Tool], run_ctx: RunContext, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    raw = (
        "é€😀 line one\n".encode()
        + b"bad \xff byte, encoded surrogate \xed\xb3\xbf, cut \xe2\x82\n"
        + "end ✓".encode()
    )
    (tmp_path / "ws" / "mixed.txt").write_bytes(raw)
    expected = raw.decode("utf-8", errors="replace")
    for chunk in (1, 2, 3, 5, 4096):
        monkeypatch.setattr(files_read, "CHUNK_BYTES", chunk)
        text = await tools["files_read"].call({"path": "mixed.txt"}, run_ctx)
        assert text == expected, chunk
        text.encode("utf-8")  # valid text: no lone surrogates
        ranged = await tools["files_read"].call(
            {"path": "mixed.txt", "start_line": 2, "end_line": 3}, run_ctx
        )
        assert ranged == expected.split("\n", 1)[1] + "\n[lines 2-3 of 3]"


async def test_read_keeps_to_tool_output_chars_so_its_note_survives(
    tools: dict[str, Tool], tmp_path: Path
) -> None:
    (tmp_path / "ws" / "rows.txt").write_text("".join(f"row {n:04d}\n" for n in range(5000)))
    ctx = RunContext(session_id="s1", agent="tester", workspace=tmp_path, output_chars=1000)
    text = await tools["files_read"].call({"path": "rows.txt"}, ctx)
    assert len(text) <= 1000
    last = int(text.split("showing lines 1-")[1].split(" ")[0])
    assert text.endswith(f"of 5000; read on with start_line={last + 1}]")
    assert f"row {last - 1:04d}\n\n[cut at 700 characters (the file is 45000 bytes)" in text


async def test_search_output_keeps_to_tool_output_chars_and_notes_skipped_big_files(
    tools: dict[str, Tool], tmp_path: Path
) -> None:
    (tmp_path / "ws" / "hits.txt").write_text("hit here\n" * 150)
    write_repeated(tmp_path / "ws" / "huge.log", b"hit " * 1024, 6 * MB)
    ctx = RunContext(session_id="s1", agent="tester", workspace=tmp_path, output_chars=1000)
    found = await tools["files_search"].call({"query": "hit"}, ctx)
    assert len(found) <= 1000
    lines = found.splitlines()
    assert lines[0] == "hits.txt:1: hit here" and lines[-2].endswith(
        "more matches not shown; narrow with path, pattern or a longer query]"
    )
    assert lines[-1] == "[1 file over 5000000 bytes not searched: huge.log; give one as path to search it]"
    named = await tools["files_search"].call({"query": "hit", "path": "huge.log"}, ctx)
    assert named.startswith("huge.log:1: hit hit")


_MEMORY_PROBE = textwrap.dedent(
    """
    import asyncio, json, resource, sys
    from pathlib import Path
    from runner.tools.base import RunContext
    from runner.tools.builtin import ToolsetContext
    from toolsets import files

    base = Path(sys.argv[1])
    options = {"root": "ws", "max_read_chars": 50000, "allow_write": False, "max_results": 200,
               "search_timeout_s": 60}
    tools = {tool.name: tool for tool in files.build(options, ToolsetContext(base_dir=base))}
    ctx = RunContext(session_id="s", agent="a", workspace=base, output_chars=20000)
    import re2  # loaded before the baseline: its code is not what is measured
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    async def main():
        read = await tools["files_read"].call({"path": "huge.txt"}, ctx)
        miss = await tools["files_search"].call({"query": "needle", "path": "huge.txt"}, ctx)
        hit = await tools["files_search"].call({"query": "b$", "regex": True, "path": "huge.txt"}, ctx)
        return read, miss, hit

    read, miss, hit = asyncio.run(main())
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    print(json.dumps({"grown_kb": grown, "read": read[-400:], "read_len": len(read), "miss": miss,
                      "hit": hit[:60]}))
    """
)


@pytest.mark.slow
def test_a_400_mb_single_line_file_is_read_and_searched_in_bounded_memory(tmp_path: Path) -> None:
    huge = tmp_path / "ws" / "huge.txt"
    huge.parent.mkdir()
    size = 400 * 1000 * 1000
    try:
        write_repeated(huge, b"a" * (4 * MB), size - 1, tail=b"b")
        probe = subprocess.run(
            [sys.executable, "-c", _MEMORY_PROBE, str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=50,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
    finally:
        huge.unlink(missing_ok=True)
    assert probe.returncode == 0, probe.stderr
    report = json.loads(probe.stdout)
    assert report["grown_kb"] < 100 * 1024, f"peak RSS grew by {report['grown_kb'] // 1024} MB"
    assert report["read_len"] <= 20000
    assert report["read"].endswith(
        f"[cut at 19700 characters (the file is {size} bytes): line 1 alone is longer, only its "
        "beginning is shown (files_search finds text in the rest)]"
    )
    assert report["miss"] == "No matches for 'needle' in huge.txt."
    assert report["hit"] == "huge.txt:1: ..." + "a" * 45


async def test_when_the_results_are_full_the_time_limit_only_stops_the_counting(
    load_builtin: Any, run_ctx: RunContext, tmp_path: Path
) -> None:
    tools = await load_builtin("files", {"root": "ws", "search_timeout_s": 1, "max_results": 2})
    (tmp_path / "ws" / "a.txt").write_text("ab\n" * 3)
    write_random_ab(tmp_path / "ws" / "b.txt", 4 * MB)  # slow for the pattern: the limit strikes here
    found = await tools["files_search"].call({"query": SLOW_PATTERN + "|^ab$", "regex": True}, run_ctx)
    assert found.splitlines() == [
        "a.txt:1: ab",
        "a.txt:2: ab",
        "[at least 1 more matches not shown; narrow with path, pattern or a longer query]",
    ]
