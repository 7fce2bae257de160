"""The interpreter's overhead (SPEC section 14), against floors measured in the same run.

- per step, native mode, 50 steps, 1 and 4 tool calls per step: the runner (litellm path and the
  httpx fast path) vs the seed-001 minimal loop calling ``litellm.completion`` on the same server
  (issue target 1.1x); streaming on the fast path vs non-streaming (1.3x);
- per-step time flat in history length: 100 steps vs 10 steps, on both paths (1.2x);
- a session's first model call on a reused runtime vs a steady step (within 2 ms);
- four 200 ms tools in one step (sync and async);
- eager start: a streamed reply whose first call completes early starts that tool before the end;
- prefix stability over a 50-step session (from the server's request log);
- a one-step ``runner run`` vs ``python -c "import yaml, jsonschema, jinja2, httpx"``.

Run: ``python -m bench.loop [--runs N]``. Medians of interleaved runs; ratios to the floor.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import logging
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
logging.getLogger("LiteLLM").setLevel(logging.ERROR)  # "event loop changed" notes: one loop per run here

from bench.common import interleaved, paired_ratios, report  # noqa: E402
from runner.testing import ScriptedServer  # noqa: E402

TOOLS_MODULE = '''
import asyncio
import time


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def wait_sync(ms: int) -> str:
    """Sleep in a thread."""
    time.sleep(ms / 1000)
    return "ok"


async def wait_async(ms: int) -> str:
    """Sleep on the event loop."""
    await asyncio.sleep(ms / 1000)
    return "ok"
'''

ADD_SPEC = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two integers.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    },
}


def stepping_script(
    steps: int, calls: int, tool: str = "add", arguments: dict[str, Any] | None = None
) -> Any:
    """Tool calls until the conversation has ``steps - 1`` assistant messages, then a final answer."""
    args = arguments or {"a": 2, "b": 3}

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        done = sum(1 for m in body["messages"] if m["role"] == "assistant")
        if done >= steps - 1:
            return {"content": "done"}
        return {"tool_calls": [{"name": tool, "arguments": {**args, "a": done}} for _ in range(calls)]}

    return reply


def _answer_calls(messages: list[Any], message: Any) -> bool:
    """Append the reply and one result per tool call; False when the reply called no tool."""
    messages.append(message.model_dump(exclude_none=True))
    for call in message.tool_calls or ():
        args = json.loads(call.function.arguments)
        messages.append({"role": "tool", "tool_call_id": call.id, "content": str(args["a"] + args["b"])})
    return bool(message.tool_calls)


def minimal_loop(base_url: str, calls: int) -> int:
    """The seed-001 loop: litellm.completion, execute tool calls, append, repeat."""
    import litellm

    messages: list[Any] = [{"role": "system", "content": "You add."}, {"role": "user", "content": "go"}]
    steps = 0
    while True:
        response = litellm.completion(
            model="openai/scripted",
            api_base=base_url,
            api_key="sk-bench",
            messages=messages,
            tools=[ADD_SPEC],
        )
        steps += 1
        if not _answer_calls(messages, response.choices[0].message):
            return steps


async def minimal_async_loop(base_url: str, calls: int) -> int:
    """The same loop on ``litellm.acompletion``: how much of a gap is litellm's async path itself."""
    import litellm

    messages: list[Any] = [{"role": "system", "content": "You add."}, {"role": "user", "content": "go"}]
    steps = 0
    while True:
        response = await litellm.acompletion(
            model="openai/scripted",
            api_base=base_url,
            api_key="sk-bench",
            messages=messages,
            tools=[ADD_SPEC],
        )
        steps += 1
        if not _answer_calls(messages, response.choices[0].message):
            return steps


def write_agent(folder: Path, base_url: str, *, max_steps: int = 200) -> Path:
    (folder / "bench_tools.py").write_text(TOOLS_MODULE)
    path = folder / "agent.yaml"
    path.write_text(
        "version: 1\nname: bench\nmodel:\n"
        f"  id: openai/scripted\n  api_base: {base_url}\n  api_key: ${{BENCH_API_KEY:-sk-bench}}\n"
        "  stream: false\nprompts:\n  system: You add.\ntools:\n  - python: bench_tools\n"
        f"limits:\n  max_steps: {max_steps}\n  max_repeat: 1000\n  max_tool_calls: 100000\n"
    )
    return path


