"""The ``fetch`` toolset against a local HTTP server: HTML to text, JSON, errors, limits, schemes."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import AsyncExitStack
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from runner.errors import ToolError
from runner.spec.model import AgentSpec, ToolSourceSpec
from runner.tools.base import RunContext, Tool
from runner.tools.builtin import load_source
from runner.tools.sources import SourceContext
from toolsets.fetch import html_to_text

_PAGE = """<!doctype html>
<html><head><title>Test  Page</title>
<style>body { color: red }</style>
<script>var secret = "do not show";</script>
</head>
<body>
  <nav><a href="/">Home</a></nav>
  <h1>Welcome</h1>
  <p>First   paragraph with <b>bold</b> text.</p>
  <ul><li>alpha</li><li>beta</li></ul>
  <p>See <a href="/docs/intro.html">the intro</a> and <a href="javascript:void(0)">nothing</a>.</p>
</body></html>"""

_RELEASE = threading.Event()


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass

    def _send(
        self, status: int, content_type: str, body: bytes, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path == "/page.html":
            self._send(200, "text/html; charset=utf-8", _PAGE.encode())
        elif self.path == "/data.json":
            self._send(200, "application/json", b'{"name":"runner","tags":["a","b"],"n":1}')
        elif self.path == "/big.txt":
            self._send(200, "text/plain", ("0123456789" * 500).encode())
        elif self.path == "/old":
            self._send(302, "text/plain", b"", {"Location": "/data.json"})
        elif self.path == "/image.png":
            self._send(200, "image/png", b"\x89PNG\r\n\x1a\n\0\0\0")
        elif self.path == "/headers":
            self._send(200, "application/json", json.dumps(dict(self.headers.items())).encode())
        elif self.path == "/slow":
            _RELEASE.wait(10)
            self._send(200, "text/plain", b"late")
        else:
            self._send(404, "text/html", b"<html><body><h1>Not Found</h1><p>no such page</p></body></html>")


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """A local HTTP server on 127.0.0.1; yields its base URL."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    _RELEASE.set()
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
async def fetch(load_builtin: Any) -> Tool:
    """The fetch tool with default options."""
    tool: Tool = (await load_builtin("fetch"))["fetch"]
    return tool


async def test_html_becomes_readable_text(fetch: Tool, run_ctx: RunContext, server: str) -> None:
    text = await fetch.call({"url": f"{server}/page.html"}, run_ctx)
    assert text.startswith("# Test Page\n")
    assert "# Welcome" in text
    assert "First paragraph with bold text." in text
    assert "- alpha\n- beta" in text
    assert f"[the intro]({server}/docs/intro.html)" in text
    assert "nothing" in text and "javascript" not in text
    assert "secret" not in text and "color" not in text and "<" not in text


async def test_json_is_reindented(fetch: Tool, run_ctx: RunContext, server: str) -> None:
    text = await fetch.call({"url": f"{server}/data.json"}, run_ctx)
    assert json.loads(text) == {"name": "runner", "tags": ["a", "b"], "n": 1}
    assert text.startswith('{\n "name": "runner",')


async def test_not_found_is_a_tool_error_with_status_and_body(
    fetch: Tool, run_ctx: RunContext, server: str
) -> None:
    with pytest.raises(ToolError) as caught:
        await fetch.call({"url": f"{server}/missing"}, run_ctx)
    assert caught.value.message.startswith(f"HTTP 404 Not Found from {server}/missing: ")
    assert "no such page" in caught.value.message


async def test_long_text_is_cut_at_max_chars_and_start_reads_on(
    load_builtin: Any, run_ctx: RunContext, server: str
) -> None:
    tool = (await load_builtin("fetch", {"max_chars": 1000}))["fetch"]
    first = await tool.call({"url": f"{server}/big.txt"}, run_ctx)
    body, note = first.split("\n")
    assert len(body) == 1000
    assert note == "[cut: characters 0-1000 of 5000 shown; call fetch with start=1000 to read on]"
    last = await tool.call({"url": f"{server}/big.txt", "start": 4500}, run_ctx)
    assert last == "0123456789" * 50
    with pytest.raises(ToolError, match="past the end"):
        await tool.call({"url": f"{server}/big.txt", "start": 5000}, run_ctx)


@pytest.mark.parametrize(
    "url", ["file:///etc/passwd", "ftp://127.0.0.1/x", "javascript:alert(1)", "127.0.0.1/x"]
)
async def test_only_http_and_https_urls_are_fetched(fetch: Tool, run_ctx: RunContext, url: str) -> None:
    with pytest.raises(ToolError, match="Only http:// and https:// URLs can be fetched"):
        await fetch.call({"url": url}, run_ctx)


async def test_redirects_are_followed_and_noted(fetch: Tool, run_ctx: RunContext, server: str) -> None:
    text = await fetch.call({"url": f"{server}/old"}, run_ctx)
    assert text.startswith(f"[redirected to {server}/data.json]\n{{")


async def test_binary_content_is_refused(fetch: Tool, run_ctx: RunContext, server: str) -> None:
    with pytest.raises(ToolError, match=r"returned image/png content .* not text"):
        await fetch.call({"url": f"{server}/image.png"}, run_ctx)


async def test_configured_headers_are_sent(load_builtin: Any, run_ctx: RunContext, server: str) -> None:
    tool = (await load_builtin("fetch", {"headers": {"X-Api-Key": "k1"}}))["fetch"]
    sent = json.loads(await tool.call({"url": f"{server}/headers"}, run_ctx))
    assert sent["X-Api-Key"] == "k1"
    assert "runner-fetch" in sent["User-Agent"]


async def test_a_slow_server_times_out_as_a_tool_error(
    load_builtin: Any, run_ctx: RunContext, server: str
) -> None:
    tool = (await load_builtin("fetch", {"timeout_s": 0.3}))["fetch"]
    with pytest.raises(ToolError, match=r"timed out after 0.3 s"):
        await tool.call({"url": f"{server}/slow"}, run_ctx)


async def test_an_unreachable_host_is_a_tool_error(fetch: Tool, run_ctx: RunContext) -> None:
    with pytest.raises(ToolError, match=re.escape("Could not fetch http://127.0.0.1:9/")):
        await fetch.call({"url": "http://127.0.0.1:9/"}, run_ctx)


async def test_the_client_is_closed_with_the_session(
    tmp_path: Path, run_ctx: RunContext, server: str
) -> None:
    spec = ToolSourceSpec(kind="builtin", target="fetch", base_dir=tmp_path)
    agent = AgentSpec(name="tester", path=tmp_path / "agent.yaml")
    async with AsyncExitStack() as stack:
        tool = (await load_source(spec, SourceContext(agent=agent), stack)).tools[0]
        assert json.loads(await tool.call({"url": f"{server}/data.json"}, run_ctx))["n"] == 1
    with pytest.raises(RuntimeError, match="client has been closed"):
        await tool.call({"url": f"{server}/data.json"}, run_ctx)


def test_html_to_text_keeps_tables_and_preformatted_text() -> None:
    html = "<table><tr><th>a</th><th>b</th></tr><tr><td>1</td><td>2</td></tr></table><pre>x = 1\n    y</pre>"
    assert html_to_text(html) == "a | b\n1 | 2\n\nx = 1\n    y"
