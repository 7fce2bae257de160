"""A2A against its floors (issue 27): the same one-step agent over A2A ``SendMessage`` and over
``/v1/chat/completions`` (target: within 1.2x), and an agent calling a remote runner agent over A2A
against the same agent calling it as a direct ``agent:`` sub-agent (target: the hop adds at most 5 ms).

``runner serve`` runs as the real command in a process of its own; the scripted model server runs in
another; the clients (and, for the second part, the calling agents, each on its own runtime opened
once) in this one. Rounds are interleaved (which of the two goes first alternates) and the figures are
medians.

Run: ``python -m bench.a2a [--runs 200] [--profile PATH]`` (``--profile``: ``runner serve`` under
cProfile, written to PATH when it stops).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from bench.common import launch_serve, paired_ratios

ROOT = Path(__file__).resolve().parent.parent

MODEL = (
    "model:\n  id: openai/scripted\n  api_base: {base}\n  api_key: ${{BENCH_KEY:-sk-bench}}\n  retries: 0\n"
)


def reply(body: dict[str, Any]) -> dict[str, Any]:
    """The scripted model: a caller (it has tools) calls ``helper`` once then answers; others answer."""
    if body.get("tools") and body["messages"][-1]["role"] == "user":
        return {"tool_calls": [{"name": "helper", "arguments": {"message": "hi", "input": "hi"}}]}
    return {"content": "ok"}


def start_scripted() -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "bench.a2a", "--serve-scripted"],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert process.stdout is not None
    return process, process.stdout.readline().strip()


def serve_scripted() -> int:
    from runner.testing import ScriptedServer

    with ScriptedServer(reply) as server:
        print(server.base_url, flush=True)
        sys.stdin.read()
    return 0


def start_runner(folder: Path, profile: str | None = None) -> tuple[subprocess.Popen[str], str]:
    """``runner serve FOLDER/served`` on a free port (under cProfile, written to ``profile`` when it
    stops, if given): the process and its root URL. Its stderr is read in a thread from then on, so
    the server never blocks on a full pipe."""
    env = {**os.environ, "RUNNER_HOME": str(folder / "home"), "PYTHONPATH": str(ROOT)}
    env.pop("RUNNER_SERVE_API_KEYS", None)
    python = [sys.executable, "-m", "cProfile", "-o", profile] if profile else [sys.executable]
    command = [*python, "-m", "runner", "serve", str(folder / "served"), "--port", "0"]
    process, url = launch_serve(command, env, cwd=ROOT)
    stderr = process.stderr
    assert stderr is not None
    threading.Thread(target=stderr.read, name="runner-serve-stderr", daemon=True).start()
    return process, url.removesuffix("/v1")


async def served_ratio(url: str, runs: int) -> tuple[float, float, float]:
    """Median seconds of one SendMessage and of one chat completion, interleaved (which goes first
    alternates by round), and the median of the rounds' ratios."""
    chat = {"model": "helper", "messages": [{"role": "user", "content": "hi"}]}
    times: dict[str, list[float]] = {"a2a": [], "chat": []}
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:

        async def a2a(number: int) -> None:
            message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": "hi"}]}
            rpc = {"jsonrpc": "2.0", "id": number, "method": "SendMessage", "params": {"message": message}}
            answer = await http.post("/a2a/helper", json=rpc, headers={"A2A-Version": "1.0"})
            assert answer.status_code == 200 and "TASK_STATE_COMPLETED" in answer.text, answer.text[:300]

        async def completion(number: int) -> None:
            answer = await http.post("/v1/chat/completions", json=chat)
            assert answer.status_code == 200, answer.text[:300]

        for number in range(runs + 5):
            order = [("a2a", a2a), ("chat", completion)]
            for name, send in order if number % 2 else order[::-1]:
                started = time.perf_counter()
                await send(number)
                if number >= 5:  # warm-up: the runtime, the connections
                    times[name].append(time.perf_counter() - started)
    paired = paired_ratios(times, "chat")["a2a"]
    return statistics.median(times["a2a"]), statistics.median(times["chat"]), paired


async def hop(folder: Path, base: str, url: str, runs: int) -> tuple[float, float]:
    """Median seconds of a caller's run whose tool is the helper over A2A, and as an ``agent:``."""
    from runner.agentfile.files import load_agent
    from runner.runnable import AgentRunner
    from runner.runtime import RuntimeSettings

    model = MODEL.format(base=base)
    (folder / "helper.yaml").write_text(f"version: 1\nname: helper\n{model}")
    (folder / "via_a2a.yaml").write_text(
        f"version: 1\nname: via_a2a\n{model}tools:\n  - a2a: {url}/a2a/helper\n"
    )
    (folder / "direct.yaml").write_text(
        f"version: 1\nname: direct\n{model}tools:\n  - agent: ./helper.yaml\n"
    )
    settings = RuntimeSettings(home=folder / "home-callers", write_transcript=False)
    runners = {
        name: AgentRunner(load_agent(folder / f"{name}.yaml"), settings) for name in ("via_a2a", "direct")
    }
    times: dict[str, list[float]] = {name: [] for name in runners}
    try:
        for number in range(runs + 5):
            for name, runner in runners.items():
                started = time.perf_counter()
                outcome = await runner.run(["go"])
                took = time.perf_counter() - started
                assert outcome.status == "ok" and outcome.tools == ("helper",), outcome
                if number >= 5:
                    times[name].append(took)
    finally:
        for runner in runners.values():
            await runner.aclose()
    return statistics.median(times["via_a2a"]), statistics.median(times["direct"])


