"""Tracing on: the OpenTelemetry SDK, the OTLP/HTTP exporter and the GenAI metrics (``--otel``).

Imported only by ``runner.telemetry.enable``. Configured the standard way: the exporter reads
``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` / ``..._HEADERS`` /
``..._TIMEOUT``, the resource ``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES``, the batch
processor ``OTEL_BSP_*`` (its bounded queue is what a slow endpoint may cost a run: spans beyond it
are dropped, never waited for), the propagators ``OTEL_PROPAGATORS``. The providers are the
runner's own (not the global ones), so a library that sets those is not disturbed.

Message and tool content is recorded only when the user opts in
(``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``, or ``RUNNER_OTEL_CONTENT=true``), with
secrets redacted as in transcripts. The newest GenAI attributes (time to first chunk) are emitted
only with ``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental``, as the conventions ask.
"""

from __future__ import annotations

import collections
import contextlib
import json
import logging
import os
import threading
from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanKind

from runner.redact import REDACTED, Redactor, environment_secrets, is_secret_name
from runner.telemetry.spans import BAGGAGE_KEY, SPAN_KEY, Span, Spans
from runner.version import __version__

__all__ = ["Tracing", "capture_content_setting"]

log = logging.getLogger("runner.telemetry")

_TRUE = ("1", "true", "yes", "on")
#: Attributes of the newest GenAI conventions, emitted with the opt-in only.
_LATEST_ONLY = frozenset({"gen_ai.response.time_to_first_chunk"})
#: Buckets the GenAI conventions advise for durations (s) and token counts.
_DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)
_TOKEN_BUCKETS = tuple(float(4**i) for i in range(14))
_KINDS = {"chat": SpanKind.CLIENT}
_METRIC_LABELS = (
    "gen_ai.operation.name",
    "gen_ai.provider.name",
    "gen_ai.request.model",
    "gen_ai.response.model",
)
#: Model calls whose metrics wait for the next collection; beyond this many, the oldest one's are
#: recorded as a call ends (a reader that never collects must not make the queue grow without bound).
_PENDING_CALLS = 2048


def capture_content_setting() -> bool:
    """Whether the user opted in to message and tool content in spans."""
    for name in ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "RUNNER_OTEL_CONTENT"):
        if os.environ.get(name, "").strip().lower() in _TRUE:
            return True
    return False


def _latest() -> bool:
    opt_in = os.environ.get("OTEL_SEMCONV_STABILITY_OPT_IN", "")
    return "gen_ai_latest_experimental" in {part.strip() for part in opt_in.split(",")}


