"""The runner's recording span against the SDK's: the same spans reach the exporter, under the
same sampler, limits and propagation rules (``runner/telemetry/spans.py``)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from opentelemetry import baggage, propagate, trace
from opentelemetry import context as otel_context
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode

import runner.telemetry as telemetry
from runner.telemetry.spans import Span

REMOTE_SAMPLED = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
REMOTE_UNSAMPLED = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"


@pytest.fixture
def tracing(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Any]]:
    """Tracing on as the environment set by the test says (``tracing()`` after ``setenv``)."""
    exporter = InMemorySpanExporter()

    def start() -> Any:
        telemetry.enable(exporter=exporter, metric_reader=InMemoryMetricReader(), batch=False)
        return telemetry._tracing, exporter

    try:
        yield start
    finally:
        telemetry.disable()


def _both(
    tracing: Any, work: Callable[[Callable[..., trace.Span]], None]
) -> tuple[ReadableSpan, ReadableSpan]:
    """``work`` done once with the SDK's tracer and once with the runner's spans: what each exported."""
    sdk = tracing.tracer

    def sdk_start(name: str, attributes: dict[str, Any], kind: SpanKind = SpanKind.INTERNAL) -> trace.Span:
        return sdk.start_span(name, kind=kind, attributes=attributes)

    def runner_start(name: str, attributes: dict[str, Any], kind: SpanKind = SpanKind.INTERNAL) -> trace.Span:
        return tracing.spans.start(name, dict(attributes), None, kind)

    work(sdk_start)
    work(runner_start)
    exported = tracing.exporter.inner.get_finished_spans()
    assert len(exported) == 2, [s.name for s in exported]
    return exported[0], exported[1]


def _same(sdk: ReadableSpan, ours: ReadableSpan) -> None:
    assert ours.name == sdk.name
    assert ours.kind == sdk.kind
    assert dict(ours.attributes or {}) == dict(sdk.attributes or {})
    assert ours.dropped_attributes == sdk.dropped_attributes
    assert [(e.name, dict(e.attributes or {})) for e in ours.events] == [
        (e.name, dict(e.attributes or {})) for e in sdk.events
    ]
    assert ours.dropped_events == sdk.dropped_events
    assert (ours.status.status_code, ours.status.description) == (
        sdk.status.status_code,
        sdk.status.description,
    )
    assert ours.resource is sdk.resource or ours.resource.attributes == sdk.resource.attributes
    assert ours.instrumentation_scope == sdk.instrumentation_scope
    assert ours.context.trace_flags == sdk.context.trace_flags
    assert ours.start_time is not None and ours.end_time is not None and ours.end_time >= ours.start_time
    assert (ours.parent is None) == (sdk.parent is None)


def test_a_span_reaches_the_exporter_as_the_sdks_own_would(tracing: Callable[..., Any]) -> None:
    def work(start: Callable[..., trace.Span]) -> None:
        span = start(
            "chat gpt", {"gen_ai.operation.name": "chat", "gen_ai.request.stream": True}, SpanKind.CLIENT
        )
        span.set_attributes({"gen_ai.usage.input_tokens": 30, "gen_ai.response.finish_reasons": ("stop",)})
        span.set_attribute("runner.usage.cost_usd", 0.25)
        span.add_event("runner.hook", {"runner.hook.decision": "deny", "runner.step": 2})
        span.set_status(Status(StatusCode.ERROR, "boom"))
        span.end()

    tracing_, _ = tracing()
    sdk, ours = _both(tracing_, work)
    _same(sdk, ours)
    assert (ours.attributes or {})["gen_ai.response.finish_reasons"] == ("stop",)


def test_values_that_are_not_plain_are_cleaned_as_the_sdk_cleans_them(
    tracing: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    def work(start: Callable[..., trace.Span]) -> None:
        span = start("x", {"a.list": ["one", "two"], "a.dict": {"no": 1}, "a.mixed": (1, "two"), "ok": 1})
        span.set_attribute("later.list", [1, 2])
        span.add_event("e", {"e.list": ["x"], "e.bad": object()})  # type: ignore[dict-item]
        span.end()

    tracing_, _ = tracing()
    with caplog.at_level(logging.WARNING):
        sdk, ours = _both(tracing_, work)
    _same(sdk, ours)
    attributes = ours.attributes or {}
    assert attributes["a.list"] == ("one", "two") and attributes["later.list"] == (1, 2)
    assert sum("Invalid type" in r.getMessage() for r in caplog.records) == 2  # once for each tracer


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "3"),
        ("OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", "4"),
        ("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "5"),
        ("OTEL_SPAN_EVENT_COUNT_LIMIT", "2"),
        ("OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT", "1"),
    ],
)
def test_the_configured_span_limits_apply_as_with_the_sdk(
    tracing: Callable[..., Any], monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)

    def work(start: Callable[..., trace.Span]) -> None:
        span = start("x", {"a": "a long value", "b": "bbbbbbbb", "c": 3})
        span.set_attributes({"d": "dddddddd", "e": 5})
        for index in range(4):
            span.add_event(f"event {index}", {"k": "a long event value", "n": index})
        span.end()

    tracing_, _ = tracing()
    sdk, ours = _both(tracing_, work)
    _same(sdk, ours)
    changed = (
        sdk.dropped_attributes
        or sdk.dropped_events
        or any(e.dropped_attributes for e in sdk.events)
        or any(len(str(v)) < 8 for k, v in (sdk.attributes or {}).items() if k in ("b", "d"))
    )
    assert changed, "the limit changed nothing: the test proves nothing"


def test_status_rules_and_what_an_ended_span_ignores(tracing: Callable[..., Any]) -> None:
    def work(start: Callable[..., trace.Span]) -> None:
        span = start("x", {"a": 1})
        span.set_status(StatusCode.UNSET)
        span.set_status(Status(StatusCode.OK))
        span.set_status(Status(StatusCode.ERROR, "after ok"))  # OK is final
        span.update_name("renamed")
        span.end()
        span.set_attribute("late", 1)
        span.add_event("late")
        span.update_name("late")
        span.end()  # a second end is ignored: one export

    tracing_, _ = tracing()
    sdk, ours = _both(tracing_, work)
    _same(sdk, ours)
    assert ours.name == "renamed" and ours.status.status_code is StatusCode.OK
    assert "late" not in (ours.attributes or {}) and not ours.events


def test_an_exception_is_recorded_as_the_sdk_records_it(tracing: Callable[..., Any]) -> None:
    def work(start: Callable[..., trace.Span]) -> None:
        span = start("x", {})
        try:
            raise ValueError("bad value")
        except ValueError as exc:
            span.record_exception(exc, {"extra": 1})
        span.end()

    tracing_, _ = tracing()
    sdk, ours = _both(tracing_, work)
    assert [e.name for e in ours.events] == ["exception"]
    mine, theirs = dict(ours.events[0].attributes or {}), dict(sdk.events[0].attributes or {})
    assert mine.keys() == theirs.keys()
    assert mine["exception.type"] == theirs["exception.type"] == "ValueError"
    assert mine["exception.message"] == "bad value" and "line" in str(mine["exception.stacktrace"])


@pytest.mark.parametrize(
    ("sampler", "parent", "recorded"),
    [
        (None, None, True),  # the default: a root is sampled
        (None, REMOTE_SAMPLED, True),
        (None, REMOTE_UNSAMPLED, False),  # the default follows its parent
        ("always_off", None, False),
        ("always_on", REMOTE_UNSAMPLED, True),
        ("traceidratio", None, False),  # with OTEL_TRACES_SAMPLER_ARG=0
        ("parentbased_always_off", None, False),
    ],
)
def test_the_sampler_decides_as_it_does_for_the_sdk(
    tracing: Callable[..., Any],
    monkeypatch: pytest.MonkeyPatch,
    sampler: str | None,
    parent: str | None,
    recorded: bool,
) -> None:
    if sampler is not None:
        monkeypatch.setenv("OTEL_TRACES_SAMPLER", sampler)
        monkeypatch.setenv("OTEL_TRACES_SAMPLER_ARG", "0")
    tracing_, exporter = tracing()
    carrier = {"traceparent": parent} if parent else {}
    with telemetry.continue_trace(carrier), telemetry.chat("openai/gpt", stream=False) as scope:
        assert isinstance(scope, telemetry.Scope)
        span = scope.span
        sdk = tracing_.tracer.start_span("sdk")
        sdk_recording = sdk.is_recording()
        headers = telemetry.trace_headers()
        sdk.end()
    assert isinstance(span, Span) is recorded
    assert sdk_recording is recorded
    assert span.get_span_context().trace_flags.sampled == sdk.get_span_context().trace_flags.sampled
    if parent:
        assert span.get_span_context().trace_id == int(parent.split("-")[1], 16)
    assert (
        bool(int(headers["traceparent"].split("-")[3], 16) & 1) is recorded
    )  # the context goes on all the same
    assert [s.name for s in exporter.get_finished_spans()] == (["sdk", "chat openai/gpt"] if recorded else [])


@pytest.mark.parametrize(
    "incoming",
    [
        {"traceparent": REMOTE_SAMPLED},
        {"traceparent": REMOTE_SAMPLED, "tracestate": "vendor=abc,other=1"},
        {"traceparent": REMOTE_SAMPLED, "baggage": "user=alice,team=blue"},
    ],
)
def test_a_requests_trace_context_is_written_as_the_configured_propagator_writes_it(
    tracing: Callable[..., Any], incoming: dict[str, str]
) -> None:
    tracing()
    with telemetry.continue_trace(incoming), telemetry.chat("openai/gpt", stream=False):
        ours = telemetry.trace_headers()
        theirs: dict[str, str] = {}
        propagate.inject(theirs)
    assert ours == theirs
    assert ours["traceparent"].split("-")[1] == REMOTE_SAMPLED.split("-")[1]
    assert ("tracestate" in ours) == ("tracestate" in incoming)
    assert ("baggage" in ours) == ("baggage" in incoming)


def test_another_propagator_is_used_as_configured(
    tracing: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from opentelemetry.propagators.textmap import DefaultGetter, DefaultSetter, TextMapPropagator

    class Mine(TextMapPropagator):
        def extract(self, carrier: Any, context: Any = None, getter: Any = DefaultGetter()) -> Any:
            return context or otel_context.get_current()

        def inject(self, carrier: Any, context: Any = None, setter: Any = DefaultSetter()) -> None:
            setter.set(carrier, "x-mine", "yes")

        @property
        def fields(self) -> set[str]:
            return {"x-mine"}

    tracing()
    old = propagate.get_global_textmap()
    propagate.set_global_textmap(Mine())
    try:
        with telemetry.chat("openai/gpt", stream=False):
            assert telemetry.trace_headers() == {"x-mine": "yes"}
    finally:
        propagate.set_global_textmap(old)


def test_baggage_set_in_the_process_goes_out_with_the_trace_context(tracing: Callable[..., Any]) -> None:
    tracing()
    token = otel_context.attach(baggage.set_baggage("tenant", "acme"))
    try:
        with telemetry.chat("openai/gpt", stream=False):
            headers = telemetry.trace_headers()
    finally:
        otel_context.detach(token)
    assert headers["baggage"] == "tenant=acme" and headers["traceparent"].startswith("00-")


@pytest.mark.parametrize("opted_in", [False, True])
def test_the_newest_attributes_and_none_values_are_left_out_unless_opted_in(
    tracing: Callable[..., Any], monkeypatch: pytest.MonkeyPatch, opted_in: bool
) -> None:
    if opted_in:
        monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "http, gen_ai_latest_experimental")
    _, exporter = tracing()
    with telemetry.chat("openai/gpt", stream=True) as scope:
        scope.first_chunk()
        scope.set({"gen_ai.response.id": None, "gen_ai.usage.input_tokens": 3})
    (span,) = exporter.get_finished_spans()
    attributes = dict(span.attributes or {})
    assert ("gen_ai.response.time_to_first_chunk" in attributes) is opted_in
    assert "gen_ai.response.id" not in attributes and attributes["gen_ai.usage.input_tokens"] == 3
    assert "gen_ai.agent.name" not in attributes  # None outside an agent


def test_a_failed_scope_ends_its_span_with_the_error_last(tracing: Callable[..., Any]) -> None:
    _, exporter = tracing()
    with pytest.raises(TimeoutError), telemetry.tool("add", call_id="c1", agent_name="adder") as scope:
        scope.set({"error.type": "tool_error"})
        raise TimeoutError("slow")
    (span,) = exporter.get_finished_spans()
    assert (span.attributes or {})["error.type"] == "TimeoutError"
    assert span.status.status_code is StatusCode.ERROR


def test_the_keys_a_context_is_read_by_are_the_apis_own(
    tracing: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from opentelemetry.context import Context

    from runner.telemetry import spans

    runner_tracing, _ = tracing()
    parent = runner_tracing.spans.start("invoke_agent a", {}, None, SpanKind.INTERNAL)
    assert trace.set_span_in_context(parent, Context()) == {spans.SPAN_KEY: parent}
    assert trace.get_current_span(Context({spans.SPAN_KEY: parent})) is parent
    assert dict(baggage.get_all(Context({spans.BAGGAGE_KEY: {"tenant": "a"}}))) == {"tenant": "a"}

    # Under the runner's own span, neither a child's start nor a request's traceparent asks the
    # API's chain of calls: each reads the context's span with one lookup.
    def asked(context: Any = None) -> trace.Span:
        raise AssertionError("the API's get_current_span was called")

    monkeypatch.setattr(spans.trace, "get_current_span", asked)
    context = trace.set_span_in_context(parent)
    child = runner_tracing.spans.start("chat m", {}, context, SpanKind.CLIENT)
    assert child.parent.span_id == parent.get_span_context().span_id
    token = otel_context.attach(context)
    try:
        carrier: dict[str, str] = {}
        runner_tracing.inject(carrier)
    finally:
        otel_context.detach(token)
    assert carrier["traceparent"].split("-")[2] == f"{parent.get_span_context().span_id:016x}"
