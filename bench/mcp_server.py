"""An agent as an MCP server (issue 26): ``tools/call`` against the other ways to ask the same agent.

A one-step agent (the scripted model answers at once, in a process of its own) is asked the same
question, in the same run, four ways:

- **HTTP**: one ``runner serve`` process, two pairs, each a protocol's client against the other's
  of the same kind. Bare: ``POST /v1/chat/completions`` (httpx, keep-alive, not streamed) against
  a 2026-07-28 ``tools/call`` as the one httpx POST it is on the wire. Official clients: the chat
  completion through the ``openai`` SDK against ``tools/call`` on ``/mcp`` through the official
  ``mcp`` client, in both protocol generations (one client session each). Target: ``tools/call``
  within 1.2x of the chat completion, in each pair. The client's own cost is in the wall time and
  both SDKs add some (the caller's CPU rows show how much); pairing a client with one of its kind
  keeps the comparison on what the server does.
- **stdio**: ``tools/call`` on one ``runner mcp`` process (the official client) against ``runner
  run AGENT -p "question"`` minus process start: what ``runner run`` does once its process is up
  and its modules imported, timed in a warm process (load the agent file, build its runtime with
  ``AgentRunner``, run the prompt, close). Target: within 1.2x. For reference, the wall time of the
  ``runner run`` command less that of ``runner validate AGENT`` (which also starts the CLI and reads
  the agent file) is printed too: it holds the imports only a run needs.

Batches of sequential calls take turns, in alternating order; reported: the median per-call time
of each and its ratio to the floor (medians of per-round ratios). For HTTP, the CPU time the
``runner serve`` process spent per call of each way is reported too (all its threads, from
``/proc/PID/task/*/schedstat``, Linux): the server's own cost, which a loaded machine disturbs far
less than wall time, and which leaves out the clients; and the CPU time the caller (this process)
spent per call: what the official ``mcp`` client does more than a bare httpx POST, which the wall
times of the two rows of the 2026 generation also hold.

Run: ``python -m bench.mcp_server [--runs N] [--calls N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

from bench.common import launch_serve, paired_ratios, report

ROOT = Path(__file__).resolve().parent.parent
TARGET = 1.2
QUESTION = "What is the answer?"

AGENT = """\
version: 1
name: oneshot
description: Answers at once.
model:
  id: openai/scripted
  api_base: {base}
  api_key: ${{SCRIPTED_API_KEY:-sk-test}}
  retries: 0
"""


def start_scripted() -> tuple[subprocess.Popen[str], str]:
    """The scripted model in a process of its own, answering "42" to everything."""
    code = (
        "import sys\nfrom runner.testing import ScriptedServer\n"
        "with ScriptedServer(lambda body: {'content': '42'}, repeat=True) as s:\n"
        "    print(s.base_url, flush=True)\n    sys.stdin.read()\n"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT
    )
    assert process.stdout is not None
    return process, process.stdout.readline().strip()


def start_serve(folder: Path, env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    """``runner serve FOLDER --port 0``; the process and its URL (read from its banner). Its stderr
    is read in a thread from then on: a pipe nobody reads fills after ~780 access lines (64 KiB),
    and the server then blocks on its next line, so the call that causes it never gets an answer."""
    command = [sys.executable, "-m", "runner", "serve", str(folder), "--port", "0"]
    process, url = launch_serve(command, env, cwd=ROOT)
    stderr = process.stderr
    assert stderr is not None
    threading.Thread(target=stderr.read, name="runner-serve-stderr", daemon=True).start()
    return process, url.removesuffix("/v1")


Call = Callable[[], Awaitable[Any]]
#: The label of the CPU time of ``runner serve``'s threads other than the event loop's.
ASIDE = "of which other threads"

_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
#: A 2026-07-28 ``tools/call`` as one JSON-RPC POST (its headers as the official client sets them).
RAW_CALL = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "tools/call",
    "params": {"name": "oneshot", "arguments": {"message": QUESTION}, "_meta": _META},
}
RAW_HEADERS = {
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": "2026-07-28",
    "mcp-method": "tools/call",
    "mcp-name": "oneshot",
}


#: The HTTP comparisons: a title, the floor, the ``tools/call`` ways judged against it.
HTTP_PAIRS = (
    (
        "MCP tools/call vs Chat Completions (HTTP), bare httpx POSTs",
        "chat completion",
        ("tools/call (2026-07-28, one httpx POST)",),
    ),
    (
        "MCP tools/call vs Chat Completions (HTTP), each protocol's official client",
        "chat completion (openai SDK)",
        ("tools/call (2025-11-25)", "tools/call (2026-07-28)"),
    ),
)


def process_cpu(pid: int, *, others: bool = False) -> float:
    """CPU seconds process ``pid`` has run so far, all its live threads (Linux ``schedstat``, ns);
    with ``others``, only those of the threads other than its main one (the event loop's)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        if others and task.name == str(pid):
            continue
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):  # a thread that just ended
            continue
    return total / 1e9