async def sdk_floor(runs: int) -> float:
    """Median seconds of one SendMessage to the a2a-sdk's own handler whose executor answers at once
    (task, working, one artifact, completed: the events runner sends), in this process over ASGI."""
    os.environ.setdefault("OTEL_INSTRUMENTATION_A2A_SDK_ENABLED", "false")
    from a2a.server.agent_execution import AgentExecutor, RequestContext
    from a2a.server.events import EventQueue
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.routes import create_jsonrpc_routes
    from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
    from a2a.types import a2a_pb2 as pb
    from starlette.applications import Starlette

    class AtOnce(AgentExecutor):
        async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
            assert context.task_id and context.context_id
            task = pb.Task(id=context.task_id, context_id=context.context_id, status=pb.TaskStatus(state=1))
            await event_queue.enqueue_event(task)
            updater = TaskUpdater(event_queue, context.task_id, context.context_id)
            await updater.start_work()
            await updater.add_artifact([pb.Part(text="ok")], last_chunk=True)
            await updater.complete()

        async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
            return None

    interface = pb.AgentInterface(url="http://127.0.0.1/", protocol_binding="JSONRPC", protocol_version="1.0")
    card = pb.AgentCard(
        name="floor",
        description="the floor",
        version="1",
        capabilities=pb.AgentCapabilities(streaming=True),
        supported_interfaces=[interface],
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[pb.AgentSkill(id="floor", name="floor", description="answers", tags=["floor"])],
    )
    handler = DefaultRequestHandler(agent_executor=AtOnce(), task_store=InMemoryTaskStore(), agent_card=card)
    app = Starlette(routes=create_jsonrpc_routes(handler, "/"))
    times: list[float] = []
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        for number in range(runs + 5):
            rpc = {
                "jsonrpc": "2.0",
                "id": number,
                "method": "SendMessage",
                "params": {
                    "message": {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": "hi"}]}
                },
            }
            started = time.perf_counter()
            answer = await http.post("/", json=rpc, headers={"A2A-Version": "1.0"})
            if number >= 5:
                times.append(time.perf_counter() - started)
            assert "TASK_STATE_COMPLETED" in answer.text, answer.text[:300]
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.a2a", description=__doc__)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--profile", metavar="PATH", help="run runner serve under cProfile, written to PATH")
    parser.add_argument("--serve-scripted", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_scripted:
        return serve_scripted()
    scripted, base = start_scripted()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "served").mkdir()
        (folder / "served" / "helper.yaml").write_text(f"version: 1\nname: helper\n{MODEL.format(base=base)}")
        server, url = start_runner(folder, args.profile)
        try:
            a2a, openai, paired = asyncio.run(served_ratio(url, args.runs))
            via_a2a, direct = asyncio.run(hop(folder, base, url, max(20, args.runs // 2)))
        finally:
            server.send_signal(signal.SIGINT)  # a clean stop, so a profile is written
            server.wait(timeout=30)
            assert scripted.stdin is not None
            scripted.stdin.close()
            scripted.wait(timeout=15)
    floor = asyncio.run(sdk_floor(args.runs))
    ratio = a2a / openai
    added = (via_a2a - direct) * 1000
    print(f"one-step agent, /v1/chat/completions     {openai * 1000:8.2f} ms   1.00x")
    print(
        f"one-step agent, A2A SendMessage          {a2a * 1000:8.2f} ms   {ratio:.2f}x  {_ok(ratio <= 1.2)}"
        f"  (median of the rounds' ratios {paired:.2f}x)"
    )
    print(f"the a2a-sdk's handler alone (no model)   {floor * 1000:8.2f} ms   {floor / openai:.2f}x")
    print(f"caller with a direct agent: sub-agent    {direct * 1000:8.2f} ms")
    verdict = _ok(added <= 5)
    print(f"caller with the helper over A2A          {via_a2a * 1000:8.2f} ms   {added:+.2f} ms  {verdict}")
    return 0 if ratio <= 1.2 and added <= 5 else 1


def _ok(good: bool) -> str:
    return "ok" if good else "OVER"


if __name__ == "__main__":
    sys.exit(main())
