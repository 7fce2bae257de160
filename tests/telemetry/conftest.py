"""Fixtures of the telemetry tests: tracing on with the SDK's in-memory exporter and metric reader."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import runner.telemetry as telemetry
from tests.batch.conftest import cli, path_kind, serve  # noqa: F401 (the CLI tests' fixtures)
from tests.telemetry.helpers import Traces


@pytest.fixture
def traces(monkeypatch: pytest.MonkeyPatch) -> Iterator[Traces]:
    """Tracing on for the test (spans exported as they end), off again after it."""
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    monkeypatch.delenv("RUNNER_OTEL_CONTENT", raising=False)
    exporter, reader = InMemorySpanExporter(), InMemoryMetricReader()
    telemetry.enable(exporter=exporter, metric_reader=reader, batch=False)
    try:
        yield Traces(exporter, reader)
    finally:
        telemetry.disable()
