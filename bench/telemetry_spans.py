"""What one step's telemetry costs on its own, against the OpenTelemetry SDK's calls for the same
spans (issue 28: tracing on within 1.05x per step).

``python -m bench.telemetry --only steps`` times whole sessions, where the spans are a few percent of
a step and other processes' load moves the figure by as much. This makes one step's telemetry calls
as the runner makes them (a streamed ``chat`` scope with its reply and ``traceparent``, an
``execute_tool`` scope with its result) 30 times in a row under an ``invoke_agent`` scope, and in
alternate rounds the SDK's calls alone for the same two spans (started with the same attributes,
made current, the reply's and result's attributes set, ended, one inject): the floor no wrapper can
go under. Spans go to an exporter that drops them (through the batch processor, as with OTLP); the
metrics queued by the model calls are recorded after each round (``collect``, shown apart).

Run: ``python -m bench.telemetry_spans [--runs N]``; it fails when the runner's calls cost more than
1.5x the SDK's (main before 2026-12-03's changes: 2.2x; after: 1.3x; with the runner's own span,
2026-12-04: 0.35x).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from bench.common import paired_ratios

STEPS = 30


def _runner_step(telemetry: Any, reply: Any, result: Any) -> Callable[[], None]:
    messages = [{"role": "user", "content": "go"}]
    headers = {"authorization": "Bearer sk-bench", "content-type": "application/json"}

    def step() -> None:
        with telemetry.chat("openai/scripted", stream=True, params={}) as scope:
            scope.content("gen_ai.input.messages", lambda: messages)
            telemetry.inject({**headers})
            scope.first_chunk()
            scope.reply(reply)
        with telemetry.tool("add", call_id="call_1", agent_name="adder") as called:
            called.tool_result(result, None)

    return step


def _sdk_step(tracer: Any) -> Callable[[], None]:
    from opentelemetry import context, propagate, trace

    chat = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "openai/scripted",
        "gen_ai.request.stream": True,
        "gen_ai.agent.name": "adder",
    }
    answered = {
        "gen_ai.response.model": "scripted",
        "gen_ai.response.id": "r1",
        "gen_ai.response.finish_reasons": ("tool_calls",),
        "gen_ai.usage.input_tokens": 30,
        "gen_ai.usage.output_tokens": 5,
    }
    tool = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "add",
        "gen_ai.tool.call.id": "call_1",
        "gen_ai.tool.type": "function",
        "gen_ai.agent.name": "adder",
    }
    ran = {"gen_ai.tool.type": "function", "runner.tool.source": "python", "runner.tool.outcome": "ok"}

    def step() -> None:
        span = tracer.start_span("chat scripted", kind=trace.SpanKind.CLIENT, attributes=chat)
        token = context.attach(trace.set_span_in_context(span))
        propagate.inject({})
        span.set_attributes(answered)
        context.detach(token)
        span.end()
        span = tracer.start_span("execute_tool add", attributes=tool)
        token = context.attach(trace.set_span_in_context(span))
        span.set_attributes(ran)
        context.detach(token)
        span.end()

    return step


def measure(runs: int) -> dict[str, list[float]]:
    """``runs`` rounds of each: seconds a step (the SDK's calls, the runner's, the collection)."""
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    import runner.telemetry as telemetry
    from runner.models.base import Reply, Usage
    from runner.tools.base import ToolResult

    class Dropped(SpanExporter):
        def export(self, spans: Sequence[Any]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    reader = InMemoryMetricReader()
    telemetry.enable(exporter=Dropped(), metric_reader=reader)
    reply = Reply(content=None, finish_reason="tool_calls", usage=Usage(30, 5, 35), model="scripted")
    result = ToolResult(call_id="call_1", name="add", content="3", arguments={"a": 1, "b": 2})
    steps = {
        "the SDK's calls alone": _sdk_step(telemetry._tracing.tracer),
        "runner.telemetry": _runner_step(telemetry, reply, result),
    }
    samples: dict[str, list[float]] = {name: [] for name in (*steps, "metrics recorded at collection")}
    try:
        for round_ in range(runs + 3):  # three rounds of warm-up
            for name, step in steps.items():
                started = time.perf_counter()
                with telemetry.agent("adder", conversation_id="bench", model="openai/scripted"):
                    for _ in range(STEPS):
                        step()
                took = (time.perf_counter() - started) / STEPS
                started = time.perf_counter()
                reader.get_metrics_data()
                collected = (time.perf_counter() - started) / STEPS
                if round_ >= 3:
                    samples[name].append(took)
                    if name == "runner.telemetry":
                        samples["metrics recorded at collection"].append(collected)
    finally:
        telemetry.disable()
    return samples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.telemetry_spans", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--runs", type=int, default=31, help="rounds of each (default 31)")
    args = parser.parse_args(argv)
    samples = measure(args.runs)
    collected = samples.pop("metrics recorded at collection")
    floor = "the SDK's calls alone"
    ratio = paired_ratios(samples, floor)["runner.telemetry"]
    print(f"## one step's telemetry ({STEPS} steps a round, median of {args.runs})")
    for name, values in samples.items():
        shown = f"{ratio:5.2f}x" if name != floor else " 1.00x"
        print(f"{name:<46} {statistics.median(values) * 1e6:8.1f} us  {shown}")
    print(f"{'metrics recorded at collection, a step':<46} {statistics.median(collected) * 1e6:8.1f} us")
    ok = ratio <= 1.5
    if not ok:
        print("OVER: the runner's calls cost more than 1.5x the SDK's")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
