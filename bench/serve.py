"""``runner serve`` under load (SPEC section 14): 64 concurrent streaming sessions of 5 steps each.

Each session is one streamed chat completion whose agent calls a tool four times, then answers
(5 model calls). The floor is the scripted server's own capacity, measured in the same run: the
same number of streamed requests (64 x 5) sent straight to it by 8, 16, 32 and 64 concurrent
clients. Its capacity is the best of those rates: the stdlib threaded server loses throughput as
concurrency grows (its threads contend for the GIL), so its 64-client rate alone is no ceiling.
Reported: errors (must be 0), throughput in model calls per second and its ratio to that
capacity (and to the 64-client rate), the p50/p99 time to the first byte of the streams against
the scripted server's own first-byte time with as many clients arriving at once (target: p50
within 1.2x), and how many MCP stdio server processes the agent's ``mcp:`` source started over
every request of the run (target: one, for the runtime, not one per request).

Three processes, so that none shares a GIL with another: the scripted server, the real
``runner serve`` command (transcripts on, as by default), and this one with the clients.

Run: ``python -m bench.serve [--runs N] [--sessions 64] [--steps 5]``. Medians of interleaved runs.
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

from bench.common import ADD_TOOL_MODULE, launch_serve
from runner.testing import ScriptedServer

ROOT = Path(__file__).resolve().parent.parent


def stepping(steps: int) -> Any:
    """A script: call ``add`` until ``steps - 1`` results are in, then answer."""

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        done = sum(1 for m in body["messages"] if m.get("role") == "tool")
        if done < steps - 1:
            return {"content": "Adding.", "tool_calls": [{"name": "add", "arguments": {"a": done, "b": 1}}]}
        return {"content": f"Done after {done} additions."}

    return reply


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values``, nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def _answer_ok(data: bytes, steps: int) -> bool:
    """A complete stream: one stop at the end, a details block per tool call, the final answer."""
    events = [e[len("data: ") :] for e in data.decode().split("\n\n") if e.startswith("data: ")]
    if not events or events[-1] != "[DONE]":
        return False
    chunks = [json.loads(e) for e in events[:-1]]
    finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    content = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    return (
        [f for f in finishes if f] == ["stop"]
        and finishes[-1] == "stop"
        and content.count("<summary>Tool Executed</summary>") == steps - 1
        and content.endswith(f"Done after {steps - 1} additions.")
    )


async def floor_run(base_url: str, clients: int, each: int, ttfb: list[float] | None = None) -> float:
    """Seconds for ``clients`` clients to send ``each`` streamed requests each straight to the server.

    ``ttfb`` gets the time to the first byte of each client's first request (all arrive at once).
    """
    body = {"model": "scripted", "messages": [{"role": "user", "content": "go"}], "stream": True}
    limits = httpx.Limits(max_connections=clients * 2, max_keepalive_connections=clients * 2)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:

        async def session() -> None:
            for number in range(each):
                sent = time.perf_counter()
                async with client.stream("POST", base_url + "/chat/completions", json=body) as response:
                    data = b""
                    async for chunk in response.aiter_raw():
                        if not data and ttfb is not None and number == 0:
                            ttfb.append(time.perf_counter() - sent)
                        data += chunk
                    if response.status_code != 200 or not data.endswith(b"data: [DONE]\n\n"):
                        raise RuntimeError(
                            f"scripted server answered {response.status_code}: {data[-200:]!r}"
                        )

        start = time.perf_counter()
        await asyncio.gather(*(session() for _ in range(clients)))
        return time.perf_counter() - start


async def runner_run(base_url: str, sessions: int, steps: int) -> tuple[float, list[float], int]:
    """Seconds for ``sessions`` concurrent streamed conversations; their times to first byte; errors."""
    body = {"model": "bench", "messages": [{"role": "user", "content": "go"}], "stream": True}
    limits = httpx.Limits(max_connections=sessions * 2, max_keepalive_connections=sessions * 2)
    ttfb: list[float] = []
    errors = 0
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:

        async def session() -> None:
            nonlocal errors
            sent = time.perf_counter()
            async with client.stream("POST", base_url + "/chat/completions", json=body) as response:
                data = b""
                async for chunk in response.aiter_raw():
                    if not data:
                        ttfb.append(time.perf_counter() - sent)
                    data += chunk
            ok = response.status_code == 200 and _answer_ok(data, steps)
            errors += 0 if ok else 1

        start = time.perf_counter()
        await asyncio.gather(*(session() for _ in range(sessions)))
        return time.perf_counter() - start, ttfb, errors


def start_runner(folder: Path, base_url: str, *, limits: str = "") -> tuple[subprocess.Popen[str], str]:
    """``runner serve`` on a free port; the process and its base URL.

    The agent has an MCP stdio source besides its Python tool (PyPI's ``mcp-server-time``): the
    server must start it once for the agent's runtime, not once per request. ``limits``: more
    lines of the agent's ``limits:`` (``max_turns: 1000``).
    """
    (folder / "bench_serve_tools.py").write_text(ADD_TOOL_MODULE)
    time_server = Path(sys.executable).parent / "mcp-server-time"
    (folder / "bench.yaml").write_text(
        "version: 1\nname: bench\n"
        f"model:\n  id: openai/scripted\n  api_base: {base_url}\n  api_key: ${{BENCH_KEY:-sk-bench}}\n"
        "  retries: 0\nprompts:\n  system: You add.\n"
        "tools:\n  - python: bench_serve_tools\n"
        f"  - mcp: {{command: {time_server}}}\n    id: clock\n"
        "limits:\n  max_steps: 50\n" + "".join(f"  {line}\n" for line in limits.splitlines())
    )
    env = {**os.environ, "RUNNER_HOME": str(folder / "home")}
    env.pop("RUNNER_SERVE_API_KEYS", None)
    runner = str(Path(sys.executable).parent / "runner")
    return launch_serve([runner, "serve", str(folder / "bench.yaml"), "--port", "0"], env)


def start_scripted(steps: int) -> tuple[subprocess.Popen[str], str]:
    """The scripted server in a process of its own (so it shares no GIL with the clients)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "bench.serve", "--serve-scripted", "--steps", str(steps)],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    return process, process.stdout.readline().strip()


