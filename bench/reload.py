"""Hot reload latency (SPEC section 14): from a saved file to the reload event, median of 10.

Target: under 500 ms. Run: ``python -m bench.reload [--runs N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import ADD_TOOL_MODULE
from runner.agentfile import load_agent
from runner.runtime import RuntimeSettings
from runner.session import Session, runtime_host
from runner.session.events import Note
from runner.testing import ScriptedModel, text
from runner.watch import watch_session


async def measure(runs: int, folder: Path) -> list[float]:
    """Milliseconds from each write to its reload note."""
    (folder / "bench_reload_tools.py").write_text(ADD_TOOL_MODULE)
    path = folder / "agent.yaml"
    body = (
        "version: 1\nname: reload\nmodel: openai/scripted\nprompts:\n  system: Version {n}.\n"
        "tools:\n  - python: bench_reload_tools\n"
    )
    path.write_text(body.format(n=0))
    notes: list[tuple[float, str]] = []

    def sink(event: Any) -> None:
        if isinstance(event, Note) and event.text.startswith("reloaded"):
            notes.append((time.perf_counter(), event.text))

    stop = asyncio.Event()
    samples = []
    model = ScriptedModel([text("ok")] * (runs + 1))
    host = runtime_host(load_agent(path), RuntimeSettings(home=folder / "home"), model=model)
    async with await Session.open(host, sink=sink) as session:
        watcher = asyncio.create_task(watch_session(session, stop=stop))
        await asyncio.sleep(0.3)
        for n in range(1, runs + 1):
            seen = len(notes)
            start = time.perf_counter()
            path.write_text(body.format(n=n))
            while len(notes) == seen:
                await asyncio.sleep(0.002)
            samples.append((notes[-1][0] - start) * 1000)
            await session.run(["next"])  # swap it in, as a turn boundary would
            await asyncio.sleep(0.1)  # the watcher restarts on the new file set
        stop.set()
        await watcher
    await host.aclose()
    return samples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        samples = asyncio.run(measure(args.runs, Path(tmp)))
    median = statistics.median(samples)
    print(
        f"## hot reload: write -> reload event, median of {len(samples)}: {median:.0f} ms "
        f"(min {min(samples):.0f}, max {max(samples):.0f}) {'ok' if median < 500 else 'OVER 500 ms'}"
    )
    return 0 if median < 500 else 1


if __name__ == "__main__":
    raise SystemExit(main())
