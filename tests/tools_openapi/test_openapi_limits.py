"""OpenAPI calls whose answers are huge: a 200 MB body (generated as it is sent, by a server on
127.0.0.1) is read only as far as ``limits.tool_output_chars`` allows, with the cut noted, and costs
the runner almost no memory."""

from __future__ import annotations

import queue
import threading
import tracemalloc
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from runner.agentfile.config import AgentConfig, LimitsConfig
from runner.errors import ConfigError, ToolError
from runner.testing.server import StoppableHTTPServer
from runner.tools import openapi_spec
from runner.tools.base import RunContext, Tool
from runner.tools.openapi import load_source
from runner.tools.sources import SourceContext

from .conftest import MakeSource, WriteDoc

CTX = RunContext(session_id="s1", agent="tester")
HUGE = 200 * 1024 * 1024
_CHUNK = b"0123456789abcdef" * 4096  # 64 KiB, allocated once
_MEDIA = {
    "/huge.json": "application/json",
    "/huge.txt": "text/plain",
    "/huge.bin": "application/octet-stream",
}


class _Server(StoppableHTTPServer):
    sent: queue.Queue[int]
    """Bytes of body each response got out before the client stopped reading, when it is done."""

    def next_sent(self) -> int:
        """How much of the body the next finished response sent (waits for it, boundedly)."""
        return self.sent.get(timeout=30)


class _HugeHandler(BaseHTTPRequestHandler):
    """Answers ``/huge.*`` (and ``/broken``, with a 500) with a 200 MB body, written 64 KiB at a time."""

    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        self.send_response(500 if path == "/broken" else 200)
        self.send_header("Content-Type", _MEDIA.get(path, "text/plain"))
        self.send_header("Content-Length", str(HUGE))
        self.end_headers()
        sent = 0
        try:
            if path == "/huge.json":
                self.wfile.write(b'["')
                sent = 2
            while sent + len(_CHUNK) <= HUGE:
                self.wfile.write(_CHUNK)
                sent += len(_CHUNK)
        except OSError:  # the client stopped reading, as it should
            pass
        self.server.sent.put(sent)
        self.close_connection = True


@pytest.fixture(scope="module")
def huge_server() -> Iterator[_Server]:
    httpd = _Server(("127.0.0.1", 0), _HugeHandler)
    httpd.sent, httpd.daemon_threads = queue.Queue(), True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield httpd
    finally:
        httpd.shutdown()
        httpd.server_close()


def _document(url: str) -> dict[str, Any]:
    paths = {
        path: {"get": {"operationId": name, "responses": {"200": {"description": "a lot"}}}}
        for path, name in [("/huge.json", "json"), ("/huge.txt", "text"), ("/huge.bin", "binary")]
    }
    paths["/broken"] = {"get": {"operationId": "broken", "responses": {"500": {"description": "a lot"}}}}
    return {
        "openapi": "3.0.3",
        "info": {"title": "huge", "version": "1"},
        "servers": [{"url": url}],
        "paths": paths,
    }


@pytest.fixture
async def huge_tools(
    huge_server: _Server, make_source: MakeSource, write_doc: WriteDoc, source_ctx: SourceContext
) -> AsyncIterator[dict[str, Tool]]:
    """The tools of the huge API, for an agent whose tool_output_chars is 20000 (the default)."""
    assert source_ctx.agent.limits.tool_output_chars == 20000
    name = write_doc(_document(f"http://127.0.0.1:{huge_server.server_port}"))
    async with AsyncExitStack() as stack:
        loaded = await load_source(make_source(name), source_ctx, stack)
        yield {tool.name: tool for tool in loaded.tools}


async def _peak_during(tool: Tool) -> tuple[str | ToolError, int]:
    """The tool's result (or error) and the peak of memory allocated while it ran, in bytes."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        try:
            result: str | ToolError = await tool.call({}, CTX)
        except ToolError as exc:
            result = exc
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    return result, peak


@pytest.mark.parametrize("name", ["json", "text"])
async def test_a_200_mb_answer_is_cut_at_tool_output_chars_with_a_note_and_little_memory(
    huge_tools: dict[str, Tool], huge_server: _Server, name: str
) -> None:
    result, peak = await _peak_during(huge_tools[name])
    assert isinstance(result, str)
    assert len(result) <= 20000
    assert result.endswith(
        "\n[response cut: it is longer than 80000 bytes, and only its beginning was read "
        "(limits.tool_output_chars is 20000)]"
    )
    assert result.startswith('["0123456789abcdef' if name == "json" else "0123456789abcdef0123")
    assert peak < 8 * 1024 * 1024, f"{peak / 1e6:.1f} MB"  # reading all of it took over 800 MB
    assert huge_server.next_sent() < HUGE


async def test_a_200_mb_binary_answer_is_described_not_read(
    huge_tools: dict[str, Tool], huge_server: _Server
) -> None:
    result, peak = await _peak_during(huge_tools["binary"])
    assert huge_server.next_sent() < HUGE
    assert result == "(binary response: application/octet-stream, more than 80000 bytes)"
    assert peak < 8 * 1024 * 1024, f"{peak / 1e6:.1f} MB"


async def test_a_200_mb_error_body_gives_its_beginning_in_the_error(
    huge_tools: dict[str, Tool], huge_server: _Server
) -> None:
    result, peak = await _peak_during(huge_tools["broken"])
    assert huge_server.next_sent() < HUGE
    assert isinstance(result, ToolError)
    assert (
        result.message
        == "GET /broken answered HTTP 500 Internal Server Error: " + "0123456789abcdef" * 31 + "0123…"
    )
    assert peak < 8 * 1024 * 1024, f"{peak / 1e6:.1f} MB"


async def test_a_lower_tool_output_chars_reads_less(
    huge_server: _Server, make_source: MakeSource, write_doc: WriteDoc, source_ctx: SourceContext
) -> None:
    agent = AgentConfig(name="tester", path=source_ctx.agent.path, limits=LimitsConfig(tool_output_chars=500))
    ctx = SourceContext(agent=agent, cache_dir=source_ctx.cache_dir, default_timeout_s=10.0)
    name = write_doc(_document(f"http://127.0.0.1:{huge_server.server_port}"))
    async with AsyncExitStack() as stack:
        tools = {tool.name: tool for tool in (await load_source(make_source(name), ctx, stack)).tools}
        result = await tools["text"].call({}, CTX)
    assert len(result) <= 500
    assert huge_server.next_sent() < HUGE
    assert result.endswith(
        "longer than 2000 bytes, and only its beginning was read (limits.tool_output_chars is 500)]"
    )


async def test_a_document_larger_than_the_cap_is_a_config_error_without_reading_it_all(
    huge_server: _Server, make_source: MakeSource, source_ctx: SourceContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(openapi_spec, "MAX_DOCUMENT_BYTES", 1024 * 1024)
    url = f"http://127.0.0.1:{huge_server.server_port}/huge.json"
    tracemalloc.start()
    try:
        async with AsyncExitStack() as stack:
            with pytest.raises(ConfigError) as caught:
                await load_source(make_source(url), source_ctx, stack)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert caught.value.message.endswith(f"the document at {url} is larger than 1 MB")
    assert caught.value.hint and "point `openapi:` at that file" in caught.value.hint
    assert peak < 8 * 1024 * 1024, f"{peak / 1e6:.1f} MB"
    assert huge_server.next_sent() < HUGE
