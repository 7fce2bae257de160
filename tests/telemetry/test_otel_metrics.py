"""The GenAI metrics of model calls (runner/telemetry/otel.py): recorded when a reader collects, not
as each call ends, with the call's span as their context; bounded while no reader collects."""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import runner.telemetry as telemetry
from runner.models.base import Reply, Usage
from runner.telemetry import otel
from runner.testing import run_agent, text, tool_call
from tests.telemetry.helpers import Traces, write_agent

TOOLS = '''
def lookup(city: str) -> str:
    """Weather of a city."""
    return f"sunny in {city}"
'''

BODY = """
tools:
  - python: $TOOLS
"""


def _pending() -> int:
    tracing = telemetry._tracing
    assert isinstance(tracing, otel.Tracing)
    return len(tracing._pending)


async def test_model_call_metrics_are_recorded_at_collection_with_the_call_span_as_exemplar(
    tmp_path: Path, traces: Traces
) -> None:
    path = write_agent(tmp_path, BODY, TOOLS)
    script = [tool_call("lookup", city="Oslo"), Reply(content="Sunny.", usage=Usage(7, 3, 10))]
    await run_agent(path, "Weather?", script=script)
    assert _pending() == 2  # both calls ended; nothing was recorded in the SDK on the run's way
    durations = traces.metric_points("gen_ai.client.operation.duration")
    assert _pending() == 0
    assert [p.count for p in durations] == [2]
    chats = {s.context.span_id for s in traces.named("chat scripted")}
    exemplars = durations[0].exemplars
    assert exemplars and {e.span_id for e in exemplars} <= chats  # the call, not its agent
    tokens = traces.metric_points("gen_ai.client.token.usage")
    assert sorted(p.attributes["gen_ai.token.type"] for p in tokens) == ["input", "output"]
    assert sum(p.count for p in tokens) == 4  # input and output of each call


async def test_beyond_the_bound_the_oldest_call_is_recorded_as_a_call_ends(
    tmp_path: Path, traces: Traces, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(otel, "_PENDING_CALLS", 1)
    path = write_agent(tmp_path, BODY, TOOLS)
    script = [tool_call("lookup", city="A"), tool_call("lookup", city="B"), text("Both sunny.")]
    await run_agent(path, "Weather?", script=script)
    assert _pending() == 1
    assert [p.count for p in traces.metric_points("gen_ai.client.operation.duration")] == [3]


async def test_a_streamed_call_notes_its_time_to_first_chunk_once_with_the_opt_in(
    tmp_path: Path, traces: Traces, monkeypatch: pytest.MonkeyPatch
) -> None:
    tracing = telemetry._tracing
    seen: list[float] = []
    original = telemetry.Scope.first_chunk

    def counted(scope: telemetry.Scope) -> None:
        seen.append(1.0)
        original(scope)

    monkeypatch.setattr(telemetry.Scope, "first_chunk", counted)
    # OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental, as tracing was enabled
    monkeypatch.setattr(tracing.spans, "hidden", frozenset())
    path = write_agent(tmp_path, "")  # model.stream is on by default
    await run_agent(path, "Hi", script=[text("Hello there, " * 20)])
    chat = traces.one("chat scripted")
    first = chat.attributes["gen_ai.response.time_to_first_chunk"]
    assert isinstance(first, float) and 0 < first < 5
    assert seen == [1.0]  # once for the call, not once for each of its chunks


async def test_the_resource_is_hashed_once_not_for_every_exported_span(
    tmp_path: Path, traces: Traces, monkeypatch: pytest.MonkeyPatch
) -> None:
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.resources import Resource

    path = write_agent(tmp_path, BODY, TOOLS)
    await run_agent(path, "Weather?", script=[tool_call("lookup", city="Oslo"), text("Sunny.")])
    spans = traces.spans
    resource = spans[0].resource
    plain = Resource(resource.attributes, resource.schema_url)
    assert resource == plain and hash(resource) == hash(plain)
    hashed: list[Resource] = []
    original = Resource.__hash__

    def counting(self: Resource) -> int:
        hashed.append(self)
        return original(self)

    monkeypatch.setattr(Resource, "__hash__", counting)
    encoded = encode_spans(spans)  # what the OTLP exporter sends: spans grouped by resource
    assert len(encoded.resource_spans) == 1 and len(spans) == 4
    assert hashed == []  # not JSON-encoded again for each span


@pytest.mark.parametrize(
    ("environment", "expected"),
    [
        ({}, "runner"),
        ({"OTEL_SERVICE_NAME": "my-agents"}, "my-agents"),
        ({"OTEL_RESOURCE_ATTRIBUTES": "service.name=billing,team=ops"}, "billing"),
    ],
    ids=["default", "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES"],
)
def test_the_service_is_named_runner_unless_the_environment_names_it(
    monkeypatch: pytest.MonkeyPatch, environment: dict[str, str], expected: str
) -> None:
    for name in ("OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    attributes = otel._resource().attributes
    assert attributes["service.name"] == expected
    assert attributes["service.version"] == otel.__version__


async def test_a_call_the_sampler_leaves_unrecorded_is_measured_all_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "always_off")  # docs/observability.md: sampling
    exporter, reader = InMemorySpanExporter(), InMemoryMetricReader()
    telemetry.enable(exporter=exporter, metric_reader=reader, batch=False)
    try:
        path = write_agent(tmp_path, BODY, TOOLS)
        script = [tool_call("lookup", city="Oslo"), Reply(content="Sunny.", usage=Usage(7, 3, 10))]
        await run_agent(path, "Weather?", script=script)
        traces = Traces(exporter, reader)
        assert exporter.get_finished_spans() == ()  # nothing recorded
        durations = traces.metric_points("gen_ai.client.operation.duration")
        assert [p.count for p in durations] == [2]  # both calls measured, from their scopes
        assert 0 < durations[0].sum < 60
    finally:
        telemetry.disable()
