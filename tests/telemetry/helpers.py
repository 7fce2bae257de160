"""Helpers of the telemetry tests: what tracing recorded, agent files in tmp_path."""

from __future__ import annotations

import itertools
import textwrap
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

_serial = itertools.count(1)


@dataclass
class Traces:
    """What tracing recorded: finished spans and the metric reader."""

    exporter: InMemorySpanExporter
    metrics: InMemoryMetricReader

    @property
    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.spans if s.name == name]

    def one(self, name: str) -> ReadableSpan:
        found = self.named(name)
        assert len(found) == 1, f"{name}: {[s.name for s in self.spans]}"
        return found[0]

    def metric_points(self, name: str) -> list[Any]:
        data = self.metrics.get_metrics_data()
        points: list[Any] = []
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        points.extend(metric.data.data_points)
        return points


def write_agent(folder: Path, body: str, tools: str | None = None, name: str = "tester") -> Path:
    """An agent file in ``folder`` (with a tools module of a unique name, as ``$TOOLS``)."""
    text = f"version: 1\nname: {name}\nmodel: openai/scripted\n" + textwrap.dedent(body).strip("\n") + "\n"
    if tools is not None:
        module = f"otel_tools_{next(_serial)}_{uuid.uuid4().hex[:8]}"
        (folder / f"{module}.py").write_text(textwrap.dedent(tools), encoding="utf-8")
        text = text.replace("$TOOLS", module)
    path = folder / f"{name}.yaml"
    path.write_text(text, encoding="utf-8")
    return path
