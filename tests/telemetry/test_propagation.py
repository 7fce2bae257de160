"""Trace context leaving the runner: MCP ``_meta``, OpenAPI calls, sub-agents under their tool call."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from runner.runtime import RuntimeSettings
from runner.testing import run_agent, text, tool_call
from runner.testing.server import StoppableHTTPServer
from tests.telemetry.helpers import Traces, write_agent

FAKE_MCP = Path(__file__).resolve().parents[1] / "tools_mcp" / "fake_mcp_server.py"


async def test_an_mcp_call_carries_the_tool_spans_context_in_meta(tmp_path: Path, traces: Traces) -> None:
    log = tmp_path / "meta.jsonl"
    body = f"""
    tools:
      - mcp:
          command: {sys.executable}
          args: ["{FAKE_MCP}"]
          env:
            FAKE_MCP_META_LOG: "{log}"
        id: fake
    """
    path = write_agent(tmp_path, body)
    run = await run_agent(path, "Echo.", script=[tool_call("echo", text="hi"), text("Done.")])
    assert run.tool_results == ["hi"]
    tool = traces.one("execute_tool echo")
    meta = json.loads(log.read_text().splitlines()[-1])
    trace_id, span_id = meta["traceparent"].split("-")[1:3]
    assert (trace_id, span_id) == (f"{tool.context.trace_id:032x}", f"{tool.context.span_id:016x}")


async def test_without_tracing_an_mcp_call_sends_no_trace_context(tmp_path: Path) -> None:
    log = tmp_path / "meta.jsonl"
    body = f"""
    tools:
      - mcp:
          command: {sys.executable}
          args: ["{FAKE_MCP}"]
          env:
            FAKE_MCP_META_LOG: "{log}"
        id: fake
    """
    path = write_agent(tmp_path, body)
    await run_agent(path, "Echo.", script=[tool_call("echo", text="hi"), text("Done.")])
    assert "traceparent" not in json.loads(log.read_text().splitlines()[-1])


TEAM = """\
version: 1
agents:
  lead:
    model: openai/scripted
    tools:
      - agent: "#helper"
  helper:
    model: openai/scripted
    description: Answers.
"""


async def test_a_sub_agent_runs_under_the_tool_call_that_started_it(
    tmp_path: Path, traces: Traces, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runner.agentfile import load_agent
    from runner.testing import ScriptedModel

    path = tmp_path / "team.yaml"
    path.write_text(TEAM)
    helper = ScriptedModel([text("forty-two")])
    monkeypatch.setattr("runner.models.factory.make_model", lambda spec, **kw: helper)
    lead = load_agent(path, agent="lead")
    run = await run_agent(lead, "Ask.", script=[tool_call("helper", input="What?"), text("It is forty-two.")])
    assert run.output == "It is forty-two."
    lead_span = traces.one("invoke_agent lead")
    call = traces.one("execute_tool helper")
    helper_span = traces.one("invoke_agent helper")
    assert call.parent is not None and call.parent.span_id == lead_span.context.span_id
    assert helper_span.parent is not None and helper_span.parent.span_id == call.context.span_id
    helper_chat = [
        s
        for s in traces.named("chat scripted")
        if s.parent and s.parent.span_id == helper_span.context.span_id
    ]
    assert len(helper_chat) == 1
    assert call.attributes["gen_ai.tool.type"] == "extension"
    assert helper_span.attributes["gen_ai.conversation.id"] != lead_span.attributes["gen_ai.conversation.id"]


@contextmanager
def openapi_server() -> Iterator[tuple[str, list[dict[str, str]]]]:
    """An OpenAPI server on 127.0.0.1 with one operation, ``GET /ping``; the headers of each call."""
    seen: list[dict[str, str]] = []
    document: dict[str, Any] = {
        "openapi": "3.0.3",
        "info": {"title": "ping", "version": "1"},
        "paths": {"/ping": {"get": {"operationId": "ping", "responses": {"200": {"description": "pong"}}}}},
    }

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/openapi.json":
                body = json.dumps({**document, "servers": [{"url": url}]}).encode()
            else:
                seen.append({k.lower(): v for k, v in self.headers.items()})
                body = b'{"pong": true}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = StoppableHTTPServer(("127.0.0.1", 0), Handler)
    url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield url, seen
    finally:
        server.shutdown()
        server.server_close()


async def test_an_openapi_call_carries_the_tool_spans_traceparent(tmp_path: Path, traces: Traces) -> None:
    with openapi_server() as (url, seen):
        path = write_agent(tmp_path, f"tools:\n  - openapi: {url}/openapi.json\n    id: pinger\n")
        settings = RuntimeSettings(home=tmp_path / "home", write_transcript=False)
        run = await run_agent(path, "Ping.", script=[tool_call("ping"), text("Pong.")], settings=settings)
    assert run.output == "Pong."
    tool = traces.one("execute_tool ping")
    assert tool.attributes["gen_ai.tool.type"] == "extension"
    sent = seen[-1]["traceparent"].split("-")
    assert sent[1:3] == [f"{tool.context.trace_id:032x}", f"{tool.context.span_id:016x}"]
