"""What seeing a run costs (issue 28): tracing on vs off per step, and ``/metrics`` under load.

- per step, tracing off vs on exporting over OTLP/HTTP to a receiver on 127.0.0.1 (target 1.05x): a
  session of 30 steps with one tool call each against the scripted server on the httpx fast path,
  rounds interleaved, the median of per-round ratios; beside it, for reference, the loop thread's
  CPU a step (less disturbed by other processes than the wall time) and the CPU the export of a
  session's spans and metrics takes after it (``telemetry.flush``: a 30-step session is over long
  before the batch processor's 5 s schedule, so a step does not wait for it);
- tracing off imports nothing of OpenTelemetry (checked in the same process, before the first
  round that turns it on);
- ``GET /metrics`` while 64 streaming chat sessions run on ``runner serve`` (target: p99 under 50 ms),
  beside ``GET /health`` on the same loop and what the server's event loop did meanwhile: how late a
  5 ms timer fired on it, how long each render of the registry took, the garbage collector's
  pauses, the loop thread's share of a core and the streams relayed a second.

Run: ``python -m bench.telemetry [--runs N] [--only steps|metrics] [--scrapes N]``; the model's
httpx pools compared under the same load: ``python -m bench.telemetry --pools 1,4 --runs 3``;
``--no-freeze`` serves without ``runner serve``'s ``gc.freeze()``, as this bench did before;
``--model-apart`` runs the per-step rounds with the scripted model in a process of its own (for
reference: the judged rounds keep it in this process, as the bench always has);
``--sustained N`` runs N sessions back to back in a process with tracing off and in one with it
on, nothing flushed between them (the export runs on its thread as the sessions go on; for
reference); ``--enable-each-round`` turns tracing on before each "on" session and off after it, as this bench
did before 2026-12-04 (it now enables tracing once, as a process does, and runs each pair of
sessions in one order, then the other).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from bench.common import median_interval, paired_ratios, report
from bench.loop import TOOLS_MODULE, stepping_script
from runner.testing import ScriptedServer

STEPS = 30


@contextmanager
def receiver() -> Iterator[str]:
    """An OTLP/HTTP endpoint that takes every export (200, body read and dropped)."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _agent(folder: Path, server: Any) -> Path:
    (folder / "bench_otel_tools.py").write_text(TOOLS_MODULE)
    path = folder / "adder.yaml"
    path.write_text(
        textwrap.dedent(
            f"""\
            version: 1
            name: adder
            model:
              id: openai/scripted
              api_base: {server.base_url}
              api_key: ${{BENCH_API_KEY:-sk-bench}}
            tools:
              - python: bench_otel_tools
            limits:
              max_steps: {STEPS + 5}
              max_tool_calls: {STEPS + 5}
            """
        )
    )
    return path


async def _session(path: Path, server: Any) -> tuple[float, float]:
    """One session: its wall time and the loop thread's CPU time, each a step (s)."""
    from runner.testing import run_agent

    started, cpu = time.perf_counter(), time.thread_time()
    run = await run_agent(path, "go", yes=True, server=server)
    took, cpu = time.perf_counter() - started, time.thread_time() - cpu
    assert run.output == "done", run.output
    return took / STEPS, cpu / STEPS


ON = "tracing on (OTLP to 127.0.0.1)"


@contextmanager
def _tracing(on: bool) -> Iterator[None]:
    """Tracing as the process has it (``on``), or off for the block: nothing listens, as in a
    process that never enabled it (the providers' idle threads wait on; what was queued stays)."""
    import runner.telemetry as telemetry

    if on:
        yield
        return
    saved = telemetry._tracing, telemetry._active
    telemetry._tracing, telemetry._active = None, bool(telemetry._recorders)
    try:
        yield
    finally:
        telemetry._tracing, telemetry._active = saved


