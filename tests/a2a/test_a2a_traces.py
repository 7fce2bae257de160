"""Trace context into the A2A door: an incoming W3C ``traceparent`` header parents the run's spans on
the fast path of a blocking ``SendMessage``, through the SDK's dispatcher, and on a streamed
``SendStreamingMessage`` (tracing on, the in-memory exporter)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.a2a.test_a2a_fast import V1, Paths, _client, _rpc, _text, paths  # noqa: F401
from tests.telemetry.conftest import traces  # noqa: F401 (tracing on, the in-memory exporter)
from tests.telemetry.helpers import Traces

pytestmark = pytest.mark.anyio

TRACE = "0af7651916cd43dd8448eb211c80319c"
PARENT = "b7ad6b7169203331"


@pytest.mark.parametrize("method", ["fast", "sdk", "stream"])
async def test_an_incoming_traceparent_parents_the_run(
    method: str,
    agents: Any,
    scripted: Callable[..., Any],
    serve: Callable[..., Any],
    paths: Paths,  # noqa: F811
    traces: Traces,  # noqa: F811
) -> None:
    model = scripted([{"content": "hello"}], repeat=True)
    agents.write("helper", model)
    served = serve([agents.root])
    body = _rpc(_text())
    if method == "stream":
        body["method"] = "SendStreamingMessage"
    paths.sdk = method != "fast"
    headers = {"content-type": "application/json", "traceparent": f"00-{TRACE}-{PARENT}-01", **V1}
    async with _client(served, "helper") as http:
        answer = await http.post("", content=json.dumps(body).encode(), headers=headers)
        assert answer.status_code == 200, answer.text
        await answer.aread()
    assert paths.taken == (1 if method == "fast" else 0)
    agent = traces.one("invoke_agent helper")
    chat = traces.one("chat openai/scripted")
    assert f"{agent.context.trace_id:032x}" == TRACE
    assert agent.parent is not None and f"{agent.parent.span_id:016x}" == PARENT
    assert model.headers[-1]["traceparent"] == f"00-{TRACE}-{chat.context.span_id:016x}-01"
