"""The address guard of the fetch toolset: the address predicate, host globs, and the attacks performed
against real servers on 127.0.0.1 — DNS rebinding between the check and the connection, names that a
proxy resolves elsewhere, IPv6 spellings of loopback and private ranges. A fake DNS answers the test
names (through the event loop's resolver, which the guard and httpx's own connector both use), and a
network backend that refuses every address but loopback stands for the Internet the tests do not have."""

from __future__ import annotations

import asyncio
import http.client
import ipaddress
import socket
import ssl
import threading
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import urlsplit

import httpcore
import httpx
import pytest

from runner.testing.server import StoppableHTTPServer
from toolsets._netguard import (
    GuardTransport,
    HostPolicy,
    PinningBackend,
    PrivateAddressError,
    guarded_transports,
    is_refused,
)

PUBLIC = "93.184.216.34"
_PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")


@pytest.mark.parametrize(
    "address",
    [
        *("127.0.0.1", "127.8.9.10", "10.0.0.1", "172.16.5.4", "192.168.1.1", "169.254.169.254"),
        *("100.64.0.1", "0.0.0.0", "255.255.255.255", "224.0.0.1", "198.18.0.1", "240.0.0.1"),
        *("::1", "::", "fc00::1", "fd12:3456::1", "fe80::1", "fe80::1%eth0", "ff02::1", "ff0e::1"),
        *("::ffff:127.0.0.1", "::ffff:10.0.0.1", "64:ff9b::a00:1", "2002:a9fe:a9fe::1", "not an address"),
        # IPv4-compatible, local-use NAT64, IPv4-translated and site-local forms (issue 12)
        *("::7f00:1", "::127.0.0.1", "::a00:1", "::808:808", "64:ff9b:1::7f00:1", "64:ff9b:1::808:808"),
        *("::ffff:0:7f00:1", "::ffff:0:808:808", "fec0::1", "feff::1", "febf::1"),
        # NAT64, 6to4 and Teredo carrying a private IPv4 address; documentation, discard, ORCHID
        *("64:ff9b::7f00:1", "64:ff9b::a9fe:a9fe", "2002:7f00:1::1", "2002:c0a8:101::1"),
        *("2001:0:5db8:d822::80ff:fffe", "2001:0:4136:e378:8000:63bf:3fff:fdd2", "2001::1"),
        *("2001:db8::1", "100::1", "2001:10::1", "::ffff:169.254.169.254", "ff05::2"),
    ],
)
def test_private_local_and_special_addresses_are_refused(address: str) -> None:
    assert is_refused(address)


@pytest.mark.parametrize(
    "address",
    [
        *("93.184.216.34", "8.8.8.8", "2606:4700::1111", "2a00:1450:4001:81c::200e"),
        *("::ffff:93.184.216.34", "64:ff9b::808:808", "2002:5db8:d822::1", "2001:0:5db8:d822::f7f7:f7f7"),
    ],
)
def test_public_addresses_are_allowed(address: str) -> None:
    assert not is_refused(address)


@pytest.mark.parametrize(
    ("pattern", "host", "port", "allowed"),
    [
        ("docs.internal", "docs.internal", 80, True),
        ("docs.internal", "DOCS.internal", 8080, True),
        ("docs.internal:80", "docs.internal", 80, True),
        ("docs.internal:8080", "docs.internal", 80, False),
        ("127.0.0.1:8080", "127.0.0.1", 8080, True),
        ("127.0.0.1:8080", "127.0.0.1", 8081, False),
        ("*.corp.example", "a.b.corp.example", 80, True),
        ("*.corp.example", "corp.example", 80, False),
        ("[::1]:*", "::1", 9000, True),
        ("::1", "::1", 9000, True),
        ("localhost", "localhost.", 80, True),
        ("*.bücher.example", "www.xn--bcher-kva.example", 443, True),
        ("xn--bcher-kva.example", "Bücher.example", 443, True),
    ],
)
def test_allowed_hosts_are_host_or_host_port_globs(pattern: str, host: str, port: int, allowed: bool) -> None:
    assert HostPolicy.of([f" {pattern.upper()} "]).allows(host, port) is allowed