def _session_round(path: Path, server: Any, on: bool, samples: dict[str, list[float]]) -> None:
    """One session with tracing ``on`` or off; after one with it on, the export of its spans and
    metrics (``telemetry.flush``: CPU of all this process's threads, a step)."""
    import runner.telemetry as telemetry

    with _tracing(on):
        wall, cpu = asyncio.run(_session(path, server))
    name = "on" if on else "off"
    samples[name].append(wall)
    samples[f"{name} cpu"].append(cpu)
    if on:
        exported = time.process_time()
        telemetry.flush()
        samples["export cpu"].append((time.process_time() - exported) / STEPS)


def _rounds(path: Path, server: Any, runs: int, *, each_round: bool = False) -> dict[str, list[float]]:
    """``runs`` rounds of a session with tracing off and one with it on, in one order and then the
    other (a session's end still runs as the next starts). Tracing is enabled once, as a process
    does; ``each_round`` enables it before each "on" session and disables it after (how this bench
    ran before 2026-12-04: every "on" session paid for new providers, their threads and cold paths)."""
    import runner.telemetry as telemetry

    samples: dict[str, list[float]] = {k: [] for k in ("off", "on", "off cpu", "on cpu", "export cpu")}
    if each_round:
        for _ in range(runs):
            _session_round(path, server, False, samples)
            telemetry.enable()
            try:
                _session_round(path, server, True, samples)
            finally:
                telemetry.disable()
        return samples
    telemetry.enable()
    try:
        _session_round(path, server, True, {k: [] for k in samples})  # warm: tracing's own paths
        for index in range(runs):
            for on in (False, True) if index % 2 == 0 else (True, False):
                _session_round(path, server, on, samples)
    finally:
        telemetry.disable()
    return samples


@dataclass
class _ModelApart:
    """The scripted model in a process of its own (what ``run_agent``'s ``server`` needs of it)."""

    base_url: str
    model: str = "scripted"
    requests: tuple[Any, ...] = ()


@contextmanager
def _model_apart() -> Iterator[_ModelApart]:
    """The same stepping script served by a process of its own, as a real model always is."""
    code = (
        "import sys\nfrom bench.loop import stepping_script\nfrom runner.testing import ScriptedServer\n"
        f"with ScriptedServer(stepping_script({STEPS}, 1), repeat=True) as s:\n"
        "    print(s.base_url, flush=True)\n    sys.stdin.read()\n"
    )
    root = Path(__file__).resolve().parent.parent
    process = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=root
    )
    assert process.stdin is not None and process.stdout is not None
    try:
        yield _ModelApart(process.stdout.readline().strip())
    finally:
        process.stdin.close()
        process.wait(timeout=10)


def _report_off_on(title: str, samples: dict[str, list[float]]) -> bool:
    """The wall time a step off and on (judged against 1.05x: the median of per-round ratios and its
    95 % interval), and the loop thread's CPU a step beside it; whether the ratio is within 1.05x."""
    walls = {"tracing off": samples["off"], ON: samples["on"]}
    ok = report(
        title,
        {name: statistics.median(values) for name, values in walls.items()},
        floor="tracing off",
        target=1.05,
        ratios=paired_ratios(walls, "tracing off"),
    )
    low, high = median_interval([v / f for v, f in zip(samples["on"], samples["off"], strict=True)])
    print(f"{'  95 % interval of that median':<46} {low:.2f}x to {high:.2f}x")
    off, on = statistics.median(samples["off cpu"]), statistics.median(samples["on cpu"])
    ratios = [v / f for v, f in zip(samples["on cpu"], samples["off cpu"], strict=True)]
    low, high = median_interval(ratios)
    label = "loop thread CPU a step, tracing off / on"
    interval = f"{low:.2f}x to {high:.2f}x"
    print(
        f"{label:<46} {off * 1e6:6.0f} / {on * 1e6:.0f} us  {statistics.median(ratios):5.2f}x  ({interval})"
    )
    return ok