async def runner_loop(
    agent: Path, *, fast_path: bool, stream: bool = False, sink: Any = None
) -> tuple[int, float]:
    """One turn of the runner on ``agent``: the steps it took and the seconds the turn took.

    Session set-up (loading the agent, importing tools, opening sources) happens once per session,
    not per step, so it is left out of the per-step figure.
    """
    from runner.agentfile import load_agent
    from runner.runtime import RuntimeSettings
    from runner.session import RunOptions, Session, open_runtime

    config = load_agent(agent)
    home = Path(tempfile.mkdtemp(prefix="bench-home-"))
    runtime = await open_runtime(config, RuntimeSettings(home=home, fast_path=fast_path))
    try:
        async with Session(runtime, sink=sink, options=RunOptions(stream=stream)) as session:
            start = time.perf_counter()
            result = await session.run(["go"])
            elapsed = time.perf_counter() - start
    finally:
        await runtime.aclose()
    return result.steps, elapsed


def _serve(steps: int, calls: int, queue: Any) -> None:
    with ScriptedServer(stepping_script(steps, calls)) as server:
        queue.put(server.base_url)
        server.wait()


@contextlib.contextmanager
def server_process(steps: int, calls: int) -> Iterator[str]:
    """The scripted server in a process of its own, so it never competes with the client for the GIL."""
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    process = context.Process(target=_serve, args=(steps, calls, queue), daemon=True)
    process.start()
    try:
        yield str(queue.get(timeout=30))
    finally:
        process.terminate()
        process.join(timeout=10)


#: The per-step contenders. Each runs in a process of its own (litellm's settings are per process, and
#: one contender's background threads must not slow another); ``env`` is set before litellm is imported.
CONTENDERS: dict[str, dict[str, Any]] = {
    "minimal litellm loop": {"kind": "minimal"},
    "minimal loop on acompletion": {"kind": "minimal_async"},
    "acompletion loop, litellm log copy off": {
        "kind": "minimal_async",
        "env": {"MAX_BASE64_LENGTH_FOR_LOGGING": "0"},  # what the runner sets (docs/decisions.md)
    },
    "runner (litellm)": {"kind": "runner", "fast_path": False},
    "runner (fast path)": {"kind": "runner", "fast_path": True},
    "runner (fast path, streaming)": {"kind": "runner", "fast_path": True, "stream": True},
}


def _contender(name: str, base_url: str, agent: Path, calls: int, conn: Any) -> None:
    """Worker process: one timed run of contender ``name`` per request on ``conn``."""
    setup = CONTENDERS[name]
    os.environ.update(setup.get("env", {}))
    logging.getLogger("LiteLLM").setLevel(logging.ERROR)

    def once() -> tuple[int, float]:
        start = time.perf_counter()
        if setup["kind"] == "minimal":
            return minimal_loop(base_url, calls), time.perf_counter() - start
        if setup["kind"] == "minimal_async":
            return asyncio.run(minimal_async_loop(base_url, calls)), time.perf_counter() - start
        return asyncio.run(
            runner_loop(agent, fast_path=setup["fast_path"], stream=setup.get("stream", False))
        )

    once()  # warm-up: imports, connections
    while conn.recv():
        conn.send(once())


def per_step(
    runs: int, steps: int, calls: int, folder: Path, names: Sequence[str] = tuple(CONTENDERS)
) -> dict[str, list[float]]:
    """Milliseconds per step of each contender in each round, the contenders taking turns."""
    # litellm reads its settings when imported: the workers must import it themselves, after ``env``.
    assert "litellm" not in sys.modules, "per_step must run before this process imports litellm"
    samples: dict[str, list[float]] = {name: [] for name in names}
    context = multiprocessing.get_context("fork")
    with server_process(steps, calls) as base_url:
        agent = write_agent(folder, base_url)
        workers = {}
        try:
            for name in names:
                parent, child = context.Pipe()
                process = context.Process(target=_contender, args=(name, base_url, agent, calls, child))
                process.start()
                workers[name] = (process, parent)
            for _ in range(runs):
                for name, (_, conn) in workers.items():
                    conn.send(True)
                    taken, seconds = conn.recv()
                    samples[name].append(seconds / taken * 1000)
                    assert taken == steps, (name, taken)
        finally:
            for process, conn in workers.values():
                with contextlib.suppress(OSError):
                    conn.send(False)
                process.join(timeout=10)
                if process.is_alive():
                    process.terminate()
    return samples


