"""The session timeline page (issue 28): built from a long session's transcript, and its size.

A real session on the scripted model writes a transcript of 100 steps, each a model call with one
tool call (arguments and a result), then the answer; its steps' records are repeated (new call ids,
later times) to N steps, since running N steps for real costs O(N^2) (each request carries the whole
history). The page of that transcript is built
(``runner.report.session_page``: reading, the timeline, the embedded JSON, the HTML) ``--runs``
times. Targets: 5,000 steps in under 2 s and under 5 MB; 20,000 steps in under a few seconds
(5 s here). Run: ``python -m bench.report [--steps 5000 20000] [--runs 5]``.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import statistics
import tempfile
import time
from pathlib import Path

from bench.common import ADD_TOOL_MODULE
from runner.agentfile import load_agent
from runner.runtime import RuntimeSettings
from runner.session import Session, runtime_host
from runner.testing import ScriptedModel, text, tool_call

#: Targets by steps: (seconds to build, megabytes of page).
TARGETS = {5000: (2.0, 5.0), 20000: (5.0, 20.0)}


async def long_session(steps: int, folder: Path) -> Path:
    """A session of ``steps`` tool-calling steps; the path of its transcript."""
    (folder / "bench_report_tools.py").write_text(ADD_TOOL_MODULE)
    path = folder / "agent.yaml"
    path.write_text(
        "version: 1\nname: long\nmodel: openai/scripted\nprompts:\n  system: You add.\n"
        f"tools:\n  - python: bench_report_tools\nlimits:\n  max_steps: {steps + 1}\n"
        f"  max_tool_calls: {steps + 1}\n"
    )
    script = [tool_call("add", a=n, b=1) for n in range(steps)] + [text(f"done after {steps} steps")]
    host = runtime_host(load_agent(path), RuntimeSettings(home=folder / "home"), model=ScriptedModel(script))
    async with await Session.open(host) as session:
        await session.run(["add them all"])
        sid = session.session_id
    await host.aclose()
    return folder / "home" / "sessions" / f"{sid}.jsonl"


def stretched(source: Path, steps: int, target: Path) -> Path:
    """``source``'s transcript with its step records repeated until it holds ``steps`` steps."""
    records = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines()]
    first = next(
        i for i, r in enumerate(records) if r.get("role") == "assistant" or r.get("event") == "tool_start"
    )
    last = max(i for i, r in enumerate(records) if r.get("role") == "tool")
    head, step, tail = records[:first], records[first : last + 1], records[last + 1 :]
    per = sum(1 for r in step if r.get("role") == "assistant")
    span = dt.datetime.fromisoformat(step[-1]["time"]) - dt.datetime.fromisoformat(step[0]["time"])
    with target.open("w", encoding="utf-8") as out:
        for record in head:
            out.write(json.dumps(record) + "\n")
        for copy in range(-(-steps // per)):
            shift = (span + dt.timedelta(milliseconds=1)) * copy
            for record in step:
                line = json.dumps(
                    {**record, "time": (dt.datetime.fromisoformat(record["time"]) + shift).isoformat()}
                )
                out.write(line.replace('"call_', f'"c{copy}_call_') + "\n")
        for record in tail:
            out.write(
                json.dumps(
                    {**record, "time": (dt.datetime.fromisoformat(record["time"]) + shift).isoformat()}
                )
                + "\n"
            )
    return target


def measure(transcript: Path, runs: int) -> tuple[float, int]:
    """The median seconds to build the page, and its size in bytes."""
    from runner.report import session_page

    samples, size = [], 0
    for _ in range(runs):
        start = time.perf_counter()
        page = session_page(transcript)
        samples.append(time.perf_counter() - start)
        size = len(page.encode("utf-8"))
    return statistics.median(samples), size


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.report", description=__doc__)
    parser.add_argument("--steps", type=int, nargs="+", default=[5000, 20000])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for steps in args.steps:
            folder = Path(tmp) / str(steps)
            folder.mkdir()
            real = asyncio.run(long_session(min(steps, 100), folder))
            transcript = real if steps <= 100 else stretched(real, steps, folder / "long.jsonl")
            seconds, size = measure(transcript, args.runs)
            limit_s, limit_mb = TARGETS.get(steps, (2.0 * steps / 5000, 5.0 * steps / 5000))
            ok = seconds < limit_s and size < limit_mb * 1e6
            failed += not ok
            print(
                f"page of {steps:,} steps (median of {args.runs}): {seconds:.2f} s, {size / 1e6:.2f} MB "
                f"(transcript {transcript.stat().st_size / 1e6:.2f} MB)  {'ok' if ok else 'SLOW'}"
            )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