class _Warning(SpanExporter):
    """The exporter, saying once (a warning, never an error) that its endpoint does not take spans."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner
        self.warned = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            result = self.inner.export(spans)
        except Exception as exc:  # an exporter must not raise into the processor's thread
            result = SpanExportResult.FAILURE
            why = f"{type(exc).__name__}: {exc}"
        else:
            why = "the endpoint did not accept them"
        if result is SpanExportResult.FAILURE and not self.warned:
            self.warned = True
            log.warning("could not export %d span(s) over OTLP (%s); the run goes on", len(spans), why)
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


def _otlp_spans() -> SpanExporter:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()


def _otlp_metrics() -> MetricReader:
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

    return PeriodicExportingMetricReader(OTLPMetricExporter())


def _resource() -> Resource:
    """The SDK's resource (``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``, the SDK's own), with
    ``service.name`` ``runner`` and the runner's ``service.version`` where those name none (the SDK
    names a service it was not told of ``unknown_service:...``)."""
    given = dict(Resource.create().attributes)
    if str(given.get(SERVICE_NAME, "")).startswith("unknown_service") and not os.environ.get(
        "OTEL_SERVICE_NAME"
    ):
        del given[SERVICE_NAME]
    return Resource.create({SERVICE_NAME: "runner", "service.version": __version__, **given})


def _default_propagator() -> object:
    """The global propagator when it is the default one (W3C trace context and baggage, as
    ``OTEL_PROPAGATORS`` unset or ``tracecontext,baggage`` makes it); else a value it never is."""
    configured = os.environ.get("OTEL_PROPAGATORS", "tracecontext,baggage")
    textmap = propagate.get_global_textmap()
    default = [part.strip() for part in configured.split(",")] == ["tracecontext", "baggage"]
    return textmap if default and textmap.fields == {"traceparent", "tracestate", "baggage"} else object()


class _Resource(Resource):
    """The process's resource, hashed once: the OTLP encoder groups an export's spans by resource
    (a dict keyed by each span's), and ``Resource.__hash__`` JSON-encodes every attribute each time
    (a tenth of encoding a span, on the processor's thread). A resource is immutable."""

    def __init__(self, resource: Resource) -> None:
        super().__init__(resource.attributes, resource.schema_url)
        self._hash = super().__hash__()

    def __hash__(self) -> int:
        return self._hash


class Tracing:
    """The runner's tracer and meter providers, and how a scope becomes a span."""

    def __init__(
        self,
        *,
        exporter: SpanExporter | None = None,
        metric_reader: MetricReader | None = None,
        batch: bool = True,
        capture_content: bool | None = None,
    ) -> None:
        resource = _Resource(_resource())
        limits = SpanLimits()
        self.provider = TracerProvider(resource=resource, span_limits=limits, shutdown_on_exit=False)
        spans = _Warning(exporter if exporter is not None else _otlp_spans())
        self.exporter = spans
        processor = BatchSpanProcessor(spans) if batch else SimpleSpanProcessor(spans)
        self.provider.add_span_processor(processor)
        # The provider's sampler, ids and processor; the runner's own recording spans (spans.py).
        scope = InstrumentationScope("runner", __version__)
        hidden = frozenset() if _latest() else _LATEST_ONLY
        self.spans = Spans(self.provider, processor, resource, limits, scope, hidden)
        #: The SDK's own tracer for the same scope (what ``bench.telemetry_spans`` compares against).
        self.tracer = self.provider.get_tracer("runner", __version__)
        reader = metric_reader if metric_reader is not None else _otlp_metrics()
        self.meters = MeterProvider(resource=resource, metric_readers=[reader], shutdown_on_exit=False)
        meter = self.meters.get_meter("runner", __version__)
        self.duration = meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="GenAI operation duration",
            explicit_bucket_boundaries_advisory=_DURATION_BUCKETS,
        )
        self.tokens = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Number of input and output tokens used",
            explicit_bucket_boundaries_advisory=_TOKEN_BUCKETS,
        )
        # Model calls' metrics are recorded when a reader collects (the periodic export, a flush,
        # shutdown), not as each call ends: the SDK's recording (attributes cleaned and hashed, an
        # exemplar offered, a bucket found under a lock) is ~25 us a call the run would wait for.
        # The SDK runs observable instruments' callbacks at the start of every collection, before it
        # reads the histograms; this one observes nothing (so nothing of it is exported).
        #: Each call's duration (s), attributes, error and span context (not the span: it is freed
        #: once exported).
        self._pending: collections.deque[tuple[float, Mapping[str, Any], str | None, trace.SpanContext]] = (
            collections.deque()
        )
        meter.create_observable_gauge("runner.telemetry.pending", callbacks=[self._record_pending])
        for noisy in ("opentelemetry.exporter", "opentelemetry.sdk._shared_internal"):
            logging.getLogger(noisy).setLevel(logging.CRITICAL)  # each retry: the one warning is ours
        self.capture_content = capture_content_setting() if capture_content is None else capture_content
        self._environment = frozenset(environment_secrets(os.environ))
        self._redactors: dict[frozenset[str], Redactor] = {}
        self._w3c = _default_propagator()

    # ----------------------------------------------------------------- spans

    def start(
        self, name: str, attributes: Mapping[str, Any], parent: Any, *, scope: str = ""
    ) -> tuple[trace.Span, object, Any]:
        """Start a span under ``parent`` (a context; None: the current one) and make it current
        (``scope``: what kind of work it is, ``chat`` a client span)."""
        kind = _KINDS.get(scope, SpanKind.INTERNAL)
        if parent is None:  # read once, for the span's parent and the context it is set in
            parent = otel_context.get_current()
        span = self.spans.start(name, attributes, parent, kind)
        context = Context({**parent, SPAN_KEY: span})  # what ``trace.set_span_in_context`` makes
        return span, otel_context.attach(context), context

    def end(
        self,
        span: trace.Span,
        token: object,
        attributes: Mapping[str, Any],
        error: str | None,
        exc: BaseException | None,
        took_s: float,
        *,
        scope: str = "",
    ) -> None:
        """Restore the context, end ``span`` (its error, if any; it reads its scope's ``attributes``,
        which it was started with, once ended), queue a model call's (``scope`` ``chat``) metrics
        for the next collection. ``took_s``: the call's duration as its scope measured it (a span
        the sampler left unrecorded has no times of its own; the call is measured all the same)."""
        otel_context.detach(token)  # type: ignore[arg-type]  # never raises (``detach``)
        if error and isinstance(span, Span):  # a span the sampler dropped records nothing
            span.fail(error, str(getattr(exc, "message", "")) or None)
        span.end()
        if scope == "chat":
            pending = self._pending
            pending.append((took_s, attributes, error, span.get_span_context()))
            if len(pending) > _PENDING_CALLS:  # the oldest now: a steady cost, never a burst
                with contextlib.suppress(IndexError):
                    self._metrics(*pending.popleft())

    def _record_pending(self, options: object = None) -> list[Any]:
        """Record the metrics of the model calls that ended since the last collection (the
        observable gauge's callback: it observes nothing)."""
        pending = self._pending
        while True:
            try:
                call = pending.popleft()
            except IndexError:
                return []
            self._metrics(*call)

    def _metrics(
        self, took: float, attributes: Mapping[str, Any], error: str | None, call: trace.SpanContext
    ) -> None:
        labels = {k: attributes[k] for k in _METRIC_LABELS if attributes.get(k) is not None}
        if error:
            labels["error.type"] = error
        # The call's span as the context: an exemplar (trace-based, the default) names the call.
        context = trace.set_span_in_context(trace.NonRecordingSpan(call))
        self.duration.record(took, labels, context)
        for kind, key in (("input", "gen_ai.usage.input_tokens"), ("output", "gen_ai.usage.output_tokens")):
            value = attributes.get(key)
            if isinstance(value, int):
                self.tokens.record(value, {**labels, "gen_ai.token.type": kind}, context)

    def current_event(self, name: str, attributes: Mapping[str, Any]) -> None:
        """An event on the current span (a retry, a wait)."""
        span = trace.get_current_span()
        if span.is_recording():
            span.add_event(name, {k: v for k, v in attributes.items() if v is not None})

    def redacted(self, value: Any, secrets: frozenset[str]) -> str:
        """Content as the span holds it: JSON text, secrets masked (the environment's and ``secrets``,
        by value; any value under a secret-like key name)."""
        text = value if isinstance(value, str) else json.dumps(_mask_keys(value), ensure_ascii=False)
        redact = self._redactors.get(secrets)
        if redact is None:
            if len(self._redactors) > 64:
                self._redactors.clear()
            redact = self._redactors[secrets] = Redactor(self._environment | secrets)
        return redact(text)

    # ----------------------------------------------------------------- propagation

    def inject(self, carrier: MutableMapping[str, str]) -> None:
        """Write the current trace context into ``carrier`` (``OTEL_PROPAGATORS``, W3C by default).

        With the default propagators (W3C trace context and baggage) and no baggage in the context,
        the ``traceparent`` (and ``tracestate``) are written here as the W3C propagator writes them,
        without its dozen calls a model request (``tests/telemetry/test_spans.py`` holds the two to
        one answer); anything else goes through the configured propagator."""
        current = otel_context.get_current()
        if propagate.get_global_textmap() is self._w3c and not current.get(BAGGAGE_KEY):
            context = self.spans.span_context_in(current)
            if context is not None:
                ids = f"{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"
                carrier["traceparent"] = f"00-{ids}"
                if context.trace_state:
                    carrier["tracestate"] = context.trace_state.to_header()
            return
        propagate.inject(carrier)

    def attach(self, carrier: Mapping[str, Any]) -> object | None:
        """Make ``carrier``'s trace context current; None (a new trace) when it names none or is malformed."""
        strings = {str(k).lower(): v for k, v in carrier.items() if isinstance(v, str)}
        context = propagate.extract(strings)
        if not trace.get_current_span(context).get_span_context().is_valid:
            return None
        return otel_context.attach(context)

    def detach(self, token: object) -> None:
        """Undo ``attach``. The API's ``detach`` never raises: a token from another context (a
        scope ended where a generator was closed elsewhere) is logged by it and left."""
        otel_context.detach(token)  # type: ignore[arg-type]

    # ----------------------------------------------------------------- the end

    def flush(self, timeout_s: float) -> None:
        """Export what is queued, waiting at most ``timeout_s`` (the SDK's own flush exports in the
        caller's thread for as long as the exporter's timeout: a slow endpoint would hold the exit)."""

        def work() -> None:
            self.provider.force_flush(int(timeout_s * 1000))
            self.meters.force_flush(int(timeout_s * 1000))

        worker = threading.Thread(target=work, name="runner-otel-flush", daemon=True)
        worker.start()
        worker.join(timeout_s)
        if worker.is_alive() and not self.exporter.warned:
            self.exporter.warned = True
            log.warning(
                "could not export spans over OTLP within %g s (%s); they are dropped, the run is not",
                timeout_s,
                os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
                or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
                or "http://localhost:4318",
            )

    def shutdown(self) -> None:
        """Flush (bounded) and stop the providers."""
        self.flush(2.0)
        worker = threading.Thread(target=self._stop, name="runner-otel-shutdown", daemon=True)
        worker.start()
        worker.join(2.0)

    def _stop(self) -> None:
        self.provider.shutdown()
        self.meters.shutdown(timeout_millis=2000)


def _mask_keys(value: Any) -> Any:
    """``value`` with the values of secret-named keys (``api_key``, ``password``) masked."""
    if isinstance(value, dict):
        return {k: REDACTED if is_secret_name(str(k)) else _mask_keys(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_mask_keys(v) for v in value]
    return value
