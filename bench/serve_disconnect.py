"""``runner serve`` under clients that hang up mid-stream (issue 23): no connection to the model leaks.

``--clients`` (128) streaming clients send requests for ``--duration`` seconds; every other one
hangs up after a few chunks of its answer (at a different chunk each time, some at the last), the
others read to the end. Then, once the model client's idle kept-alive connections have expired,
later requests must all be answered and the connections the scripted model server sees must be
back to their number before the load (one). Before the fix, connections cancelled while their
answer was closing stayed busy in the pool for good, until its 256 were taken and every request
waited ("no answer within 20 s") on an idle server too.

Three processes: the scripted model server, the real ``runner serve`` command, and this one with the
clients. Open connections are counted from the model server's side, in ``/proc/net/tcp`` (Linux).

Run: ``python -m bench.serve_disconnect [--duration 60] [--clients 128] [--litellm]``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.common import launch_serve
from runner.testing import ScriptedServer

ROOT = Path(__file__).resolve().parent.parent
WORDS = [f"w{n} " for n in range(16)]
#: Past the fast path's keep-alive expiry (5 s) and aiohttp's (litellm's, 15 s).
SETTLE_S = {"fast": 6.0, "litellm": 16.0}


def model_connections(port: int) -> int:
    """Established TCP connections whose local port is ``port`` (the model server's side of each)."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "01":
                count += 1
    return count


def serve_scripted() -> int:
    """``--serve-scripted``: print the base URL, answer until standard input closes."""
    lingers = itertools.cycle([0.0, 0.001, 0.003, 0.006, 0.01])

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        return {"content": "".join(WORDS), "chunk_delay_s": 0.005, "linger_s": next(lingers)}

    with ScriptedServer(answer, chunks=len(WORDS), repeat=True) as server:
        print(server.base_url, flush=True)
        sys.stdin.read()
    return 0


def start_scripted() -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "bench.serve_disconnect", "--serve-scripted"],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    return process, process.stdout.readline().strip()


def start_runner(folder: Path, base_url: str, path: str) -> tuple[subprocess.Popen[str], str]:
    (folder / "talker.yaml").write_text(
        "version: 1\nname: talker\n"
        f"model:\n  id: openai/scripted\n  api_base: {base_url}\n  api_key: ${{BENCH_KEY:-sk-bench}}\n"
        "  retries: 0\nprompts:\n  system: Talk.\n"
    )
    env = {
        **os.environ,
        "RUNNER_HOME": str(folder / "home"),
        "RUNNER_FAST_PATH": "1" if path == "fast" else "0",
    }
    env.pop("RUNNER_SERVE_API_KEYS", None)
    env["RUNNER_SERVE_MAX_CONNECTIONS"] = "1024"  # the clients are many on purpose
    runner = str(Path(sys.executable).parent / "runner")
    command = [runner, "serve", str(folder / "talker.yaml"), "--port", "0"]
    return launch_serve(command, env, timeout_s=120)


class Tally:
    """What the clients saw."""

    def __init__(self) -> None:
        self.read = self.left = self.errors = 0
        self.peak = 0

    def count(self, outcome: str) -> None:
        if outcome == "read":
            self.read += 1
        elif outcome == "left":
            self.left += 1
        else:
            self.errors += 1


async def one_request(http: httpx.AsyncClient, url: str, leave_after: int | None) -> str:
    """One streamed request: "read" (the whole answer), "left" (hung up on purpose) or "failed"."""
    body = {"model": "talker", "messages": [{"role": "user", "content": "talk"}], "stream": True}
    text: list[str] = []
    async with http.stream("POST", url + "/chat/completions", json=body) as response:
        if response.status_code != 200:
            await response.aread()
            print(f"HTTP {response.status_code}: {response.text[:200]}", file=sys.stderr)
            return "failed"
        async for line in response.aiter_lines():
            if line == "data: [DONE]":  # a client that meant to leave at the last piece may get here
                if "".join(text) == "".join(WORDS):
                    return "read"
                print(f"an answer that is not the whole text: {''.join(text)!r}", file=sys.stderr)
                return "failed"
            if not line.startswith("data: "):
                continue
            choices = json.loads(line[6:]).get("choices") or [{}]
            piece = (choices[0].get("delta") or {}).get("content")
            if piece:
                text.append(piece)
                if leave_after is not None and len(text) >= leave_after:
                    return "left"
    print("a stream that ended without [DONE]", file=sys.stderr)
    return "failed"


