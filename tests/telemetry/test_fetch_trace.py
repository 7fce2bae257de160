"""The ``fetch`` toolset sends trace context only when its ``propagate_trace`` option says so.

A local HTTP server on 127.0.0.1 records the headers of each request it gets.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from runner.testing import run_agent, text, tool_call
from runner.testing.server import StoppableHTTPServer
from tests.telemetry.helpers import Traces, write_agent


class _Recording(StoppableHTTPServer):
    seen: list[dict[str, str]]


class _Handler(BaseHTTPRequestHandler):
    server: _Recording

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""

    def do_GET(self) -> None:
        self.server.seen.append({k.lower(): v for k, v in self.headers.items()})
        body = b"hello"
        self.send_response(200)
        self.send_header("content-type", "text/plain")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def site() -> Iterator[_Recording]:
    httpd = _Recording(("127.0.0.1", 0), _Handler)
    httpd.seen = []
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()
    thread.join()


def _agent(tmp_path: Path, site: _Recording, extra: str = "") -> Path:
    body = f"""
    tools:
      - builtin: fetch
        with:
          allow_hosts: ["127.0.0.1:{site.server_port}"]
          {extra}
    """
    return write_agent(tmp_path, body)


async def _fetch(path: Path, site: _Recording) -> None:
    url = f"http://127.0.0.1:{site.server_port}/page"
    run = await run_agent(path, "Fetch.", script=[tool_call("fetch", url=url), text("Done.")])
    assert run.tool_results == ["hello"]


async def test_by_default_fetch_sends_no_trace_context(
    tmp_path: Path, traces: Traces, site: _Recording
) -> None:
    await _fetch(_agent(tmp_path, site), site)
    traces.one("execute_tool fetch")  # tracing is on
    assert [h.get("traceparent") for h in site.seen] == [None]
    assert all("tracestate" not in h for h in site.seen)


async def test_with_propagate_trace_fetch_sends_the_tool_spans_traceparent(
    tmp_path: Path, traces: Traces, site: _Recording
) -> None:
    await _fetch(_agent(tmp_path, site, "propagate_trace: true"), site)
    tool = traces.one("execute_tool fetch")
    (headers,) = site.seen
    version, trace_id, span_id, flags = headers["traceparent"].split("-")
    assert (version, trace_id, span_id) == (
        "00",
        f"{tool.context.trace_id:032x}",
        f"{tool.context.span_id:016x}",
    )
    assert int(flags, 16) & 1  # sampled


async def test_with_propagate_trace_but_tracing_off_nothing_is_sent(tmp_path: Path, site: _Recording) -> None:
    await _fetch(_agent(tmp_path, site, "propagate_trace: true"), site)
    assert [h.get("traceparent") for h in site.seen] == [None]
