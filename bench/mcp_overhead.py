"""MCP tool-call overhead: a tool of an ``mcp:`` source vs the raw ``mcp`` SDK client, same server.

For stdio and streamable HTTP, the reference server's ``echo`` tool (``@modelcontextprotocol/
server-everything``, installed by ``npm ci --prefix tests/peers``) is called through the runner's
source (``load_source`` -> ``Tool.call``: one shared session, timeouts, progress hook, result
rendering) and through a plain ``ClientSession`` opened the documented way, each against its own
server process (stdio) or its own session on one server (HTTP, pinned to 127.0.0.1). Batches of
sequential calls take turns, in alternating order; reported: the median per-call time of each, and
the ratio to the raw SDK. Target: within 1.3x.

Run: ``python -m bench.mcp_overhead [--runs N] [--calls N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import socket
import statistics
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AsyncExitStack, contextmanager
from pathlib import Path

import mcp.types as types
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from runner.agentfile.config import AgentConfig, McpServerConfig, ToolSourceConfig
from runner.tools.base import RunContext
from runner.tools.mcp import load_source
from runner.tools.sources import SourceContext

ROOT = Path(__file__).resolve().parents[1]
EVERYTHING = ROOT / "tests/peers/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
PRELOAD = ROOT / "tests/tools_mcp/loopback_preload.cjs"
TARGET = 1.3

Call = Callable[[str], Awaitable[str]]


@contextmanager
def http_server() -> Iterator[str]:
    """The reference server over streamable HTTP on 127.0.0.1; yields its MCP URL."""
    with tempfile.TemporaryDirectory() as workdir:
        port_file = Path(workdir) / "port"
        env = {**os.environ, "PORT": "0", "LOOPBACK_PORT_FILE": str(port_file)}
        process = subprocess.Popen(
            ["node", "--require", str(PRELOAD), str(EVERYTHING), "streamableHttp"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 30
            while not (port_file.exists() and port_file.read_text().strip()):
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError("the streamable HTTP reference server did not start")
                time.sleep(0.02)
            port = int(port_file.read_text())
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            process.terminate()
            process.wait(timeout=10)


async def raw_sdk(server: McpServerConfig, stack: AsyncExitStack) -> Call:
    """The floor: the SDK's own client, opened in this task, text read from the first block."""
    if server.url is not None:
        read, write = await stack.enter_async_context(streamable_http_client(server.url))
    else:
        assert server.command is not None
        parameters = StdioServerParameters(command=server.command, args=list(server.args))
        errlog = stack.enter_context(open(os.devnull, "w"))  # noqa: SIM115 (closed by the stack)
        read, write = await stack.enter_async_context(stdio_client(parameters, errlog=errlog))
    session = await stack.enter_async_context(ClientSession(read, write))
    await session.initialize()

    async def call(message: str) -> str:
        result = await session.call_tool("echo", {"message": message})
        block = result.content[0]
        assert isinstance(block, types.TextContent)
        return block.text

    return call


async def runner_source(server: McpServerConfig, stack: AsyncExitStack) -> Call:
    """The runner: an ``mcp:`` source's ``echo`` tool, called as the executor calls it."""
    spec = ToolSourceConfig(kind="mcp", target="everything", base_dir=ROOT, mcp=server, id="everything")
    ctx = SourceContext(
        agent=AgentConfig(name="bench", path=ROOT / "bench.yaml"), on_progress=lambda _l, _m: None
    )
    loaded = await load_source(spec, ctx, stack)
    echo = next(tool for tool in loaded.tools if tool.name == "echo")
    run_ctx = RunContext(session_id="bench", agent="bench")

    async def call(message: str) -> str:
        return str(await echo.call({"message": message}, run_ctx))

    return call


async def per_call(call: Call, calls: int) -> float:
    """Seconds per call over ``calls`` sequential calls."""
    start = time.perf_counter()
    for i in range(calls):
        if await call(str(i)) != f"Echo: {i}":
            raise AssertionError("wrong echo")
    return (time.perf_counter() - start) / calls


async def compare(server: McpServerConfig, *, runs: int, calls: int) -> dict[str, float]:
    """Median per-call seconds of the raw SDK and of the runner, batches interleaved."""
    async with AsyncExitStack() as stack:
        contenders = {"raw mcp SDK ClientSession": await raw_sdk(server, stack)}
        contenders["runner mcp source (Tool.call)"] = await runner_source(server, stack)
        for call in contenders.values():  # warm-up
            await per_call(call, calls)
        samples: dict[str, list[float]] = {name: [] for name in contenders}
        for run in range(runs):
            order = list(contenders.items())
            for name, call in order if run % 2 == 0 else reversed(order):
                samples[name].append(await per_call(call, calls))
    return {name: statistics.median(values) for name, values in samples.items()}


def report(title: str, medians: dict[str, float]) -> bool:
    """Print per-call medians and the ratio to the raw SDK; True when within the target."""
    print(f"## {title}")
    floor = next(iter(medians.values()))
    ok = True
    for index, (name, value) in enumerate(medians.items()):
        ratio = value / floor
        mark = "" if index == 0 else ("  ok" if ratio <= TARGET else f"  OVER {TARGET}x")
        ok = ok and (index == 0 or ratio <= TARGET)
        print(f"{name:<36} {value * 1e6:9.0f} us/call  {ratio:5.2f}x{mark}")
    return ok


async def run(runs: int, calls: int) -> bool:
    stdio = McpServerConfig(command="node", args=(str(EVERYTHING), "stdio"))
    ok = report(f"stdio (median of {runs} x {calls} calls)", await compare(stdio, runs=runs, calls=calls))
    with http_server() as url:
        http = McpServerConfig(url=url)
        medians = await compare(http, runs=runs, calls=calls)
    return report(f"streamable HTTP (median of {runs} x {calls} calls)", medians) and ok


def main(argv: list[str] | None = None) -> int:
    """Run the comparison; exit status 1 when a ratio is over the target."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--calls", type=int, default=100)
    args = parser.parse_args(argv)
    if not EVERYTHING.exists():
        print("run `npm ci --prefix tests/peers` first (the MCP reference server)")
        return 2
    logging.basicConfig(level=logging.WARNING)
    return 0 if asyncio.run(run(args.runs, args.calls)) else 1


if __name__ == "__main__":
    raise SystemExit(main())
