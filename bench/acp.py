"""ACP: the editor's first ``agent_message_chunk`` against the model's own first token (issue 26).

One ``runner acp`` process (the SDK's client side on its stdio, as an editor drives it) serves an
agent on the scripted OpenAI-compatible server of ``runner.testing``, which answers every request
after ``--ttft-ms`` (a model's time to first token) in a few streamed chunks. Each round measures,
in alternating order:

- the floor: a streamed chat completion sent straight to the scripted server (httpx), from sending
  the request to the first content delta;
- ACP: a ``session/prompt`` in a fresh session, from sending it to the client's first
  ``agent_message_chunk``: the agent's whole path (system prompt, request, streaming parse, event,
  JSON-RPC notification over the pipe) on top of the same model.

Reported: the median of each and the median of per-round ratios. Target: within 1.1x.

Run: ``python -m bench.acp [--runs N] [--ttft-ms MS]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from acp import connect_to_agent, text_block

from bench.common import paired_ratios, report
from runner.testing import ScriptedServer

TARGET = 1.1
ROOT = Path(__file__).resolve().parents[1]
AGENT = """\
version: 1
name: bench-acp
model:
  id: openai/scripted
  api_base: {base_url}
  api_key: ${{BENCH_KEY:-sk-bench}}
  retries: 0
prompts:
  system: Answer briefly.
"""


class FirstChunk:
    """The ACP client side: the time each session's first message chunk arrived."""

    def __init__(self) -> None:
        self.first: dict[str, float] = {}
        self.arrived: dict[str, asyncio.Event] = {}

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        if update.session_update == "agent_message_chunk" and session_id not in self.first:
            self.first[session_id] = time.perf_counter()
            self.arrived.setdefault(session_id, asyncio.Event()).set()

    async def request_permission(self, **_: Any) -> Any:
        raise AssertionError("the bench agent has no tools")


async def floor_once(client: httpx.AsyncClient, base_url: str) -> float:
    """Seconds from sending a streamed completion to its first content delta."""
    body = {"model": "scripted", "stream": True, "messages": [{"role": "user", "content": "hello"}]}
    start = time.perf_counter()
    async with client.stream("POST", f"{base_url}/chat/completions", json=body) as response:
        async for line in response.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            choices = json.loads(line[len("data: ") :]).get("choices") or [{}]
            if choices[0].get("delta", {}).get("content"):
                return time.perf_counter() - start
    raise AssertionError("no content in the stream")


async def acp_once(conn: Any, client: FirstChunk, project: Path) -> float:
    """Seconds from sending a prompt (in a new session) to its first ``agent_message_chunk``."""
    session = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
    client.arrived[session] = asyncio.Event()
    start = time.perf_counter()
    turn = asyncio.create_task(conn.prompt(session_id=session, prompt=[text_block("hello")]))
    await client.arrived[session].wait()
    elapsed = client.first[session] - start
    response = await turn
    assert response.stop_reason == "end_turn", response
    return elapsed


async def measure(runs: int, base_url: str, folder: Path) -> dict[str, list[float]]:
    agent = folder / "agent.yaml"
    agent.write_text(AGENT.format(base_url=base_url), encoding="utf-8")
    env = {**os.environ, "RUNNER_HOME": str(folder / "home"), "PYTHONPATH": str(ROOT)}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "runner",
        "acp",
        str(agent),
        "--no-transcripts",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env=env,
        cwd=str(folder),
    )
    assert process.stdin is not None and process.stdout is not None
    client = FirstChunk()
    conn = connect_to_agent(client, process.stdin, process.stdout)
    samples: dict[str, list[float]] = {"model's first token (direct)": [], "first agent_message_chunk": []}
    try:
        await conn.initialize(protocol_version=1)
        async with httpx.AsyncClient(timeout=30) as http:
            await acp_once(conn, client, folder)  # warm-up: the runtime, the connections
            await floor_once(http, base_url)
            for round_ in range(runs):
                order = ["floor", "acp"] if round_ % 2 == 0 else ["acp", "floor"]
                for which in order:
                    if which == "floor":
                        samples["model's first token (direct)"].append(await floor_once(http, base_url))
                    else:
                        samples["first agent_message_chunk"].append(await acp_once(conn, client, folder))
    finally:
        process.stdin.close()
        await asyncio.wait_for(process.wait(), 30)
        await conn.close()
    return samples


def main(argv: list[str]) -> int:
    """Run the benchmark; 0 when the ratio is within the target."""
    parser = argparse.ArgumentParser(prog="python -m bench.acp")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument(
        "--ttft-ms", type=float, default=300.0, help="the scripted model's time to first token"
    )
    args = parser.parse_args(argv)
    step = {"content": "Hello from the scripted model.", "delay_s": args.ttft_ms / 1000}
    with ScriptedServer([step], repeat=True, chunks=4) as server, tempfile.TemporaryDirectory() as tmp:
        samples = asyncio.run(measure(args.runs, server.base_url, Path(tmp)))
    floor = "model's first token (direct)"
    medians = {name: statistics.median(values) for name, values in samples.items()}
    ok = report(
        f"ACP first message chunk vs the model's first token ({args.runs} rounds, TTFT {args.ttft_ms:g} ms)",
        medians,
        floor=floor,
        target=TARGET,
        ratios=paired_ratios(samples, floor),
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