def per_step(runs: int, *, apart: bool = False, each_round: bool = False) -> bool:
    """Tracing off vs on (OTLP to a local receiver), per step; the loop thread's CPU and the
    export's beside it, for reference (the target is on the wall time). With ``apart``, the model
    runs in a process of its own (reference: the judged figure keeps it in this one)."""
    import os

    folder = Path(tempfile.mkdtemp(prefix="bench-otel-"))
    sys.path.insert(0, str(folder))
    model = _model_apart() if apart else ScriptedServer(stepping_script(STEPS, 1), repeat=True)
    with model as server, receiver() as endpoint:
        os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
        path = _agent(folder, server)
        asyncio.run(_session(path, server))  # warm: imports, the tools module
        clean = not any(name.startswith("opentelemetry") for name in sys.modules)
        samples = _rounds(path, server, runs, each_round=each_round)
    where = ", the model in a process of its own" if apart else ""
    ok = _report_off_on(f"tracing on vs off, per step ({STEPS} steps, median of {runs}{where})", samples)
    export = statistics.median(samples["export cpu"]) * 1e6
    print(f"{'export after the session (CPU, all threads)':<46} {export:6.0f} us a step  (reference)")
    print(f"{'tracing off imported no OpenTelemetry module':<46} {'yes' if clean else 'NO'}")
    return ok and clean


_SUSTAINED = """
import asyncio, os, sys, tempfile, time
from pathlib import Path
from bench.loop import stepping_script
from bench.telemetry import STEPS, _agent, _session
from runner.testing import ScriptedServer
import runner.telemetry as telemetry

folder = Path(tempfile.mkdtemp(prefix="bench-otel-"))
sys.path.insert(0, str(folder))
with ScriptedServer(stepping_script(STEPS, 1), repeat=True) as server:
    path = _agent(folder, server)
    if sys.argv[1] == "on":
        telemetry.enable()
    for _ in range(3):
        asyncio.run(_session(path, server))  # warm
    started, cpu = time.perf_counter(), time.thread_time()
    for _ in range(int(sys.argv[2])):
        asyncio.run(_session(path, server))
    sessions = int(sys.argv[2]) * STEPS
    print((time.perf_counter() - started) / sessions, (time.thread_time() - cpu) / sessions)
    telemetry.flush()
"""


def sustained(runs: int, sessions: int) -> None:
    """For reference: ``sessions`` back to back in a process of their own with tracing off, then
    in one with it on (``runs`` pairs, each pair in one order then the other). Nothing is flushed
    between sessions: the batch processor exports as it does in a busy process (every 512 spans,
    ~8 sessions), on its thread, while the next sessions run. The receiver is this process, as a
    collector is another process than the runner's."""
    import os

    root = Path(__file__).resolve().parent.parent
    samples: dict[str, list[float]] = {"off": [], "on": [], "off cpu": [], "on cpu": []}
    with receiver() as endpoint:
        env = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "PYTHONPATH": str(root)}
        for index in range(runs):
            for mode in ("off", "on") if index % 2 == 0 else ("on", "off"):
                out = subprocess.run(
                    [sys.executable, "-c", _SUSTAINED, mode, str(sessions)],
                    cwd=root,
                    env=env,
                    capture_output=True,
                    text=True,
                    check=True,
                )
                wall, cpu = (float(part) for part in out.stdout.split())
                samples[mode].append(wall)
                samples[f"{mode} cpu"].append(cpu)
    _report_off_on(
        f"for reference: {sessions} sessions back to back, exporting as they run (median of {runs})", samples
    )


def _model_process(queue: Any) -> None:
    """The scripted model in a process of its own: long streamed answers (40 chunks, 20 ms apart)."""
    step = {"content": "word " * 40, "chunk_delay_s": 0.02}
    with ScriptedServer([step], repeat=True, chunks=40) as model:
        queue.put(model.base_url)
        threading.Event().wait()


