"""``runner batch --backend ray`` against the local backend (issue 15: at least 0.6x its throughput
at equal concurrency, the per-item overhead reported).

The cluster: ``ray start --head`` on 127.0.0.1 with 2 CPUs and no dashboard, started here in a
temporary folder and stopped at the end by its processes (or ``--ray-address``: an existing one).
Each ``runner batch --backend ray`` run pays for connecting to the cluster and starting its actors
(seconds), so besides the whole command's rate the steady rate is measured: ``Batch`` and
``RayBatch`` driven from this process (the same code as the command, transcripts on), the items per
second between the 10th and the 90th percent of the results as they reach the driver. The per-item
overhead of Ray: at ``--concurrency 1``, the median time between two results, Ray's minus local's.

Run: ``python -m bench.batch --ray [--runs 3] [--items 640] [--concurrency 32] [--latency 0.05]``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bench.batch import runner_batch, write_agent

#: Loopback only, no token authentication (tests/batch/conftest.py says why).
RAY_ENV = {
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_AUTH_MODE": "disabled",
}


@contextmanager
def local_cluster(cpus: int = 2) -> Iterator[str]:
    """A Ray head on 127.0.0.1 (its address), stopped by its processes at the end."""
    temp_dir = tempfile.mkdtemp(prefix="rb", dir="/tmp")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    ray = str(Path(sys.executable).parent / "ray")
    command = [ray, "start", "--head", "--node-ip-address", "127.0.0.1", "--port", str(port),
               "--num-cpus", str(cpus), "--include-dashboard=false", "--disable-usage-stats",
               "--temp-dir", temp_dir]  # fmt: skip
    subprocess.run(command, env={**os.environ, **RAY_ENV}, capture_output=True, check=True, timeout=120)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        for pid in _cluster_pids(temp_dir):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(1)  # their files are closed
        shutil.rmtree(temp_dir, ignore_errors=True)


def _cluster_pids(marker: str) -> list[int]:
    named, parents = set(), {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
            parents[int(entry.name)] = int((entry / "stat").read_text().split(") ", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if marker in cmdline:
            named.add(int(entry.name))
    found = set(named)
    while more := {pid for pid, parent in parents.items() if parent in found and pid not in found}:
        found |= more
    return sorted(found)


def measure_ray(args: argparse.Namespace, base_url: str) -> int:
    items, concurrency = args.items, args.concurrency
    with (
        tempfile.TemporaryDirectory() as tmp,
        local_cluster() if args.ray_address is None else _given(args.ray_address) as address,
    ):
        folder = Path(tmp)
        agent = write_agent(folder, base_url)
        ray = ("--backend", "ray", "--address", address)
        runner_batch(folder, agent, 50, concurrency, ray)  # warm-up (the working_dir upload, .pyc files)
        local_whole, local_steady, ray_whole, ray_steady, local_serial, ray_serial = [], [], [], [], [], []
        serial = args.serial_items
        for _ in range(args.runs):  # interleaved
            local_steady.append(steady_rate(asyncio.run(_stamps(folder, agent, items, concurrency, None))))
            ray_steady.append(steady_rate(asyncio.run(_stamps(folder, agent, items, concurrency, address))))
            local_whole.append(items / runner_batch(folder, agent, items, concurrency)[0])
            ray_whole.append(items / runner_batch(folder, agent, items, concurrency, ray)[0])
            local_serial.append(gap(asyncio.run(_stamps(folder, agent, serial, 1, None))))
            ray_serial.append(gap(asyncio.run(_stamps(folder, agent, serial, 1, address))))
    med = statistics.median
    ratio = med(ray_steady) / med(local_steady)
    ok = ratio >= 0.6
    print(f"## runner batch, Ray backend on a local 2-CPU cluster vs local: {items} items x 2 model calls of "
          f"{args.latency * 1000:.0f} ms, --concurrency {concurrency} (median of {args.runs})")  # fmt: skip
    print(f"local backend, steady                       {med(local_steady):8.1f} items/s")
    print(f"ray backend, steady                         {med(ray_steady):8.1f} items/s "
          f"{ratio:5.2f}x of local  {'ok' if ok else 'UNDER 0.6x'}")  # fmt: skip
    print(f"whole commands of {items} (with start-up)          local {med(local_whole):6.1f}, "
          f"ray {med(ray_whole):6.1f} items/s ({med(ray_whole) / med(local_whole):.2f}x)")  # fmt: skip
    extra_ms = (med(ray_serial) - med(local_serial)) * 1000
    print(f"per item at --concurrency 1                 local {med(local_serial) * 1000:6.1f} ms, "
          f"ray {med(ray_serial) * 1000:6.1f} ms: Ray adds {extra_ms:.2f} ms per item")  # fmt: skip
    return 0 if ok else 1


async def _stamps(
    folder: Path, agent: Path, items: int, concurrency: int, address: str | None
) -> list[float]:
    """When each result reached the driver (``Batch`` when no address, else ``RayBatch``)."""
    from runner.agentfile import load_agent
    from runner.batch import Batch, BatchLimits, as_items
    from runner.batch.ray_backend import RayBatch
    from runner.runtime.settings import RuntimeSettings

    config = load_agent(agent)
    inputs = as_items(f"item {n}: 2+3?" for n in range(items))
    limits, settings = BatchLimits(concurrency=concurrency), RuntimeSettings(home=folder / "home")
    if address is None:
        batch = Batch(config, inputs, limits=limits, settings=settings)
    else:
        batch = RayBatch(config, inputs, address=address, limits=limits, settings=settings)
    stamps = [time.perf_counter() async for _ in batch.results()]
    if len(stamps) != items:
        raise RuntimeError(f"{len(stamps)} results of {items}")
    return stamps


def steady_rate(stamps: list[float]) -> float:
    """Items per second between the 10th and the 90th percent of the results (no start-up, no tail)."""
    low, high = len(stamps) // 10, len(stamps) * 9 // 10
    return (high - low) / (stamps[high] - stamps[low])


def gap(stamps: list[float]) -> float:
    """The median seconds between two results (at concurrency 1: an item's time as the driver sees it)."""
    return statistics.median(b - a for a, b in itertools.pairwise(stamps))


@contextmanager
def _given(address: str) -> Iterator[str]:
    yield address


if __name__ == "__main__":
    from bench.batch import main

    raise SystemExit(main(sys.argv[1:]))
