"""Workflows (issue 17): a workflow's own overhead per step, parallel steps, a ``for_each`` fan-out.

1. Overhead per step (target: under 5 ms beyond the agent session it runs): a workflow of ``--steps``
   sequential agent steps, against the same number of bare ``Session.run`` calls on one runtime of
   the same agent, one after the other; both write their transcripts (the workflow also its own).
   Rounds interleave the two; the figure is the median over rounds of (workflow - bare) / steps.
2. Four parallel steps whose model answers after 200 ms (target: under 300 ms for the four).
3. A ``for_each`` of 100 items at ``max_parallel: 16``, each answered after ``--latency`` (target:
   16 in flight): the most and the time-weighted mean of agent steps running at once, and the
   wall time against the ideal ceil(100 / 16) x latency.

The scripted server runs in its own process (``--serve-scripted``), so it does not share a GIL with
the workflow; each model id answers after its own delay (``slow``: 200 ms, ``item``: ``--latency``).

Run: ``python -m bench.workflow [--runs 5] [--steps 20] [--latency 0.1]``.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import math
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from runner.agentfile import load_agent
from runner.agentfile.files import load_file
from runner.agentfile.workflow import build_workflow
from runner.runtime.settings import RuntimeSettings
from runner.session import RunOptions, Session, open_runtime
from runner.testing import ScriptedServer
from runner.workflow import WorkflowEngine, open_record

ROOT = Path(__file__).resolve().parent.parent


def serve_scripted(latency_s: float) -> int:
    """``--serve-scripted``: print the base URL, answer until standard input closes."""
    delays = {"slow": 0.2, "item": latency_s}

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        return {"content": "ok", "delay_s": delays.get(str(body["model"]), 0.0)}

    with ScriptedServer(reply) as server:
        print(server.base_url, flush=True)
        sys.stdin.read()
    return 0


def team_file(folder: Path, base_url: str, workflow: str) -> Path:
    lines = ["version: 1", "agents:"]
    for name in ("fast", "slow", "item"):
        lines += [f"  {name}:", f"    model: {{id: openai/{name}, api_base: '{base_url}', retries: 0}}"]
    path = folder / f"team-{abs(hash(workflow))}.yaml"
    path.write_text("\n".join(lines) + "\n" + workflow, encoding="utf-8")
    return path


async def run_workflow(path: Path, settings: RuntimeSettings, on_event: Any = None) -> float:
    document = load_file(path).document
    workflow = build_workflow(document)
    assert workflow is not None
    record = open_record(
        settings.home, workflow=workflow.name, path=path, input="go", variables={}, secrets=frozenset()
    )
    engine = WorkflowEngine(
        path, workflow, settings, input="go", variables={}, record=record, on_event=on_event
    )
    start = time.perf_counter()
    result = await engine.run()
    elapsed = time.perf_counter() - start
    if result.exit_code != 0:
        raise RuntimeError(f"workflow exited {result.exit_code}: {result.notes}")
    return elapsed


async def bare_sessions(path: Path, settings: RuntimeSettings, steps: int) -> float:
    """The floor: ``steps`` sessions of the agent, one after the other, on one runtime opened once."""
    runtime = await open_runtime(load_agent(path, agent="fast"), settings)
    try:
        start = time.perf_counter()
        for n in range(steps):
            async with Session(runtime, options=RunOptions(assume_yes=True)) as session:
                await session.run([f"step {n}"])
        return time.perf_counter() - start
    finally:
        await runtime.aclose()


def overhead(folder: Path, base_url: str, settings: RuntimeSettings, runs: int, steps: int) -> float:
    body = "workflow:\n" + "".join(
        f"  - {{id: s{n}, agent: fast, input: 'step {n}'}}\n" for n in range(steps)
    )
    path = team_file(folder, base_url, body)
    asyncio.run(run_workflow(path, settings))  # warm: imports, the first connection
    asyncio.run(bare_sessions(path, settings, 2))
    per_step = []
    for _ in range(runs):
        bare = asyncio.run(bare_sessions(path, settings, steps))
        # the workflow opens its runtime inside its run; the floor's is opened before its clock starts
        flow = asyncio.run(run_workflow(path, settings))
        per_step.append((flow - bare) / steps)
    return statistics.median(per_step)


def _keep_duration(ends: dict[str, float], event: dict[str, Any]) -> None:
    if event["type"] == "step_end":
        ends[event["key"]] = event["duration_s"]


def parallel(folder: Path, base_url: str, settings: RuntimeSettings, runs: int) -> float:
    body = "workflow:\n  - id: all\n    parallel:\n" + "".join(
        f"      - {{id: p{n}, agent: slow, input: 'p{n}'}}\n" for n in range(4)
    )
    path = team_file(folder, base_url, body)
    durations = []
    for _ in range(runs):
        ends: dict[str, float] = {}
        asyncio.run(run_workflow(path, settings, functools.partial(_keep_duration, ends)))
        durations.append(ends["all"])
    return statistics.median(durations)


def fan_out(
    folder: Path, base_url: str, settings: RuntimeSettings, latency_s: float
) -> tuple[int, float, float, float]:
    body = (
        "workflow:\n  - id: each\n    for_each: 'range(100) | list'\n    max_parallel: 16\n"
        "    step: {id: one, agent: item, input: 'item {{ item }}'}\n"
    )
    path = team_file(folder, base_url, body)
    running = 0
    most = 0
    area = 0.0
    last = time.perf_counter()

    def on_event(event: dict[str, Any]) -> None:
        nonlocal running, most, area, last
        if event.get("kind") != "agent" or event["type"] not in ("step_start", "step_end"):
            return
        now = time.perf_counter()
        area += running * (now - last)
        last = now
        running += 1 if event["type"] == "step_start" else -1
        most = max(most, running)

    elapsed = asyncio.run(run_workflow(path, settings, on_event))
    ideal = math.ceil(100 / 16) * latency_s
    return most, area / elapsed, elapsed, ideal


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.workflow")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--serve-scripted", action="store_true")
    args = parser.parse_args(argv)
    if args.serve_scripted:
        return serve_scripted(args.latency)
    server = subprocess.Popen(
        [sys.executable, "-m", "bench.workflow", "--serve-scripted", "--latency", str(args.latency)],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None and server.stdin is not None
    base_url = server.stdout.readline().strip()
    failed = 0
    try:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            settings = RuntimeSettings(home=folder / "home")
            per_step = overhead(folder, base_url, settings, args.runs, args.steps)
            ok = per_step < 0.005
            failed |= not ok
            print(
                f"overhead per step (median of {args.runs} x {args.steps} steps)  {per_step * 1000:7.2f} ms  "
                f"{'ok' if ok else 'OVER 5 ms'}"
            )
            four = parallel(folder, base_url, settings, args.runs)
            ok = four < 0.3
            failed |= not ok
            print(
                f"4 parallel steps of 200 ms (median of {args.runs})        {four * 1000:7.1f} ms  "
                f"{'ok' if ok else 'OVER 300 ms'}"
            )
            most, mean, elapsed, ideal = fan_out(folder, base_url, settings, args.latency)
            ok = most == 16
            failed |= not ok
            print(
                f"for_each 100 at max_parallel 16: most in flight {most}, mean {mean:.1f}, "
                f"{elapsed:.2f} s (ideal {ideal:.2f} s)  {'ok' if ok else 'NOT 16'}"
            )
    finally:
        server.stdin.close()
        server.wait(timeout=10)
    return int(failed)


if __name__ == "__main__":
    raise SystemExit(main())
