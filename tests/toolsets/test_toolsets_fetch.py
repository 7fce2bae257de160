"""The ``fetch`` toolset against local HTTP servers: HTML to text, JSON, errors, limits, schemes, and
the guard that refuses private and local addresses unless the options allow them."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import subprocess
import sys
import threading
import tracemalloc
from collections.abc import Iterator
from contextlib import AsyncExitStack, contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from runner.agentfile.config import AgentConfig, ToolSourceConfig
from runner.errors import ConfigError, ToolError
from runner.testing.server import StoppableHTTPServer
from runner.tools.base import RunContext, Tool
from runner.tools.builtin import check_source, load_source
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
_HUGE = 200 * 1024 * 1024
_CHUNK = b"0123456789abcdef" * 4096  # 64 KiB, allocated once
_PRIVATE = {"allow_private": True}
"""Options for the tests of what fetch does with a response: the test servers are on 127.0.0.1."""


class _Server(StoppableHTTPServer):
    """A test HTTP server that records the path (or, as a proxy, the URL) of each request."""

    seen: list[str]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_port}"


class _Handler(BaseHTTPRequestHandler):
    server: _Server

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

    def _send_huge(self) -> None:
        """200 MB of text, generated as it is sent; stops when the client stops reading."""
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(_HUGE))
        self.end_headers()
        try:
            for _ in range(_HUGE // len(_CHUNK)):
                self.wfile.write(_CHUNK)
        except OSError:  # the client stopped reading, as it should
            self.close_connection = True

    def do_GET(self) -> None:
        self.server.seen.append(self.path)
        parts = urlsplit(self.path)  # a proxy gets the whole URL
        path = parts.path
        if path == "/page.html":
            self._send(200, "text/html; charset=utf-8", _PAGE.encode())
        elif path == "/data.json":
            self._send(200, "application/json", b'{"name":"runner","tags":["a","b"],"n":1}')
        elif path == "/big.txt":
            self._send(200, "text/plain", ("0123456789" * 500).encode())
        elif path == "/old":
            self._send(302, "text/plain", b"", {"Location": "/data.json"})
        elif path == "/to":
            self._send(302, "text/plain", b"", {"Location": parse_qs(parts.query)["url"][0]})
        elif path == "/image.png":
            self._send(200, "image/png", b"\x89PNG\r\n\x1a\n\0\0\0")
        elif path == "/headers":
            self._send(200, "application/json", json.dumps(dict(self.headers.items())).encode())
        elif path == "/slow":
            _RELEASE.wait(10)
            self._send(200, "text/plain", b"late")
        elif path == "/huge.txt":
            self._send_huge()
        else:
            self._send(404, "text/html", b"<html><body><h1>Not Found</h1><p>no such page</p></body></html>")


@contextmanager
def _serving() -> Iterator[_Server]:
    """A local HTTP server on 127.0.0.1 (any free port), shut down at the end."""
    httpd = _Server(("127.0.0.1", 0), _Handler)
    httpd.seen = []
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield httpd
    finally:
        _RELEASE.set()
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture(scope="module")
def httpd() -> Iterator[_Server]:
    """The test server, with its request log emptied for each test."""
    with _serving() as started:
        yield started


@pytest.fixture(scope="module")
def other_httpd() -> Iterator[_Server]:
    """A second test server, on another port of 127.0.0.1."""
    with _serving() as started:
        yield started


@pytest.fixture
def server(httpd: _Server, other_httpd: _Server) -> str:
    """The test server's base URL; both servers' request logs start empty."""
    httpd.seen.clear()
    other_httpd.seen.clear()
    return httpd.url


@pytest.fixture
async def fetch(load_builtin: Any) -> Tool:
    """The fetch tool allowed to reach private addresses (the test servers)."""
    tool: Tool = (await load_builtin("fetch", _PRIVATE))["fetch"]
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
    tool = (await load_builtin("fetch", {"max_chars": 1000, **_PRIVATE}))["fetch"]
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
    tool = (await load_builtin("fetch", {"headers": {"X-Api-Key": "k1"}, **_PRIVATE}))["fetch"]
    sent = json.loads(await tool.call({"url": f"{server}/headers"}, run_ctx))
    assert sent["X-Api-Key"] == "k1"
    assert "runner-fetch" in sent["User-Agent"]


async def test_a_slow_server_times_out_as_a_tool_error(
    load_builtin: Any, run_ctx: RunContext, server: str
) -> None:
    tool = (await load_builtin("fetch", {"timeout_s": 0.3, **_PRIVATE}))["fetch"]
    with pytest.raises(ToolError, match=r"timed out after 0.3 s"):
        await tool.call({"url": f"{server}/slow"}, run_ctx)


async def test_an_unreachable_host_is_a_tool_error(fetch: Tool, run_ctx: RunContext) -> None:
    with pytest.raises(ToolError, match=re.escape("Could not fetch http://127.0.0.1:9/")):
        await fetch.call({"url": "http://127.0.0.1:9/"}, run_ctx)


async def test_the_client_is_closed_with_the_session(
    tmp_path: Path, run_ctx: RunContext, server: str
) -> None:
    spec = ToolSourceConfig(kind="builtin", target="fetch", base_dir=tmp_path, options=_PRIVATE)
    agent = AgentConfig(name="tester", path=tmp_path / "agent.yaml")
    async with AsyncExitStack() as stack:
        tool = (await load_source(spec, SourceContext(agent=agent), stack)).tools[0]
        assert json.loads(await tool.call({"url": f"{server}/data.json"}, run_ctx))["n"] == 1
    with pytest.raises(RuntimeError, match="client has been closed"):
        await tool.call({"url": f"{server}/data.json"}, run_ctx)


def test_html_to_text_keeps_tables_and_preformatted_text() -> None:
    html = "<table><tr><th>a</th><th>b</th></tr><tr><td>1</td><td>2</td></tr></table><pre>x = 1\n    y</pre>"
    assert html_to_text(html) == "a | b\n1 | 2\n\nx = 1\n    y"


def _refused(url: str, reason: str, allow: str) -> str:
    return (
        f"Refused to fetch {url}: {reason}. The agent can allow it with the fetch toolset's option "
        f'allow_private: true or allow_hosts: ["{allow}"].'
    )


async def test_the_local_server_is_refused_by_default_before_any_request(
    load_builtin: Any, run_ctx: RunContext, server: str, httpd: _Server
) -> None:
    tool = (await load_builtin("fetch"))["fetch"]
    port = httpd.server_port
    with pytest.raises(ToolError) as caught:
        await tool.call({"url": f"{server}/data.json"}, run_ctx)
    assert caught.value.message == _refused(
        f"http://127.0.0.1:{port}/data.json", "127.0.0.1 is a private or local address", f"127.0.0.1:{port}"
    )
    assert httpd.seen == []


@pytest.mark.parametrize(
    ("url", "reason", "allow"),
    [
        ("http://localhost:{port}/", "localhost resolves to {localhost},", "localhost:{port}"),
        ("http://2130706433:{port}/", "2130706433 resolves to 127.0.0.1,", "2130706433:{port}"),
        ("http://[::1]:{port}/", "::1 is", "[::1]:{port}"),
        ("http://[::ffff:127.0.0.1]:{port}/", "::ffff:127.0.0.1 is", "[::ffff:127.0.0.1]:{port}"),
        ("http://0.0.0.0:{port}/", "0.0.0.0 is", "0.0.0.0:{port}"),
        ("http://169.254.169.254/latest/meta-data/", "169.254.169.254 is", "169.254.169.254"),
        ("http://10.0.0.1/", "10.0.0.1 is", "10.0.0.1"),
        ("https://192.168.1.1:8443/admin", "192.168.1.1 is", "192.168.1.1:8443"),
        ("http://100.64.0.1/", "100.64.0.1 is", "100.64.0.1"),
    ],
)
async def test_private_and_local_addresses_are_refused_by_default(
    load_builtin: Any, run_ctx: RunContext, server: str, httpd: _Server, url: str, reason: str, allow: str
) -> None:
    # a short timeout, so that a request that got through fails fast instead of hanging
    tool = (await load_builtin("fetch", {"timeout_s": 2}))["fetch"]
    port = str(httpd.server_port)
    localhost = socket.getaddrinfo("localhost", port, type=socket.SOCK_STREAM)[0][4][0]  # the first one
    with pytest.raises(ToolError) as caught:
        await tool.call({"url": url.replace("{port}", port)}, run_ctx)
    reason = reason.replace("{localhost}", str(localhost))
    assert caught.value.message == _refused(
        url.replace("{port}", port), f"{reason} a private or local address", allow.replace("{port}", port)
    )
    assert httpd.seen == []


async def test_an_allowed_host_is_fetched_but_a_redirect_to_another_private_one_is_refused(
    load_builtin: Any, run_ctx: RunContext, server: str, httpd: _Server, other_httpd: _Server
) -> None:
    tool = (await load_builtin("fetch", {"allow_hosts": [f"127.0.0.1:{httpd.server_port}"]}))["fetch"]
    assert json.loads(await tool.call({"url": f"{server}/data.json"}, run_ctx))["n"] == 1
    target = f"{other_httpd.url}/data.json"
    url = f"{server}/to?url={target}"
    with pytest.raises(ToolError) as caught:
        await tool.call({"url": url}, run_ctx)
    assert caught.value.message == _refused(
        url,
        f"it redirects to {target}, and 127.0.0.1 is a private or local address",
        f"127.0.0.1:{other_httpd.server_port}",
    )
    assert httpd.seen == ["/data.json", f"/to?url={target}"]
    assert other_httpd.seen == []


async def test_allowed_hosts_are_globs_of_any_case(
    load_builtin: Any, run_ctx: RunContext, server: str, httpd: _Server
) -> None:
    tool = (await load_builtin("fetch", {"allow_hosts": ["LOCALHOST:*"]}))["fetch"]
    text = await tool.call({"url": f"http://localhost:{httpd.server_port}/data.json"}, run_ctx)
    assert json.loads(text)["n"] == 1
    with pytest.raises(ToolError, match=r"^Refused to fetch http://127\.0\.0\.1:"):
        await tool.call({"url": f"{server}/data.json"}, run_ctx)


async def test_a_proxy_from_the_environment_is_used_and_private_urls_are_still_refused(
    load_builtin: Any, run_ctx: RunContext, server: str, httpd: _Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", server)  # the test server answers proxy requests too
    tool = (await load_builtin("fetch", {"timeout_s": 2}))["fetch"]
    text = await tool.call({"url": "http://93.184.216.34/data.json"}, run_ctx)
    assert json.loads(text)["n"] == 1
    assert httpd.seen == ["http://93.184.216.34/data.json"]
    with pytest.raises(ToolError, match=re.escape("10.0.0.1 is a private or local address")):
        await tool.call({"url": "http://10.0.0.1/data.json"}, run_ctx)
    assert httpd.seen == ["http://93.184.216.34/data.json"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"allow_private": "yes"}, "option 'allow_private': 'yes' is not of type 'boolean'"),
        ({"allow_hosts": "x"}, "option 'allow_hosts': 'x' is not of type 'array'"),
        ({"allow_hosts": ["ok", 3]}, "option 'allow_hosts.1': 3 is not of type 'string'"),
        ({"propagate_trace": "on"}, "option 'propagate_trace': 'on' is not of type 'boolean'"),
    ],
)
async def test_bad_guard_options_are_config_errors(
    load_builtin: Any, tmp_path: Path, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        await load_builtin("fetch", options)
    assert caught.value.message == f"builtin toolset 'fetch': {message}"
    option = next(iter(options))
    assert caught.value.path.startswith(f"tools[0].with.{option}")
    assert caught.value.hint and caught.value.hint.startswith(
        ("fetch private", "hosts fetched", "send the tool call")
    )
    spec = ToolSourceConfig(kind="builtin", target="fetch", base_dir=tmp_path, options=options)
    assert [error.message for error in check_source(spec, tmp_path / "agent.yaml")] == [
        f"builtin toolset 'fetch': {message}"
    ]


def test_importing_the_toolset_does_not_import_httpx() -> None:
    code = "import sys, toolsets.fetch; print('httpx' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


async def test_a_200_mb_response_is_read_only_to_its_first_5_mb_with_little_memory(
    load_builtin: Any, run_ctx: RunContext, server: str
) -> None:
    tool = (await load_builtin("fetch", {"max_chars": 1000, **_PRIVATE}))["fetch"]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        text = await tool.call({"url": f"{server}/huge.txt"}, run_ctx)
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert text.startswith("0123456789abcdef" * 62)
    assert text.endswith(
        "\n[cut: characters 0-1000 of 5000000 shown; call fetch with start=1000 to read on]"
        "\n[the response is larger than 5000000 bytes; only its beginning was read]"
    )
    assert peak < 40_000_000, f"{peak / 1e6:.1f} MB"  # all of it would be over 200 MB


@pytest.fixture
async def unresolvable(monkeypatch: pytest.MonkeyPatch) -> str:
    """A name that does not resolve here (the event loop's resolver says so), e.g. a proxy-only name."""
    loop = asyncio.get_running_loop()
    real = loop.getaddrinfo

    async def getaddrinfo(host: Any, port: Any, **kwargs: Any) -> Any:
        if host in ("intranet.test", b"intranet.test"):
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return await real(host, port, **kwargs)

    monkeypatch.setattr(loop, "getaddrinfo", getaddrinfo)
    return "intranet.test"


async def test_through_a_proxy_a_name_that_does_not_resolve_here_is_refused_before_the_proxy_sees_it(
    load_builtin: Any,
    run_ctx: RunContext,
    server: str,
    httpd: _Server,
    monkeypatch: pytest.MonkeyPatch,
    unresolvable: str,
) -> None:
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", server)  # the test server answers proxy requests with its data
    tool = (await load_builtin("fetch", {"timeout_s": 2}))["fetch"]
    url = f"http://{unresolvable}/data.json"
    with pytest.raises(ToolError) as caught:
        await tool.call({"url": url}, run_ctx)
    assert caught.value.message == _refused(
        url,
        f"{unresolvable} does not resolve here, so the address a proxy would connect to cannot be checked",
        unresolvable,
    )
    assert httpd.seen == []
    allowed = (await load_builtin("fetch", {"timeout_s": 2, "allow_hosts": [unresolvable]}))["fetch"]
    assert json.loads(await allowed.call({"url": url}, run_ctx))["n"] == 1  # the attack, when allowed
    assert httpd.seen == [url]


@pytest.mark.parametrize("options", [{}, _PRIVATE])
async def test_a_proxy_httpx_cannot_use_is_a_config_error(
    load_builtin: Any, monkeypatch: pytest.MonkeyPatch, options: dict[str, Any]
) -> None:
    monkeypatch.setenv("ALL_PROXY", "ftp://proxy.example:21")
    with pytest.raises(ConfigError) as caught:
        await load_builtin("fetch", options)
    assert "cannot use the proxy set in the environment" in caught.value.message
    assert caught.value.hint and "ALL_PROXY" in caught.value.hint