def _load_process(url: str, sessions: int, streaming: Any, stop: Any, done: Any) -> None:
    """``sessions`` streaming chats at once, each one again as soon as it ends, until ``stop``."""
    import httpx

    async def run() -> None:
        limits = httpx.Limits(max_connections=sessions + 4)
        async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as client:
            body = {"model": "talker", "stream": True, "messages": [{"role": "user", "content": "talk"}]}

            async def chat() -> None:
                while not stop.is_set():
                    async with client.stream("POST", "/v1/chat/completions", json=body) as response:
                        async for _ in response.aiter_bytes():
                            streaming.set()
                    with done.get_lock():
                        done.value += 1

            await asyncio.gather(*(chat() for _ in range(sessions)), return_exceptions=True)

    asyncio.run(run())


def _scrape_process(url: str, scrapes: int, queue: Any) -> None:
    """``scrapes`` times ``GET /metrics`` then ``GET /health`` (the event loop's own delay, for
    reference), 10 ms apart; the two lists of latencies (s) go to ``queue``."""
    import httpx

    latencies: list[float] = []
    health: list[float] = []
    with httpx.Client(base_url=url, timeout=30) as client:
        for _ in range(scrapes):
            started = time.perf_counter()
            response = client.get("/metrics")
            latencies.append(time.perf_counter() - started)
            assert response.status_code == 200
            started = time.perf_counter()
            client.get("/health")
            health.append(time.perf_counter() - started)
            time.sleep(0.01)
    queue.put((latencies, health))


