"""The SDK's OpenTelemetry middleware runs only when a tracer provider would record its spans."""

from __future__ import annotations

from typing import Any, cast

import pytest

from runner.serve.mcp.calls import McpCalls
from runner.serve.mcp.server import build_server


class _NoCalls:
    """Stands in for the calls: building the server asks nothing of them."""


def _middleware(server: Any) -> list[str]:
    return [type(m).__name__ for m in server.middleware]


def test_without_a_tracer_provider_the_sdks_spans_are_left_out() -> None:
    server = build_server(cast(McpCalls, _NoCalls()))
    assert "OpenTelemetryMiddleware" not in _middleware(server)


def test_with_a_tracer_provider_the_sdk_records_its_spans(monkeypatch: pytest.MonkeyPatch) -> None:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    provider = TracerProvider()
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: provider)
    server = build_server(cast(McpCalls, _NoCalls()))
    assert "OpenTelemetryMiddleware" in _middleware(server)
