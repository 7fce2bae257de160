"""What ``output:`` costs a turn (issue 14), against the same turn without it, measured in one run.

Each turn calls one tool and then answers, on the httpx fast path against the scripted server on
loopback. Contenders: the plain agent (the floor), the agent with an inline ``output:`` schema (the
``response_format`` strategy: the answer is read and validated), and the same under the final-answer
tool. The requests per turn are counted on the server: a matching first answer costs none more.
Target: the ``response_format`` turn within 1.1x of the floor; the final-answer tool's turn is shown
for reference (its requests carry one more tool, and it writes two more history messages).

Run: ``python -m bench.output [--runs N] [--turns N]``. Medians of interleaved rounds; paired ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import paired_ratios, report
from runner.testing import ScriptedServer

ANSWER = {"city": "Vancouver", "temps": [11, 12, 9], "summary": "mild"}
OUTPUT = """
output:
  type: object
  properties:
    city: {type: string}
    temps: {type: array, items: {type: number}}
    summary: {type: string}
  required: [city, temps, summary]
  additionalProperties: false
"""


def reply(body: dict[str, Any]) -> dict[str, Any]:
    if body["messages"][-1]["role"] != "tool":
        return {"tool_calls": [{"name": "forecast", "arguments": {"city": "Vancouver"}}]}
    if any(t["function"]["name"] == "final_answer" for t in body.get("tools") or ()):
        return {"tool_calls": [{"name": "final_answer", "arguments": ANSWER}]}
    return {"content": json.dumps(ANSWER)}


def write(folder: Path, name: str, base_url: str, extra: str) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(
        f"version: 1\nname: {name}\nmodel:\n  id: openai/scripted\n  api_base: {base_url}\n"
        f"  api_key: ${{BENCH_KEY:-sk-bench}}\n  stream: false\ntools:\n  - python: bench_output_tools\n"
        + extra,
        encoding="utf-8",
    )
    return path


async def one_round(agents: dict[str, Any], turns: int, shift: int = 0) -> dict[str, float]:
    """Seconds per turn of each agent, in this round (the order rotated by ``shift``)."""
    times: dict[str, float] = {}
    order = list(agents.items())
    order = order[shift % len(order) :] + order[: shift % len(order)]
    for name, agent in order:
        start = time.perf_counter()
        for _ in range(turns):
            result = await agent.run("weather in Vancouver?")
            assert result.reason == "done"
        times[name] = (time.perf_counter() - start) / turns
    return times


async def measure(runs: int, turns: int) -> tuple[dict[str, list[float]], dict[str, float]]:
    import runner
    from runner.runtime import RuntimeSettings

    with tempfile.TemporaryDirectory() as tmp, ScriptedServer(reply) as server:
        folder = Path(tmp)
        (folder / "bench_output_tools.py").write_text(
            'def forecast(city: str) -> str:\n    """Temperatures."""\n    return "11, 12, 9"\n'
        )
        settings = RuntimeSettings(home=folder / "home", write_transcript=False)
        agents = {
            "plain answer (floor)": runner.Agent.from_file(
                write(folder, "plain", server.base_url, ""), settings=settings
            ),
            "output: via response_format": runner.Agent.from_file(
                write(folder, "typed", server.base_url, OUTPUT), settings=settings
            ),
        }
        tool = runner.Agent.from_file(write(folder, "tooled", server.base_url, OUTPUT), settings=settings)
        await tool.open()
        tool._runtime.learned_output[tool._runtime.model.name] = "tool"  # as after a refusal
        agents["output: via the final-answer tool"] = tool
        for agent in agents.values():
            await agent.open()
        samples: dict[str, list[float]] = {name: [] for name in agents}
        await one_round(agents, 3)  # warm-up: connections, validators
        counts: dict[str, float] = {}
        for number in range(runs):
            before = len(server.requests)
            for name, value in (await one_round(agents, turns, number)).items():
                samples[name].append(value)
            counts = {"requests per turn (all three)": (len(server.requests) - before) / (3 * turns)}
        for agent in agents.values():
            await agent.aclose()
    return samples, counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--turns", type=int, default=20)
    args = parser.parse_args(argv)
    samples, counts = asyncio.run(measure(args.runs, args.turns))
    import statistics

    medians = {name: statistics.median(values) for name, values in samples.items()}
    ok = report(
        "a turn with output: vs the same turn without (one tool call, then the answer)",
        medians,
        floor="plain answer (floor)",
        target=1.1,
        ratios=paired_ratios(samples, "plain answer (floor)"),
        judged=["output: via response_format"],
    )
    for name, value in counts.items():
        print(f"{name:<46} {value:8.2f}")
    return 0 if ok and all(v == 2 for v in counts.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