def metrics_under_load(
    sessions: int = 64, scrapes: int = 200, pools: int = 0, *, freeze: bool = True
) -> dict[str, float]:
    """``/metrics`` latency while ``sessions`` streaming chats run at once (the model, the clients
    and the scraper in processes of their own; the server here), with the model's requests spread over
    ``pools`` httpx clients (0: the default, ``runner.models.client_pools.POOLS``)."""
    import multiprocessing

    import uvicorn

    from runner.models import client_pools
    from runner.runtime import RuntimeSettings
    from runner.serve.app import create_app
    from runner.serve.catalog import load_catalog
    from runner.serve.reload import CatalogHolder
    from runner.serve.server import server_config

    default_pools = client_pools.POOLS
    client_pools.POOLS = pools or default_pools
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    model = context.Process(target=_model_process, args=(queue,), daemon=True)
    model.start()
    base_url = queue.get(timeout=30)
    folder = Path(tempfile.mkdtemp(prefix="bench-metrics-"))
    path = folder / "talker.yaml"
    path.write_text(f"version: 1\nname: talker\nmodel:\n  id: openai/scripted\n  api_base: {base_url}\n")
    holder = CatalogHolder([path], load_catalog([path]))
    app = create_app(holder, settings=RuntimeSettings(home=folder / "home", write_transcript=False))
    server = uvicorn.Server(server_config(app, host="127.0.0.1", port=0, log_level="warning"))
    probe = _ServerProbe()
    # ``runner serve`` keeps what is loaded before it serves out of the collector's passes
    # (``gc.freeze()`` in cli/serve_cmd.py); so does this server, or each full pass would walk the
    # bench's and the server's modules (~190,000 objects: 40-150 ms on this loop under the load).
    if freeze:
        gc.collect()
        gc.freeze()
    thread = threading.Thread(target=probe.run, args=(server,), daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    url = f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    streaming, stop, done = context.Event(), context.Event(), context.Value("i", 0)
    load = context.Process(target=_load_process, args=(url, sessions, streaming, stop, done), daemon=True)
    load.start()
    try:
        streaming.wait(30)
        time.sleep(1.0)  # every session streaming
        streams, cpu, window = done.value, time.process_time(), time.perf_counter()
        # The scraper is a process of its own, as Prometheus is: in this one its thread would wait
        # for the server thread's GIL at every read and write, which no real scrape does.
        scraper = context.Process(target=_scrape_process, args=(url, scrapes, queue), daemon=True)
        probe.recording = True
        scraper.start()
        latencies, health = queue.get(timeout=600)
        probe.recording = False
        scraper.join(30)
        cpu, streams = time.process_time() - cpu, done.value - streams
        window = time.perf_counter() - window
    finally:
        stop.set()
        load.join(30)
        server.should_exit = True
        thread.join(10)
        model.terminate()
        client_pools.POOLS = default_pools
        probe.restore()
        gc.unfreeze()
    p50, p99 = _percentiles(latencies)
    h50, h99 = _percentiles(health)
    l50, l99 = _percentiles(probe.lags or [0.0])
    r50, r99 = _percentiles(probe.renders or [0.0])
    return {
        "p50": p50, "p99": p99, "h50": h50, "h99": h99, "streams": float(done.value),
        "cpu_per_stream": cpu / max(1, streams), "lag50": l50, "lag99": l99,
        "render50": r50, "render99": r99, **_pauses(probe.pauses), "busy": probe.busy_share,
        "streams_per_s": streams / max(1e-9, window),
    }  # fmt: skip


def _pauses(pauses: list[tuple[int, float]]) -> dict[str, float]:
    """The collector's pauses while the scraper ran: how many of each generation, the longest."""
    figures: dict[str, float] = {}
    for generation in (0, 1, 2):
        times = [took for gen, took in pauses if gen == generation]
        figures[f"gc{generation}_count"] = float(len(times))
        figures[f"gc{generation}_max"] = max(times, default=0.0)
    figures["gc_total"] = sum(took for _, took in pauses)
    return figures


class _ServerProbe:
    """What the server's event loop does while the scraper runs: how late a 5 ms timer fires on it
    (the delay every request waits for), and how long each ``/metrics`` render takes on it."""

    def __init__(self) -> None:
        from runner.serve.metrics import ServeMetrics

        self.recording = False
        self.lags: list[float] = []
        self.busy_share = 0.0  # the loop thread's CPU time over the wall time while scraping
        self.renders: list[float] = []
        self.pauses: list[tuple[int, float]] = []  # the garbage collector's (generation, seconds)
        self._gc_started = 0.0
        gc.callbacks.append(self._gc)
        self._scrape = original = ServeMetrics.scrape

        def timed(metrics: ServeMetrics) -> bytes:
            started = time.perf_counter()
            try:
                return original(metrics)
            finally:
                if self.recording:
                    self.renders.append(time.perf_counter() - started)

        ServeMetrics.scrape = timed  # type: ignore[method-assign, assignment]

    def _gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_started = time.thread_time()
        elif self.recording:
            self.pauses.append((int(info["generation"]), time.thread_time() - self._gc_started))

    def restore(self) -> None:
        from runner.serve.metrics import ServeMetrics

        gc.callbacks.remove(self._gc)
        ServeMetrics.scrape = self._scrape  # type: ignore[method-assign]

    def run(self, server: Any) -> None:
        """``server`` on uvicorn's event loop, with the lag probe beside it."""

        async def serving() -> None:
            lag = asyncio.create_task(self._lag())
            try:
                await server.serve()
            finally:
                lag.cancel()

        with asyncio.Runner(loop_factory=server.config.get_loop_factory()) as runner:
            runner.run(serving())

    async def _lag(self) -> None:
        loop = asyncio.get_running_loop()
        first: tuple[float, float] | None = None
        while True:
            started = loop.time()
            await asyncio.sleep(0.005)
            if self.recording:
                now, cpu = loop.time(), time.thread_time()
                first = first or (now, cpu)
                self.lags.append(now - started - 0.005)
                self.busy_share = (cpu - first[1]) / max(1e-9, now - first[0])


def print_metrics(figures: dict[str, float], sessions: int, scrapes: int, label: str = "") -> bool:
    """Print one measurement of ``metrics_under_load``; whether its p99 is within 50 ms."""
    ok = figures["p99"] <= 0.050
    print(f"## /metrics under {sessions} streaming sessions{label} ({scrapes} scrapes)")
    print(f"{'/metrics p50':<46} {figures['p50'] * 1000:8.1f} ms")
    print(f"{'/metrics p99':<46} {figures['p99'] * 1000:8.1f} ms  {'ok' if ok else 'OVER 50 ms'}")
    h50, h99 = figures["h50"] * 1000, figures["h99"] * 1000
    print(f"{'/health p50 / p99 (the same loop, no work)':<46} {h50:8.1f} / {h99:.1f} ms")
    for name, key, digits in (
        ("server loop lag (a 5 ms timer late by)", "lag", 1),
        ("/metrics render", "render", 2),
    ):
        low, high = figures[f"{key}50"] * 1000, figures[f"{key}99"] * 1000
        print(f"{name + ' p50 / p99':<46} {low:8.{digits}f} / {high:.{digits}f} ms")
    gcs = ", ".join(
        f"{figures[f'gc{g}_count']:.0f} <= {figures[f'gc{g}_max'] * 1000:.1f} ms" for g in (0, 1, 2)
    )
    print(f"{'collections of gen 0, 1, 2 (CPU; total)':<46} {gcs}; {figures['gc_total'] * 1000:.0f} ms")
    print(f"{'server loop thread on CPU':<46} {figures['busy'] * 100:8.0f} % of the time")
    print(f"{'streams relayed a second (80 at most)':<46} {figures['streams_per_s']:8.1f}")
    cpu = figures["cpu_per_stream"] * 1000
    print(f"{'server CPU per relayed stream (43 chunks)':<46} {cpu:8.2f} ms")
    print(f"{'streams relayed':<46} {figures['streams']:8.0f}")
    return ok


def pools_compared(rounds: int, counts: list[int], scrapes: int, *, freeze: bool = True) -> bool:
    """``metrics_under_load`` with each pool count in turn, ``rounds`` times; medians per count."""
    results: dict[int, list[dict[str, float]]] = {count: [] for count in counts}
    for _ in range(rounds):
        for count in counts:
            results[count].append(metrics_under_load(scrapes=scrapes, pools=count, freeze=freeze))
    ok = True
    for count, figures in results.items():
        median = {key: statistics.median(f[key] for f in figures) for key in figures[0]}
        label = f", {count} pool{'s' if count > 1 else ''}, median of {rounds}"
        ok = print_metrics(median, 64, scrapes, label) and ok
    return ok


def _percentiles(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return ordered[len(ordered) // 2], ordered[max(0, int(len(ordered) * 0.99) - 1)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.telemetry", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--runs",
        type=int,
        help="rounds of tracing off / on (default 101), or of the pools compared (default 7)",
    )
    parser.add_argument(
        "--only", choices=("steps", "metrics"), help="one of the two measurements (default: both)"
    )
    parser.add_argument("--scrapes", type=int, default=200, help="/metrics scrapes under load (default 200)")
    parser.add_argument(
        "--pools", help="compare the model's httpx pool counts under load, e.g. 1,4 (rounds: --runs)"
    )
    parser.add_argument(
        "--model-apart",
        action="store_true",
        help="per step: the scripted model in a process of its own (as a real model is), for reference",
    )
    parser.add_argument(
        "--sustained",
        type=int,
        metavar="SESSIONS",
        help="for reference: SESSIONS back to back a process, exporting as they go (--runs pairs, default 7)",
    )
    parser.add_argument(
        "--enable-each-round",
        action="store_true",
        help="per step: enable tracing before each 'on' session, as this bench did before 2026-12-04",
    )
    parser.add_argument(
        "--no-freeze",
        action="store_true",
        help="serve without runner serve's gc.freeze() (how this bench ran before 2026-12-03)",
    )
    args = parser.parse_args(argv)
    freeze = not args.no_freeze
    ok = True
    if args.sustained:
        sustained(args.runs or 7, args.sustained)
        return 0
    if args.only != "metrics" and not args.pools:
        ok = per_step(args.runs or 101, apart=args.model_apart, each_round=args.enable_each_round)
    if args.pools:
        counts = [int(part) for part in args.pools.split(",")]
        ok = pools_compared(args.runs or 7, counts, args.scrapes, freeze=freeze) and ok
    elif args.only != "steps":
        ok = print_metrics(metrics_under_load(scrapes=args.scrapes, freeze=freeze), 64, args.scrapes) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
