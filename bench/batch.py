"""``runner batch`` on the local backend (issue 15): throughput, per-item overhead, memory.

Each item is one tool call and an answer: two streamed model calls, each answered by the scripted
server after ``--latency`` (50 ms), so an item takes 100 ms of model time. Ideal throughput at
``--concurrency`` 32 is 32 / 0.1 s = 320 items/s (target: at least 0.8x of it). The scripted server
is a threaded stdlib server; its own capacity is measured in the same run (32 clients sending the
same two requests per item straight to it) and is the floor when it is below the ideal.

Per-item overhead: ``--concurrency 1``, the runner's time per item minus the time of the same two
requests sent straight to the server one after the other (target: under 5 ms).

Memory: peak RSS of the ``runner batch`` process over 1,000 and 10,000 items (bounded: about equal).

Three processes, so none shares a GIL with another: the scripted server, the real ``runner batch``
command (transcripts on, as by default), and this one with the floor's clients.

Ray: ``python -m bench.batch --ray [--ray-address ADDR]`` compares the Ray backend with the local
one at equal concurrency (bench/batch_ray.py).

Run: ``python -m bench.batch [--runs 3] [--items 640] [--concurrency 32] [--latency 0.05] [--big 10000]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.common import ADD_TOOL_MODULE
from runner.testing import ScriptedServer

ROOT = Path(__file__).resolve().parent.parent


def one_tool_call(latency_s: float) -> Any:
    """A script: an ``add`` call, then (after its result) the answer; each after ``latency_s``."""

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        if body["messages"][-1].get("role") == "tool":
            return {"content": "The sum is 5.", "delay_s": latency_s}
        return {"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}], "delay_s": latency_s}

    return reply


def serve_scripted(latency_s: float) -> int:
    """``--serve-scripted``: print the base URL, answer until standard input closes."""
    with ScriptedServer(one_tool_call(latency_s)) as server:
        print(server.base_url, flush=True)
        sys.stdin.read()
    return 0


def start_scripted(latency_s: float) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "bench.batch", "--serve-scripted", "--latency", str(latency_s)],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    return process, process.stdout.readline().strip()


async def floor_run(base_url: str, clients: int, items: int) -> float:
    """Seconds for ``clients`` clients to send ``items`` items' two requests straight to the server."""
    first = {"model": "scripted", "messages": [{"role": "user", "content": "2+3?"}], "stream": True}
    call = {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a":2,"b":3}'}}
    second = {
        **first,
        "messages": [
            *first["messages"],
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "5"},
        ],
    }
    limits = httpx.Limits(max_connections=clients * 2, max_keepalive_connections=clients * 2)
    queue = list(range(items))
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:

        async def post(body: dict[str, Any]) -> None:
            async with client.stream("POST", base_url + "/chat/completions", json=body) as response:
                data = b"".join([chunk async for chunk in response.aiter_raw()])
                if response.status_code != 200 or not data.endswith(b"data: [DONE]\n\n"):
                    raise RuntimeError(f"scripted server answered {response.status_code}: {data[-200:]!r}")

        async def worker() -> None:
            while queue:
                queue.pop()
                await post(first)
                await post(second)

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(clients)))
        return time.perf_counter() - start


def write_agent(folder: Path, base_url: str) -> Path:
    (folder / "tools_mod.py").write_text(ADD_TOOL_MODULE, encoding="utf-8")
    agent = folder / "agent.yaml"
    agent.write_text(
        "version: 1\nname: adder\nmodel:\n  id: openai/scripted\n"
        f"  api_base: {base_url}\n  api_key: ${{BENCH_KEY:-sk-none}}\n  retries: 0\n"
        "prompts:\n  system: You add numbers.\ntools:\n  - python: tools_mod\n",
        encoding="utf-8",
    )
    return agent