async def batches(
    calls: dict[str, Call],
    *,
    runs: int,
    each: int,
    cpu: dict[str, float] | None = None,
    pid: int = 0,
    caller: dict[str, float] | None = None,
) -> dict[str, list[float]]:
    """Per-call seconds of each way, ``runs`` rounds of ``each`` sequential calls, order alternating;
    with ``cpu``, the CPU seconds process ``pid`` spent per call of each way are left in it; with
    ``caller``, those this process (the client) spent."""
    samples: dict[str, list[float]] = {name: [] for name in calls}
    for call in calls.values():  # warm-up: runtimes built, connections open
        for _ in range(3):
            await call()
    names = list(calls)
    spent = dict.fromkeys(calls, 0.0)
    threads = dict.fromkeys(calls, 0.0)
    own = dict.fromkeys(calls, 0.0)
    for round_number in range(runs):
        for name in names if round_number % 2 == 0 else reversed(names):
            before = process_cpu(pid) if cpu is not None else 0.0
            aside = process_cpu(pid, others=True) if cpu is not None else 0.0
            mine = time.process_time()
            start = time.perf_counter()
            for _ in range(each):
                await calls[name]()
            samples[name].append((time.perf_counter() - start) / each)
            own[name] += time.process_time() - mine
            if cpu is not None:
                spent[name] += process_cpu(pid) - before
                threads[name] += process_cpu(pid, others=True) - aside
    if cpu is not None:
        for name in calls:
            cpu[name] = spent[name] / (runs * each)
            cpu[f"{name} {ASIDE}"] = threads[name] / (runs * each)
    if caller is not None:
        caller.update({name: value / (runs * each) for name, value in own.items()})
    return samples


async def http_bench(
    url: str, *, runs: int, each: int, cpu: dict[str, float], pid: int, caller: dict[str, float]
) -> dict[str, list[float]]:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    body = {"model": "oneshot", "messages": [{"role": "user", "content": QUESTION}]}
    # The legacy client's GET stream is silent while nothing changes: a 60 s read timeout ended it
    # (and the bench) once the rounds took longer than that.
    timeout = httpx2.Timeout(60, read=600)
    from openai import AsyncOpenAI

    async with (
        httpx.AsyncClient(base_url=url, timeout=60) as http,
        AsyncOpenAI(base_url=url + "/v1", api_key="unused", timeout=60, max_retries=0) as sdk,
        Client(
            streamable_http_client(url + "/mcp", http_client=httpx2.AsyncClient(timeout=timeout)),
            mode="legacy",
        ) as old,
        Client(
            streamable_http_client(url + "/mcp", http_client=httpx2.AsyncClient(timeout=timeout)),
            mode="2026-07-28",
        ) as new,
    ):

        async def chat() -> None:
            response = await http.post("/v1/chat/completions", json=body)
            assert response.json()["choices"][0]["message"]["content"] == "42"

        async def sdk_chat() -> None:
            completion = await sdk.chat.completions.create(
                model="oneshot", messages=[{"role": "user", "content": QUESTION}]
            )
            assert completion.choices[0].message.content == "42", completion

        async def raw_call() -> None:  # the 2026 revision is one POST: what the official client sends
            response = await http.post("/mcp", json=RAW_CALL, headers=RAW_HEADERS)
            assert response.json()["result"]["content"][0]["text"] == "42", response.text

        def tool(client: Any) -> Call:
            async def call() -> None:
                result = await client.call_tool("oneshot", {"message": QUESTION})
                assert result.content[0].text == "42", result

            return call

        return await batches(
            {
                "chat completion": chat,
                "tools/call (2026-07-28, one httpx POST)": raw_call,
                "chat completion (openai SDK)": sdk_chat,
                "tools/call (2025-11-25)": tool(old),
                "tools/call (2026-07-28)": tool(new),
            },
            runs=runs,
            each=each,
            cpu=cpu,
            pid=pid,
            caller=caller,
        )


