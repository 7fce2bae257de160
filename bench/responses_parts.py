"""Where a continuation's time goes, in one process: ``runner serve``'s app on httpx's ASGI
transport (no sockets between client and server, no second process to schedule), the scripted
model in a process of its own, as in ``bench.responses`` (issue 25).

Continuing by ``previous_response_id`` (``store: false``) a chain 2 turns deep and one ``--deep``
turns deep, one after the other, ``--rounds`` rounds of 100 each: the median wall time of each and
the CPU time of this process per request (client and server both; steadier on a loaded machine
than the wall time, and blind to the scripted model's own work). ``--profile FILE``: cProfile
of 200 continuations of each chain instead, and the functions whose own time grew most between the
two (the stats go to ``FILE.2`` and ``FILE.deep``).

Run: ``python -m bench.responses_parts [--deep 200] [--rounds 3] [--profile /tmp/resp]``.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import os
import pstats
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx

from bench.serve import ADD_TOOL_MODULE, start_scripted


def _agent(folder: Path, base_url: str, deep: int) -> Path:
    """The agent of ``bench.serve`` (a Python tool, an MCP stdio source, transcripts on)."""
    (folder / "bench_serve_tools.py").write_text(ADD_TOOL_MODULE)
    time_server = Path(sys.executable).parent / "mcp-server-time"
    path = folder / "bench.yaml"
    path.write_text(
        "version: 1\nname: bench\n"
        f"model:\n  id: openai/scripted\n  api_base: {base_url}\n  api_key: ${{BENCH_KEY:-sk-bench}}\n"
        "  retries: 0\nprompts:\n  system: You add.\n"
        "tools:\n  - python: bench_serve_tools\n"
        f"  - mcp: {{command: {time_server}}}\n    id: clock\n"
        f"limits:\n  max_steps: 50\n  max_turns: {deep + 100}\n"
    )
    return path


def _app(path: Path) -> Any:
    from runner.cli.commands import runtime_settings
    from runner.serve.app import create_app
    from runner.serve.catalog import load_catalog
    from runner.serve.reload import CatalogHolder

    catalog = load_catalog([path])
    settings = replace(runtime_settings(None), write_transcript=True)
    return create_app(CatalogHolder([path], catalog), settings=settings)


async def _drive(app: Any, *, deep: int, rounds: int, profile: str | None) -> list[str]:
    lines: list[str] = []
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://127.0.0.1/v1", timeout=60
        ) as client:

            async def post(**extra: Any) -> str:
                response = await client.post("/responses", json={"model": "bench", "input": "go", **extra})
                if response.status_code != 200:
                    raise RuntimeError(f"{response.status_code} {response.text[:300]}")
                return str(response.json()["id"])

            async def chain(turns: int) -> str:
                previous = await post()
                for _ in range(turns - 1):
                    previous = await post(previous_response_id=previous)
                return previous

            ids = {"2": await chain(2), "deep": await chain(deep)}
            gc.collect()
            gc.freeze()  # as runner serve does after start-up
            for _ in range(20):  # warm-up: both records in memory, converted
                for previous in ids.values():
                    await post(previous_response_id=previous, store=False)
            if profile:
                for label, previous in ids.items():
                    profiler = cProfile.Profile()
                    profiler.enable()
                    for _ in range(200):
                        await post(previous_response_id=previous, store=False)
                    profiler.disable()
                    profiler.dump_stats(f"{profile}.{label}")
                return _grown(f"{profile}.2", f"{profile}.deep", 200)
            for _ in range(rounds):
                wall: dict[str, list[float]] = {"2": [], "deep": []}
                cpu = dict.fromkeys(ids, 0.0)
                for _ in range(100):
                    for label, previous in ids.items():
                        started, used = time.perf_counter(), time.process_time()
                        await post(previous_response_id=previous, store=False)
                        wall[label].append(time.perf_counter() - started)
                        cpu[label] += time.process_time() - used
                shallow, far = (statistics.median(wall[k]) * 1000 for k in ("2", "deep"))
                lines.append(
                    f"continue after 2 / {deep}: wall {shallow:.2f} / {far:.2f} ms {far / shallow:.2f}x; "
                    f"CPU per request {cpu['2'] * 10:.2f} / {cpu['deep'] * 10:.2f} ms "
                    f"{cpu['deep'] / cpu['2']:.2f}x"
                )
    return lines


def _grown(before: str, after: str, requests: int, shown: int = 25) -> list[str]:
    """The functions whose own time per request grew most from ``before`` to ``after``."""
    old = pstats.Stats(before).stats  # type: ignore[attr-defined]
    new = pstats.Stats(after).stats  # type: ignore[attr-defined]
    grown = sorted(
        ((new.get(k, (0, 0, 0, 0))[2] - old.get(k, (0, 0, 0, 0))[2], k) for k in old.keys() | new.keys()),
        reverse=True,
    )
    return [
        f"{delta / requests * 1000:+7.3f} ms/request  {Path(k[0]).name}:{k[1]} {k[2]}"
        for delta, k in grown[:shown]
    ]


def main(argv: list[str]) -> int:
    """Run it; 0 when every request succeeded."""
    parser = argparse.ArgumentParser(prog="python -m bench.responses_parts")
    parser.add_argument("--deep", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", default=None)
    args = parser.parse_args(argv)
    scripted, scripted_url = start_scripted(1)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            os.environ["RUNNER_HOME"] = str(folder / "home")
            sys.path.insert(0, str(folder))  # the agent's Python tool
            app = _app(_agent(folder, scripted_url, args.deep))
            lines = asyncio.run(_drive(app, deep=args.deep, rounds=args.rounds, profile=args.profile))
    finally:
        assert scripted.stdin is not None
        scripted.stdin.close()
        scripted.wait(timeout=15)
    print(f"## /v1/responses continuation in one process (ASGI transport), {args.deep} turns against 2")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