def runner_batch(
    folder: Path, agent: Path, items: int, concurrency: int, extra: tuple[str, ...] = ()
) -> tuple[float, int, dict[str, Any]]:
    """One ``runner batch`` run: the batch's own seconds, the process's peak RSS (KiB), its summary."""
    inputs = folder / f"in-{items}.jsonl"
    inputs.write_text("".join(json.dumps(f"item {n}: 2+3?") + "\n" for n in range(items)), encoding="utf-8")
    out = folder / "out.jsonl"
    out.unlink(missing_ok=True)
    env = {**os.environ, "RUNNER_HOME": str(folder / "home"), "RUNNER_FAST_PATH": "1"}
    argv = [str(Path(sys.executable).parent / "runner"), "batch", str(agent), str(inputs), "-o", str(out)]
    process = subprocess.Popen(
        [*argv, "--concurrency", str(concurrency), "--json", *extra],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    stdout, stderr = process.stdout.read(), process.stderr.read()  # type: ignore[union-attr]
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise RuntimeError(f"runner batch exited {process.returncode}: {stderr[-2000:]}")
    summary = json.loads(stdout)
    if summary["ok"] != items:
        raise RuntimeError(f"runner batch: {summary}")
    with out.open(encoding="utf-8") as lines:
        summary["item_median_s"] = statistics.median(json.loads(line)["duration_s"] for line in lines)
    return float(summary["duration_s"]), int(usage.ru_maxrss), summary


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.batch")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--items", type=int, default=640)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--serial-items", type=int, default=40)
    parser.add_argument("--big", type=int, default=10_000)
    parser.add_argument("--serve-scripted", action="store_true")
    parser.add_argument("--ray", action="store_true", help="the Ray backend against the local one")
    parser.add_argument("--ray-address", help="an existing cluster (default: one started here)")
    args = parser.parse_args(argv)
    if args.serve_scripted:
        return serve_scripted(args.latency)
    server, base_url = start_scripted(args.latency)
    try:
        if args.ray:
            from bench.batch_ray import measure_ray

            return measure_ray(args, base_url)
        return _measure(args, base_url)
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(timeout=10)


def _measure(args: argparse.Namespace, base_url: str) -> int:
    items, concurrency = args.items, args.concurrency
    ideal = concurrency / (2 * args.latency)
    floors, runs, serial_floor, serial_runs, serial_batch = [], [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        agent = write_agent(folder, base_url)
        runner_batch(folder, agent, 50, concurrency)  # warm-up (page cache, .pyc files)
        for _ in range(args.runs):  # interleaved
            floors.append(items / asyncio.run(floor_run(base_url, concurrency, items)))
            runs.append(items / runner_batch(folder, agent, items, concurrency)[0])
            serial_floor.append(asyncio.run(floor_run(base_url, 1, args.serial_items)) / args.serial_items)
            seconds, _, summary = runner_batch(folder, agent, args.serial_items, 1)
            serial_runs.append(summary["item_median_s"])
            serial_batch.append(seconds / args.serial_items)
        floor, rate = statistics.median(floors), statistics.median(runs)
        target = min(ideal, floor)
        overhead_ms = (statistics.median(serial_runs) - statistics.median(serial_floor)) * 1000
        print(
            f"## runner batch, local backend: {items} items x 2 model calls of {args.latency * 1000:.0f} ms, "
            f"--concurrency {concurrency} (median of {args.runs})"
        )
        print(f"ideal (concurrency / item latency)           {ideal:8.1f} items/s")
        print(
            f"scripted server's capacity (same clients)   {floor:8.1f} items/s {floor / ideal:5.2f}x of ideal"
        )
        ok_rate = rate >= 0.8 * target
        print(
            f"runner batch                                 {rate:8.1f} items/s {rate / ideal:5.2f}x of ideal,"
            f" {rate / floor:5.2f}x of the server  {'ok' if ok_rate else 'UNDER 0.8x'}"
        )
        ok_overhead = overhead_ms < 5
        item_ms, floor_ms = statistics.median(serial_runs) * 1000, statistics.median(serial_floor) * 1000
        print(
            f"per-item overhead (--concurrency 1)          {overhead_ms:8.2f} ms  "
            f"(an item {item_ms:.1f} ms, its two requests straight to the server {floor_ms:.1f} ms)  "
            + ("ok" if ok_overhead else "OVER 5 ms")
        )
        whole_ms = statistics.median(serial_batch) * 1000 - floor_ms
        print(
            f"  over the whole batch's time               {whole_ms:8.2f} ms (with opening the runtime once)"
        )
        rss = {}
        for count in (1000, args.big):
            seconds, peak, _ = runner_batch(folder, agent, count, concurrency)
            rss[count] = peak
            print(f"{count:>6} items: peak RSS {peak / 1024:7.1f} MiB, {count / seconds:6.1f} items/s")
        bounded = rss[args.big] < 1.5 * rss[1000]
        print(
            f"memory: {args.big} items use {rss[args.big] / rss[1000]:.2f}x the peak RSS of 1000  "
            f"{'ok (bounded)' if bounded else 'GROWS'}"
        )
    return 0 if ok_rate and ok_overhead and bounded else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
