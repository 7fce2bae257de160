"""Trace context into the MCP door: a W3C ``traceparent`` in a ``tools/call``'s ``_meta`` parents the
run's spans, over HTTP (``runner serve``, the in-memory exporter) and over stdio (``runner mcp
--otel``, a real OTLP receiver); on HTTP a ``traceparent`` header alone does too; a malformed one
starts a trace of its own."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from mcp import Client

from tests.mcp_server.conftest import MODES, Agents, echo, http_client
from tests.telemetry.conftest import traces  # noqa: F401 (tracing on, the in-memory exporter)
from tests.telemetry.helpers import Traces
from tests.telemetry.receiver import otlp_receiver

TRACE = "0af7651916cd43dd8448eb211c80319c"
PARENT = "b7ad6b7169203331"


def _in_the_callers_trace(recorded: Traces) -> Any:
    """The run's ``invoke_agent`` span, checked to be the caller's span's child."""
    agent = recorded.one("invoke_agent helper")
    assert f"{agent.context.trace_id:032x}" == TRACE
    assert agent.parent is not None and f"{agent.parent.span_id:016x}" == PARENT
    return agent


@pytest.mark.parametrize("mode", MODES)
async def test_a_traceparent_in_meta_parents_the_run_over_http(
    mode: str,
    agents: Agents,
    scripted_server: Callable[..., Any],
    serve: Callable[..., Any],
    traces: Traces,  # noqa: F811
) -> None:
    model = scripted_server(echo, repeat=True)
    agents.write("helper", model)
    served = serve([agents.root])
    async with http_client(served.mcp_url, mode=mode) as client:
        result = await client.call_tool(
            "helper", {"message": "hi"}, meta={"traceparent": f"00-{TRACE}-{PARENT}-01"}
        )
    assert not result.is_error, result.content
    agent = _in_the_callers_trace(traces)
    chat = traces.one("chat openai/scripted")
    assert chat.parent is not None and chat.parent.span_id == agent.context.span_id
    assert model.headers[-1]["traceparent"] == f"00-{TRACE}-{chat.context.span_id:016x}-01"


@pytest.mark.parametrize("mode", MODES)
async def test_a_traceparent_header_alone_parents_the_run_on_mcp(
    mode: str,
    agents: Agents,
    scripted_server: Callable[..., Any],
    serve: Callable[..., Any],
    traces: Traces,  # noqa: F811
) -> None:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    agents.write("helper", scripted_server(echo, repeat=True))
    served = serve([agents.root])
    http = httpx2.AsyncClient(headers={"traceparent": f"00-{TRACE}-{PARENT}-01"}, timeout=60)
    async with Client(streamable_http_client(served.mcp_url, http_client=http), mode=mode) as client:
        result = await client.call_tool("helper", {"message": "hi"})
    assert not result.is_error, result.content
    _in_the_callers_trace(traces)


async def test_a_malformed_traceparent_in_meta_starts_a_trace_of_its_own(
    agents: Agents,
    scripted_server: Callable[..., Any],
    serve: Callable[..., Any],
    traces: Traces,  # noqa: F811
) -> None:
    agents.write("helper", scripted_server(echo, repeat=True))
    served = serve([agents.root])
    async with http_client(served.mcp_url, mode="2026-07-28") as client:
        result = await client.call_tool("helper", {"message": "hi"}, meta={"traceparent": "00-zz-01"})
    assert not result.is_error, result.content
    agent = traces.one("invoke_agent helper")
    assert agent.parent is None and f"{agent.context.trace_id:032x}" != TRACE


async def test_runner_mcp_with_otel_continues_the_callers_trace_over_stdio(
    agents: Agents, scripted_server: Callable[..., Any], stdio: Callable[..., Any]
) -> None:
    agents.write("helper", scripted_server(echo, repeat=True))
    with otlp_receiver() as receiver:
        params = stdio([agents.root], "--otel")
        params.env = {**(params.env or {}), "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url}
        async with Client(params, mode="2026-07-28") as client:
            result = await client.call_tool(
                "helper", {"message": "hi"}, meta={"traceparent": f"00-{TRACE}-{PARENT}-01"}
            )
        assert not result.is_error, result.content
        assert receiver.got.wait(15), "no spans reached the receiver"
        spans = {s.name: s for s in receiver.spans}
    agent = spans["invoke_agent helper"]
    assert agent.trace_id == TRACE and agent.parent_span_id == PARENT
    assert spans["chat openai/scripted"].parent_span_id == agent.span_id