async def load(url: str, clients: int, duration_s: float, port: int) -> Tally:
    tally = Tally()
    end = time.monotonic() + duration_s
    limits = httpx.Limits(max_connections=clients * 2, max_keepalive_connections=clients * 2)

    async def client(number: int, http: httpx.AsyncClient) -> None:
        rng = random.Random(number)
        while time.monotonic() < end:
            leave_after = None if number % 2 == 0 else rng.randint(1, len(WORDS))
            try:
                outcome = await one_request(http, url, leave_after)
            except httpx.HTTPError as exc:
                print(f"client {number}: {type(exc).__name__}: {exc}", file=sys.stderr)
                outcome = "failed"
            tally.count(outcome)

    async def watch() -> None:
        while time.monotonic() < end:
            tally.peak = max(tally.peak, model_connections(port))
            await asyncio.sleep(0.5)

    async with httpx.AsyncClient(timeout=60, limits=limits) as http:
        await asyncio.gather(watch(), *(client(n, http) for n in range(clients)))
    return tally


def probes(url: str, count: int) -> int:
    """How many of ``count`` later requests (one at a time) are answered in full within 30 s each."""
    answered = 0
    body = {"model": "talker", "messages": [{"role": "user", "content": "again"}]}
    with httpx.Client(timeout=30) as http:
        for _ in range(count):
            try:
                response = http.post(url + "/chat/completions", json=body)
            except httpx.HTTPError:
                continue
            if response.status_code == 200 and response.json()["choices"][0]["message"]["content"] == "".join(
                WORDS
            ):
                answered += 1
    return answered


def main(argv: list[str]) -> int:
    """Run the benchmark; 0 when every later request was answered and no connection was left open."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.serve_disconnect", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of load (default 60)")
    parser.add_argument("--clients", type=int, default=128)
    parser.add_argument("--litellm", action="store_true", help="the litellm path (RUNNER_FAST_PATH=0)")
    parser.add_argument("--serve-scripted", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_scripted:
        return serve_scripted()
    path = "litellm" if args.litellm else "fast"
    scripted, scripted_url = start_scripted()
    port = int(scripted_url.rsplit(":", 1)[1].split("/")[0])
    with tempfile.TemporaryDirectory() as tmp:
        process, url = start_runner(Path(tmp), scripted_url, path)
        try:
            warm = probes(url, 4)
            idle = model_connections(port)
            tally = asyncio.run(load(url, args.clients, args.duration, port))
            during = model_connections(port)
            time.sleep(SETTLE_S[path])  # idle kept-alive connections expire
            answered = probes(url, 8)
            time.sleep(0.5)  # the model server sees closed connections a moment later
            after = model_connections(port)
        finally:
            process.terminate()
            process.wait(timeout=15)
            scripted.communicate(timeout=15)
    back = after <= idle
    lines = [
        f"## runner serve ({path} path): {args.clients} streaming clients for {args.duration:g} s, "
        "half hanging up mid-stream",
        f"requests                  {tally.read + tally.left + tally.errors} "
        f"({tally.read} read to the end, {tally.left} hung up mid-stream, {tally.errors} failed)",
        f"model connections         {idle} idle before, peak {tally.peak} during the load, "
        f"{during} as it ended, {after} after it {'ok' if back else 'LEFT OPEN'}",
        f"later requests            {answered} of 8 answered {'ok' if answered == 8 else 'FAILED'} "
        f"(warm-up {warm} of 4)",
    ]
    print("\n".join(lines))
    return 0 if back and answered == 8 and tally.errors == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
