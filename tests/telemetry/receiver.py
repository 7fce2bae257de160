"""A real OTLP/HTTP receiver on 127.0.0.1: decodes what exporters post (opentelemetry-proto)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from runner.testing.server import StoppableHTTPServer


@dataclass
class ReceivedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    attributes: dict[str, Any]
    service: str


@dataclass
class Receiver:
    """What the receiver got; ``hold`` keeps every export waiting (a slow endpoint) until set."""

    url: str = ""
    spans: list[ReceivedSpan] = field(default_factory=list)
    metrics: list[str] = field(default_factory=list)
    posts: int = 0
    got: threading.Event = field(default_factory=threading.Event)
    hold: threading.Event | None = None

    def names(self) -> list[str]:
        return [s.name for s in self.spans]


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return tuple(_value(v) for v in any_value.array_value.values)
    return getattr(any_value, kind) if kind else None


def _decode_traces(body: bytes, into: Receiver) -> None:
    request = ExportTraceServiceRequest.FromString(body)
    for resource in request.resource_spans:
        service = next((_value(a.value) for a in resource.resource.attributes if a.key == "service.name"), "")
        for scope in resource.scope_spans:
            for span in scope.spans:
                into.spans.append(
                    ReceivedSpan(
                        span.name,
                        span.trace_id.hex(),
                        span.span_id.hex(),
                        span.parent_span_id.hex(),
                        {a.key: _value(a.value) for a in span.attributes},
                        str(service),
                    )
                )


def _decode_metrics(body: bytes, into: Receiver) -> None:
    request = ExportMetricsServiceRequest.FromString(body)
    for resource in request.resource_metrics:
        for scope in resource.scope_metrics:
            into.metrics.extend(m.name for m in scope.metrics)


@contextmanager
def otlp_receiver(hold: threading.Event | None = None) -> Iterator[Receiver]:
    """An OTLP/HTTP (protobuf) receiver on a free port; ``Receiver.url`` is its endpoint."""
    received = Receiver(hold=hold)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            received.posts += 1
            if received.hold is not None:
                received.hold.wait(30)
            if self.path == "/v1/traces":
                _decode_traces(body, received)
                received.got.set()
            elif self.path == "/v1/metrics":
                _decode_metrics(body, received)
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = StoppableHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    received.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield received
    finally:
        if received.hold is not None:
            received.hold.set()
        server.shutdown()
        server.server_close()