# --- real servers on loopback ---------------------------------------------------------------------------


class _Server(StoppableHTTPServer):
    """A loopback HTTP server that records what it was asked (``seen``)."""

    seen: list[str]
    names: dict[str, str]
    """As a proxy: how it resolves names (to loopback addresses, as the proxy's own DNS would)."""

    @property
    def port(self) -> int:
        return int(self.server_port)


class _SecretHandler(BaseHTTPRequestHandler):
    """The internal service an attacker wants: answers every GET with its secret."""

    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.server.seen.append(f"{self.headers.get('Host')} {self.path}")
        body = b"the internal secret"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _ProxyHandler(BaseHTTPRequestHandler):
    """A forward proxy that resolves names with its own table and reaches only loopback addresses."""

    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.server.seen.append(f"GET {self.path} Host: {self.headers.get('Host')}")
        parts = urlsplit(self.path)
        target = self.server.names.get(parts.hostname or "", parts.hostname or "")
        if not _is_loopback(target):
            self._answer(502, b"no network in tests")
            return
        upstream = http.client.HTTPConnection(target, parts.port or 80, timeout=10)
        upstream.request("GET", parts.path or "/", headers={"Host": self.headers.get("Host", "")})
        reply = upstream.getresponse()
        self._answer(reply.status, reply.read())
        upstream.close()

    def do_CONNECT(self) -> None:
        self.server.seen.append(f"CONNECT {self.path}")
        self._answer(502, b"no tunnels in tests")

    def _answer(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@contextmanager
def _serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[_Server]:
    httpd = _Server(("127.0.0.1", 0), handler)
    httpd.seen, httpd.names, httpd.daemon_threads = [], {}, True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield httpd
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture
def secret() -> Iterator[_Server]:
    """The internal service on 127.0.0.1 that must never be reached."""
    with _serving(_SecretHandler) as server:
        yield server


@pytest.fixture
def proxy(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Server]:
    """A forward proxy on 127.0.0.1; the proxy variables of the environment are cleared."""
    for name in _PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    with _serving(_ProxyHandler) as server:
        yield server


def _is_address(host: str) -> bool:
    """Whether ``host`` is an IP address (a name is resolved by the real connector, via the fake DNS)."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address, IPv4-mapped ones included (they reach 127.0.0.1 too)."""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


class FakeDns:
    """Answers for test names through the event loop's resolver: one answer per lookup, the last one
    repeated; ``[]`` is "no such name". Other names go to the real resolver."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.answers: dict[str, list[list[str]]] = {}
        self.lookups: list[str] = []
        self._real = loop.getaddrinfo

    async def getaddrinfo(self, host: bytes | str | None, port: Any, **kwargs: Any) -> list[Any]:
        name = host.decode("ascii") if isinstance(host, bytes) else str(host)
        if name not in self.answers:
            return await self._real(host, port, **kwargs)
        self.lookups.append(name)
        queue = self.answers[name]
        addresses = queue.pop(0) if len(queue) > 1 else queue[0]
        if not addresses:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        number = int(port or 0)
        return [
            (socket.AF_INET6, socket.SOCK_STREAM, 6, "", (address, number, 0, 0))
            if ":" in address
            else (socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, number))
            for address in addresses
        ]


@pytest.fixture
async def dns(monkeypatch: pytest.MonkeyPatch) -> FakeDns:
    """The fake DNS, installed on the running event loop."""
    loop = asyncio.get_running_loop()
    fake = FakeDns(loop)
    monkeypatch.setattr(loop, "getaddrinfo", fake.getaddrinfo)
    return fake


class LoopbackOnly(httpcore.AsyncNetworkBackend):
    """The real network backend for loopback; any other address fails to connect (no Internet in tests).
    Records every host it is asked to connect to."""

    def __init__(self) -> None:
        self.inner = httpcore.AnyIOBackend()
        self.connects: list[str] = []

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        self.connects.append(host)
        if not _is_loopback(host) and _is_address(host):
            raise httpcore.ConnectError(f"no network in tests: {host}")
        return await self.inner.connect_tcp(host, port, timeout=timeout, local_address=local_address)

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


@pytest.fixture
def network() -> LoopbackOnly:
    return LoopbackOnly()


@pytest.fixture
async def client(proxy: _Server, network: LoopbackOnly) -> AsyncIterator[httpx.AsyncClient]:
    """A client with the guard's transports, no proxy, and loopback as the only network."""
    transport, mounts = guarded_transports(network_backend=network)
    async with httpx.AsyncClient(transport=transport, mounts=mounts, timeout=10) as built:
        yield built


# --- DNS rebinding: the address connected to is the address checked --------------------------------------


async def test_a_name_rebound_to_loopback_after_the_check_never_reaches_the_loopback_server(
    client: httpx.AsyncClient, dns: FakeDns, network: LoopbackOnly, secret: _Server
) -> None:
    dns.answers["rebind.test"] = [[PUBLIC], ["127.0.0.1"]]  # public for the first lookup, then loopback
    with pytest.raises(httpx.ConnectError, match="no network in tests"):
        await client.get(f"http://rebind.test:{secret.port}/secret")
    assert secret.seen == []
    assert network.connects == [PUBLIC]
    assert dns.lookups == ["rebind.test"]  # resolved once


async def test_the_same_name_reaches_the_loopback_server_when_allowed(
    proxy: _Server, dns: FakeDns, network: LoopbackOnly, secret: _Server
) -> None:
    """The control for the test above: through this harness, a rebound name does reach the server."""
    dns.answers["rebind.test"] = [[PUBLIC], ["127.0.0.1"]]
    await dns.getaddrinfo("rebind.test", 80)  # the check's lookup, skipped for an allowed host
    transport, mounts = guarded_transports(allow_hosts=["rebind.test:*"], network_backend=network)
    async with httpx.AsyncClient(transport=transport, mounts=mounts, timeout=10) as client:
        response = await client.get(f"http://rebind.test:{secret.port}/secret")
    assert response.text == "the internal secret"
    assert secret.seen == [f"rebind.test:{secret.port} /secret"]


async def test_a_name_with_any_private_address_is_refused_before_connecting(
    client: httpx.AsyncClient, dns: FakeDns, network: LoopbackOnly, secret: _Server
) -> None:
    dns.answers["mixed.test"] = [[PUBLIC, "127.0.0.1"]]
    with pytest.raises(PrivateAddressError) as caught:
        await client.get(f"http://mixed.test:{secret.port}/")
    assert caught.value.reason == "mixed.test resolves to 127.0.0.1, a private or local address"
    assert caught.value.allow_entry == f"mixed.test:{secret.port}"
    assert network.connects == [] and secret.seen == []


@pytest.mark.parametrize(
    "address",
    ["::7f00:1", "64:ff9b:1::7f00:1", "::ffff:0:7f00:1", "fec0::1", "::ffff:127.0.0.1", "64:ff9b::7f00:1"],
)
async def test_ipv6_spellings_of_loopback_are_refused_as_literals_and_as_answers(
    client: httpx.AsyncClient, dns: FakeDns, network: LoopbackOnly, secret: _Server, address: str
) -> None:
    with pytest.raises(PrivateAddressError) as literal:
        await client.get(f"http://[{address}]:{secret.port}/")
    assert literal.value.reason == f"{address} is a private or local address"
    dns.answers["six.test"] = [[address]]
    with pytest.raises(PrivateAddressError) as answered:
        await client.get(f"http://six.test:{secret.port}/")
    assert answered.value.reason == f"six.test resolves to {address}, a private or local address"
    assert network.connects == [] and secret.seen == []


async def test_a_name_that_does_not_resolve_is_a_connect_error(
    client: httpx.AsyncClient, dns: FakeDns, network: LoopbackOnly
) -> None:
    dns.answers["nowhere.test"] = [[]]
    with pytest.raises(httpx.ConnectError, match=r"nowhere\.test does not resolve"):
        await client.get("http://nowhere.test/")
    assert network.connects == []


async def test_the_next_checked_address_is_tried_when_one_does_not_answer(
    client: httpx.AsyncClient, dns: FakeDns, network: LoopbackOnly
) -> None:
    dns.answers["two.test"] = [[PUBLIC, "8.8.8.8"]]
    with pytest.raises(httpx.ConnectError):
        await client.get("http://two.test/")
    assert network.connects == [PUBLIC, "8.8.8.8"]


class _RecordingStream(httpcore.AsyncMockStream):
    """A canned HTTP/1.1 answer; records what is written and the TLS server name asked for."""

    def __init__(self, log: dict[str, Any]) -> None:
        super().__init__([b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"])
        self.log = log

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self.log["sent"] = self.log.get("sent", b"") + buffer

    async def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.AsyncNetworkStream:
        self.log["server_hostname"] = server_hostname
        return self


class _RecordingBackend(httpcore.AsyncNetworkBackend):
    def __init__(self) -> None:
        self.log: dict[str, Any] = {}

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        self.log["connected"] = (host, port)
        return _RecordingStream(self.log)


async def test_the_connection_goes_to_the_checked_address_with_the_name_in_host_and_tls() -> None:
    async def resolve(host: str, port: int) -> list[str]:
        return [PUBLIC]

    backend = _RecordingBackend()
    async with httpx.AsyncClient(transport=GuardTransport(resolve=resolve, network_backend=backend)) as c:
        assert (await c.get("https://api.example/v1")).text == "ok"
    assert backend.log["connected"] == (PUBLIC, 443)
    assert backend.log["server_hostname"] == "api.example"
    assert b"\r\nHost: api.example\r\n" in backend.log["sent"]


async def test_the_pinning_backend_refuses_unix_sockets() -> None:
    with pytest.raises(Exception, match=r"/run/docker\.sock"):
        await PinningBackend(HostPolicy()).connect_unix_socket("/run/docker.sock")


# --- proxies: the destination is checked too -------------------------------------------------------------


@pytest.mark.parametrize("variable", ["HTTP_PROXY", "ALL_PROXY", "http_proxy"])
async def test_through_a_proxy_a_name_that_does_not_resolve_here_is_refused(
    proxy: _Server,
    secret: _Server,
    dns: FakeDns,
    network: LoopbackOnly,
    monkeypatch: pytest.MonkeyPatch,
    variable: str,
) -> None:
    monkeypatch.setenv(variable, f"http://127.0.0.1:{proxy.port}")
    proxy.names["secret.test"] = "127.0.0.1"  # the proxy resolves the name to its own loopback
    dns.answers["secret.test"] = [[]]
    transport, mounts = guarded_transports(network_backend=network)
    async with httpx.AsyncClient(transport=transport, mounts=mounts, timeout=10) as client:
        with pytest.raises(PrivateAddressError) as caught:
            await client.get(f"http://secret.test:{secret.port}/secret")
    assert caught.value.how == "unresolved"
    assert "secret.test does not resolve here" in caught.value.reason
    assert proxy.seen == [] and secret.seen == []


async def test_through_a_proxy_an_allowed_name_is_resolved_by_the_proxy(
    proxy: _Server, secret: _Server, dns: FakeDns, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The control for the test above: unguarded, this proxy does hand the secret over."""
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
    proxy.names["secret.test"] = "127.0.0.1"
    dns.answers["secret.test"] = [[]]
    transport, mounts = guarded_transports(allow_hosts=["secret.test:*"])
    async with httpx.AsyncClient(transport=transport, mounts=mounts, timeout=10) as client:
        assert (await client.get(f"http://secret.test:{secret.port}/secret")).text == "the internal secret"
    assert secret.seen == [f"secret.test:{secret.port} /secret"]


async def test_through_a_proxy_a_plain_http_request_names_the_checked_address(
    proxy: _Server, secret: _Server, dns: FakeDns, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
    proxy.names["rebind.test"] = "127.0.0.1"  # where the proxy's DNS says the name is now
    dns.answers["rebind.test"] = [[PUBLIC], ["127.0.0.1"]]
    transport, mounts = guarded_transports()
    async with httpx.AsyncClient(transport=transport, mounts=mounts, timeout=10) as client:
        response = await client.get(f"http://rebind.test:{secret.port}/secret")
    assert response.status_code == 502 and str(response.url) == f"http://rebind.test:{secret.port}/secret"
    assert proxy.seen == [f"GET http://{PUBLIC}:{secret.port}/secret Host: rebind.test:{secret.port}"]
    assert secret.seen == []


async def test_through_a_proxy_a_private_destination_is_refused(
    proxy: _Server, secret: _Server, dns: FakeDns, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ALL_PROXY", f"http://127.0.0.1:{proxy.port}")
    dns.answers["inside.test"] = [["10.1.2.3"]]
    transport, mounts = guarded_transports()
    async with httpx.AsyncClient(transport=transport, mounts=mounts, timeout=10) as client:
        with pytest.raises(PrivateAddressError, match=r"inside\.test resolves to 10\.1\.2\.3"):
            await client.get("http://inside.test/")
        with pytest.raises(PrivateAddressError, match=r"::7f00:1 is a private"):
            await client.get(f"http://[::7f00:1]:{secret.port}/")
    assert proxy.seen == [] and secret.seen == []


async def test_through_an_https_proxy_a_name_that_does_not_resolve_here_is_never_tunnelled(
    proxy: _Server, dns: FakeDns, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{proxy.port}")
    dns.answers["secret.test"] = [[]]
    dns.answers["public.test"] = [[PUBLIC]]
    transport, mounts = guarded_transports()
    async with httpx.AsyncClient(transport=transport, mounts=mounts, timeout=10) as client:
        with pytest.raises(PrivateAddressError, match="does not resolve here"):
            await client.get("https://secret.test/")
        assert proxy.seen == []
        with pytest.raises(httpx.ProxyError):  # a checked name is tunnelled to by name (TLS checks it)
            await client.get("https://public.test/")
    assert proxy.seen == ["CONNECT public.test:443"]


async def test_no_proxy_hosts_go_direct_and_are_guarded_there(
    proxy: _Server, secret: _Server, dns: FakeDns, network: LoopbackOnly, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
    monkeypatch.setenv("NO_PROXY", "internal.test")
    dns.answers["svc.internal.test"] = [[PUBLIC], ["127.0.0.1"]]
    transport, mounts = guarded_transports(network_backend=network)
    async with httpx.AsyncClient(transport=transport, mounts=mounts, timeout=10) as client:
        with pytest.raises(httpx.ConnectError, match="no network in tests"):
            await client.get(f"http://svc.internal.test:{secret.port}/")
    assert network.connects == [PUBLIC]
    assert proxy.seen == [] and secret.seen == []


def test_proxies_are_read_from_the_environment_as_httpx_reads_them(
    proxy: _Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", "internal.example,::1")
    direct, mounts = guarded_transports(allow_hosts=["a.example"])
    assert direct.proxy is None and direct.policy.allow_hosts == ("a.example",)
    assert sorted(mounts) == ["all://*internal.example", "all://[::1]", "https://"]
    proxied = mounts["https://"]
    assert isinstance(proxied, GuardTransport) and proxied.proxy == "http://proxy.example:3128"
    assert mounts["all://*internal.example"] is None and mounts["all://[::1]"] is None
    monkeypatch.setenv("NO_PROXY", "*")
    assert guarded_transports()[1] == {}