def mcp_processes(parent: int) -> int:
    """How many ``mcp-server-time`` processes ``parent`` has started and still runs."""
    found = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == parent and b"mcp-server-time" in cmdline:
            found += 1
    return found


def serve_scripted(steps: int) -> int:
    """``--serve-scripted``: print the base URL, answer until standard input closes."""
    with ScriptedServer(stepping(steps)) as server:
        print(server.base_url, flush=True)
        sys.stdin.read()
    return 0


def main(argv: list[str]) -> int:
    """Run the benchmark; 0 when every session completed without error."""
    parser = argparse.ArgumentParser(prog="python -m bench.serve")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sessions", type=int, default=64)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--serve-scripted", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    sessions, steps = args.sessions, args.steps
    if args.serve_scripted:
        return serve_scripted(steps)
    calls = sessions * steps
    levels = sorted({n for n in (8, 16, 32, sessions) if n <= sessions})
    floors: dict[int, list[float]] = {n: [] for n in levels}
    totals: list[float] = []
    ttfbs: list[float] = []
    floor_ttfbs: list[float] = []
    errors = 0
    mcp_started = 0
    scripted, scripted_url = start_scripted(steps)
    with tempfile.TemporaryDirectory() as tmp:
        process, runner_url = start_runner(Path(tmp), scripted_url)
        try:
            asyncio.run(runner_run(runner_url, 4, steps))  # warm-up: imports, pools, first files
            asyncio.run(floor_run(scripted_url, 4, steps))
            for _ in range(args.runs):
                for n in levels:  # the same number of requests, from n clients
                    first = floor_ttfbs if n == sessions else None
                    floors[n].append(asyncio.run(floor_run(scripted_url, n, calls // n, first)))
                total, ttfb, failed = asyncio.run(runner_run(runner_url, sessions, steps))
                totals.append(total)
                ttfbs.extend(ttfb)
                errors += failed
            mcp_started = mcp_processes(process.pid)
        finally:
            process.terminate()
            process.wait(timeout=15)
            scripted.communicate(timeout=15)
    rates = {n: calls / statistics.median(values) for n, values in floors.items()}
    best = max(rates, key=lambda n: rates[n])
    total = statistics.median(totals)
    runner_rate = calls / total
    p50, p99 = percentile(ttfbs, 0.5) * 1000, percentile(ttfbs, 0.99) * 1000
    floor_p50 = percentile(floor_ttfbs, 0.5) * 1000
    ttfb_ratio = p50 / floor_p50
    lines = [
        f"## runner serve: {sessions} concurrent streaming sessions x {steps} steps (median of {args.runs})"
    ]
    lines += [f"scripted server alone, {n:>2} clients  {rate:7.1f} requests/s" for n, rate in rates.items()]
    lines += [
        f"runner serve, {sessions} sessions     {runner_rate:7.1f} model calls/s ({total:.2f} s)",
        f"throughput ratio               {runner_rate / rates[best]:7.2f} of the scripted server's capacity",
        f"                               {runner_rate / rates[sessions]:7.2f} of its {sessions}-client rate",
        f"time to first byte             p50 {p50:.0f} ms, p99 {p99:.0f} ms ({len(ttfbs)} streams)",
        f"  scripted server alone        p50 {floor_p50:.0f} ms with {sessions} clients at once: "
        f"{ttfb_ratio:.2f}x {'ok' if ttfb_ratio <= 1.2 else 'OVER 1.2x'}",
        f"MCP stdio servers started      {mcp_started} for {sessions * args.runs + 4} requests "
        f"{'ok' if mcp_started == 1 else 'NOT ONE PER RUNTIME'}",
        f"errors                         {errors} of {sessions * args.runs} sessions",
    ]
    print("\n".join(lines))
    return 0 if errors == 0 and mcp_started == 1 and ttfb_ratio <= 1.2 else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