async def _first_and_steady(runtime: Any, sessions: int) -> tuple[list[float], list[float]]:
    """Per session on ``runtime``: ms from opening it to its first reply, and between later replies."""
    from runner.session import RunOptions, Session
    from runner.session.events import AssistantMessage

    first: list[float] = []
    steady: list[float] = []
    for _ in range(sessions):
        marks: list[float] = []

        def sink(event: Any, marks: list[float] = marks) -> None:
            if isinstance(event, AssistantMessage):
                marks.append(time.perf_counter())

        opened = time.perf_counter()
        async with Session(runtime, sink=sink, options=RunOptions(stream=False)) as session:
            await session.run(["go"])
        first.append((marks[0] - opened) * 1000)
        steady.extend((b - a) * 1000 for a, b in itertools.pairwise(marks))
    return first, steady


def first_call(folder: Path, sessions: int = 30) -> dict[str, float]:
    """A session's first model call against a steady step, on a reused runtime and on a new one each.

    "first": from opening the session to its first reply; "steady": from one reply to the next (a
    trivial tool call and the next request). Fast path, 5-step sessions, the server in its own process.
    """
    from runner.agentfile import load_agent
    from runner.runtime import RuntimeSettings
    from runner.session import open_runtime

    async def measure(base_url: str) -> dict[str, float]:
        config = load_agent(write_agent(folder, base_url))
        settings = RuntimeSettings(home=folder / "home")
        shared = await open_runtime(config, settings)
        await _first_and_steady(shared, 3)  # warm-up: imports, the connection
        first, steady = await _first_and_steady(shared, sessions)
        await shared.aclose()
        fresh_first: list[float] = []
        for _ in range(sessions):
            runtime = await open_runtime(config, settings)  # its opening is not counted, only the call
            once, _ = await _first_and_steady(runtime, 1)
            fresh_first.append(once[0])
            await runtime.aclose()
        return {
            "steady": statistics.median(steady),
            "first": statistics.median(first),
            "first_new_runtime": statistics.median(fresh_first),
        }

    with server_process(5, 1) as base_url:
        return asyncio.run(measure(base_url))


def parallel_tools(folder: Path) -> dict[str, float]:
    """Milliseconds from the first tool start to the last tool end, for four 200 ms tools."""
    out = {}
    for tool in ("wait_sync", "wait_async"):
        with ScriptedServer(stepping_script(2, 4, tool, {"ms": 200})) as server:
            agent = write_agent(folder, server.base_url)
            marks: list[tuple[str, float]] = []

            def sink(event: Any, marks: list[tuple[str, float]] = marks) -> None:
                marks.append((type(event).__name__, time.perf_counter()))

            asyncio.run(runner_loop(agent, fast_path=True, sink=sink))
            starts = [t for name, t in marks if name == "ToolStarted"]
            ends = [t for name, t in marks if name == "ToolFinished"]
            out[tool] = (max(ends) - min(starts)) * 1000
    return out


def eager_start(folder: Path) -> tuple[float, float]:
    """(first tool start, stream end) in ms after the step began, for a slowly streamed reply."""
    script = [
        {
            "tool_calls": [
                {"name": "add", "arguments": {"a": 1, "b": 2}},
                {"name": "add", "arguments": {"a": 3, "b": 4}},
            ],
            "chunk_delay_s": 0.05,
        },
        {"content": "done"},
    ]
    with ScriptedServer(script, chunks=6) as server:
        agent = write_agent(folder, server.base_url)
        marks: list[tuple[str, float]] = []
        asyncio.run(
            runner_loop(
                agent,
                fast_path=True,
                stream=True,
                sink=lambda e: marks.append((type(e).__name__, time.perf_counter())),
            )
        )
    begin = next(t for n, t in marks if n == "StepStarted")
    first_tool = next(t for n, t in marks if n == "ToolStarted")
    stream_end = next(t for n, t in marks if n == "AssistantMessage")
    return (first_tool - begin) * 1000, (stream_end - begin) * 1000