async def stdio_bench(folder: Path, env: dict[str, str], *, runs: int, each: int) -> dict[str, list[float]]:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "runner", "mcp", str(folder)], env=env, cwd=str(ROOT)
    )
    async with Client(params, mode="legacy") as client:

        async def call() -> None:
            result = await client.call_tool("oneshot", {"message": QUESTION})
            assert result.content[0].text == "42", result

        return await batches({"tools/call over stdio": call}, runs=runs, each=each)


async def run_in_process(agent: Path, home: Path, *, runs: int, each: int) -> list[float]:
    """Per-call seconds of what ``runner run AGENT -p QUESTION`` does after start-up, in this process."""
    from dataclasses import replace

    from runner.agentfile import load_agent
    from runner.runnable import AgentRunner
    from runner.runtime.settings import RuntimeSettings

    settings = replace(RuntimeSettings.from_environment(), home=home)

    async def once() -> None:
        runner = AgentRunner(load_agent(agent), settings)
        try:
            outcome = await runner.run([QUESTION])
            assert outcome.answer == "42", outcome
        finally:
            await runner.aclose()

    return (await batches({"runner run minus process start": once}, runs=runs, each=each))[
        "runner run minus process start"
    ]


def run_minus_start(agent: Path, env: dict[str, str], *, runs: int) -> list[float]:
    """Per round: wall time of ``runner run AGENT -p QUESTION`` less that of ``runner validate AGENT``."""

    def wall(*argv: str) -> float:
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "runner", *argv], env=env, cwd=ROOT, check=True, capture_output=True
        )
        return time.perf_counter() - start

    wall("run", str(agent), "-p", QUESTION), wall("validate", str(agent))  # warm-up
    differences = []
    for _ in range(runs):
        differences.append(wall("run", str(agent), "-p", QUESTION) - wall("validate", str(agent)))
    return differences


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.mcp_server", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="rounds of batches (default 7)")
    parser.add_argument("--calls", type=int, default=20, help="sequential calls per batch (default 20)")
    options = parser.parse_args(argv)
    scripted, base = start_scripted()
    with tempfile.TemporaryDirectory() as workdir:
        folder = Path(workdir) / "agents"
        folder.mkdir()
        agent = folder / "oneshot.yaml"
        agent.write_text(AGENT.format(base=base), encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if not k.startswith("RUNNER_")}
        env.update(RUNNER_HOME=str(Path(workdir) / "home"), SCRIPTED_API_KEY="sk-test", PYTHONPATH=str(ROOT))
        serve, url = start_serve(folder, env)
        cpu: dict[str, float] = {}
        caller: dict[str, float] = {}
        try:
            http = asyncio.run(
                http_bench(url, runs=options.runs, each=options.calls, cpu=cpu, pid=serve.pid, caller=caller)
            )
        finally:
            serve.terminate()
            serve.wait(timeout=15)
        stdio = asyncio.run(stdio_bench(folder, env, runs=options.runs, each=options.calls))
        os.environ["SCRIPTED_API_KEY"] = "sk-test"
        floor = asyncio.run(
            run_in_process(agent, Path(workdir) / "home", runs=options.runs, each=options.calls)
        )
        cli = run_minus_start(agent, env, runs=max(3, options.runs // 2))
    assert scripted.stdin is not None
    scripted.stdin.close()
    scripted.wait(timeout=10)
    ok = True
    for title, base, names in HTTP_PAIRS:
        ways = {name: http[name] for name in (base, *names)}
        ok = (
            report(
                title,
                {name: statistics.median(values) for name, values in ways.items()},
                floor=base,
                target=TARGET,
                ratios=paired_ratios(ways, base),
            )
            and ok
        )
    print(f"runner serve's CPU time per call (all threads; {ASIDE}: its threads but the event loop's):")
    for name, seconds in cpu.items():
        if name.endswith(ASIDE):
            print(f"    {ASIDE:<46} {seconds * 1000:5.2f} ms")
        else:
            print(f"  {name:<48} {seconds * 1000:5.2f} ms  {seconds / cpu['chat completion']:.2f}x")
    print("the caller's CPU time per call (this process: httpx, the openai SDK or the official mcp client):")
    for name, seconds in caller.items():
        print(f"  {name:<48} {seconds * 1000:5.2f} ms  {seconds / caller['chat completion']:.2f}x")
    pair = {"runner run minus process start": floor, "tools/call over stdio": stdio["tools/call over stdio"]}
    medians = {name: statistics.median(values) for name, values in pair.items()}
    ok = (
        report(
            "MCP tools/call over stdio vs runner run (minus process start)",
            medians,
            floor="runner run minus process start",
            target=TARGET,
        )
        and ok
    )
    print(f"(runner run less runner validate, for reference: {statistics.median(cli) * 1000:.0f} ms)")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