def prefix_stability(folder: Path) -> float:
    """Share of consecutive requests whose system message and tools are byte-identical."""
    with ScriptedServer(stepping_script(50, 1)) as server:
        agent = write_agent(folder, server.base_url)
        asyncio.run(runner_loop(agent, fast_path=True))
        prefixes = [json.dumps([r["messages"][0], r.get("tools")], sort_keys=False) for r in server.requests]
    same = sum(1 for a, b in itertools.pairwise(prefixes) if a == b)
    return same / max(1, len(prefixes) - 1)


def one_step_run(runs: int, folder: Path) -> dict[str, float]:
    """Median seconds: a one-step `runner run` vs the import floor."""
    with ScriptedServer([{"content": "hi"}], repeat=True) as server:
        agent = write_agent(folder, server.base_url)
        runner = str(Path(sys.executable).parent / "runner")
        env = dict(os.environ, RUNNER_HOME=str(folder / "home"))
        os.environ.update(env)
        return interleaved(
            {
                'python -c "import yaml, jsonschema, jinja2, httpx"': [
                    sys.executable,
                    "-c",
                    "import yaml, jsonschema, jinja2, httpx",
                ],
                "runner run (one step, fast path)": [runner, "run", str(agent), "-p", "hi"],
            },
            runs=runs,
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=15, help="interleaved runs per figure (median)")
    args = parser.parse_args(argv)
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for calls in (1, 4):
            samples = per_step(args.runs, 50, calls, folder)
            ok &= report(
                f"per step, 50 steps, {calls} tool call(s) per step (ms/step; ratios: median of rounds)",
                {k: statistics.median(v) / 1000 for k, v in samples.items()},
                floor="minimal litellm loop",
                target=1.1,
                ratios=paired_ratios(samples, "minimal litellm loop"),
                judged=[name for name in samples if name.startswith("runner")],
            )
            streaming = paired_ratios(samples, "runner (fast path)")["runner (fast path, streaming)"]
            print(
                f"## streaming on the fast path, {calls} call(s): {streaming:.2f}x of non-streaming "
                f"{'ok' if streaming <= 1.3 else 'OVER 1.3x'}"
            )
            ok &= streaming <= 1.3
        for name in ("runner (litellm)", "runner (fast path)"):
            flat = {}
            for steps in (10, 100):
                runs = per_step(max(3, args.runs // 2), steps, 1, folder, names=[name])
                flat[steps] = statistics.median(runs[name])
            ratio = flat[100] / flat[10]
            print(
                f"## history length, {name}: {flat[10]:.2f} ms/step at 10 steps, {flat[100]:.2f} at 100: "
                f"{ratio:.2f}x {'ok' if ratio <= 1.2 else 'OVER 1.2x'}"
            )
            ok &= ratio <= 1.2
        calls_ms = first_call(folder)
        extra = calls_ms["first"] - calls_ms["steady"]
        verdict = "ok" if extra <= 2 else "OVER 2 ms"
        print(
            f"## first model call of a session on a reused runtime: {calls_ms['first']:.2f} ms against "
            f"a steady step of {calls_ms['steady']:.2f} ms (+{extra:.2f} ms) {verdict}; "
            f"on a new runtime each: {calls_ms['first_new_runtime']:.2f} ms"
        )
        ok &= extra <= 2
        tools = parallel_tools(folder)
        for name, ms in tools.items():
            print(
                f"## four 200 ms {name} tools in one step: {ms:.0f} ms {'ok' if ms < 300 else 'OVER 300 ms'}"
            )
            ok &= ms < 300
        first, end = eager_start(folder)
        print(
            f"## eager start: first tool at {first:.0f} ms, stream ended at {end:.0f} ms "
            f"{'ok' if first < end else 'NOT EAGER'}"
        )
        ok &= first < end
        share = prefix_stability(folder)
        print(f"## prefix stability over 50 steps: {share * 100:.0f}% {'ok' if share == 1 else 'BROKEN'}")
        ok &= share == 1
        medians = one_step_run(args.runs, folder)
        ok &= report(
            "one-step runner run (s)",
            medians,
            floor='python -c "import yaml, jsonschema, jinja2, httpx"',
            target=3.0,
        )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
