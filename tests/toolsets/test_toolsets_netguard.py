"""The address guard of the fetch toolset, unit by unit: the address predicate, host globs, name
resolution and the check of the address a connection went to (DNS rebinding), with fake transports."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from toolsets._netguard import GuardTransport, PrivateAddressError, guarded_transports, is_refused


@pytest.mark.parametrize(
    "address",
    [
        *("127.0.0.1", "127.8.9.10", "10.0.0.1", "172.16.5.4", "192.168.1.1", "169.254.169.254"),
        *("100.64.0.1", "0.0.0.0", "255.255.255.255", "224.0.0.1", "198.18.0.1", "240.0.0.1"),
        *("::1", "::", "fc00::1", "fd12:3456::1", "fe80::1", "fe80::1%eth0", "ff02::1", "ff0e::1"),
        *("::ffff:127.0.0.1", "::ffff:10.0.0.1", "64:ff9b::a00:1", "2002:a9fe:a9fe::1", "not an address"),
    ],
)
def test_private_local_and_special_addresses_are_refused(address: str) -> None:
    assert is_refused(address)


@pytest.mark.parametrize(
    "address", ["93.184.216.34", "8.8.8.8", "2606:4700::1111", "::ffff:93.184.216.34", "64:ff9b::808:808"]
)
def test_public_addresses_are_allowed(address: str) -> None:
    assert not is_refused(address)


class _Stream:
    """A stand-in for httpcore's network stream: reports the address it is connected to."""

    def __init__(self, address: tuple[str, int]) -> None:
        self.address = address

    def get_extra_info(self, info: str) -> object:
        return self.address if info == "server_addr" else None


class _Body(httpx.AsyncByteStream):
    def __init__(self) -> None:
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield b"hello"

    async def aclose(self) -> None:
        self.closed = True


class _Inner(httpx.AsyncBaseTransport):
    """Answers every request with 200 ``hello``, as if connected to ``peer``; records the requests."""

    def __init__(self, peer: tuple[str, int] = ("93.184.216.34", 80)) -> None:
        self.peer = peer
        self.requests: list[str] = []
        self.body = _Body()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(str(request.url))
        return httpx.Response(200, stream=self.body, extensions={"network_stream": _Stream(self.peer)})


def _resolving_to(*addresses: str) -> object:
    async def resolve(host: str, port: int) -> list[str]:
        return list(addresses)

    return resolve


async def _get(transport: GuardTransport, url: str) -> httpx.Response:
    async with httpx.AsyncClient(transport=transport) as client:
        return await client.get(url)


async def test_a_name_resolving_to_a_public_address_is_fetched() -> None:
    inner = _Inner()
    response = await _get(
        GuardTransport(inner, resolve=_resolving_to("93.184.216.34")), "http://example.com/"
    )
    assert response.text == "hello"
    assert inner.requests == ["http://example.com/"]


async def test_a_name_is_refused_when_any_of_its_addresses_is_private() -> None:
    inner = _Inner()
    guard = GuardTransport(inner, resolve=_resolving_to("93.184.216.34", "10.1.2.3"))
    with pytest.raises(PrivateAddressError) as caught:
        await _get(guard, "http://intranet.example:8080/")
    assert caught.value.reason == "intranet.example resolves to 10.1.2.3, a private or local address"
    assert caught.value.allow_entry == "intranet.example:8080"
    assert inner.requests == []


async def test_a_name_that_does_not_resolve_is_passed_on() -> None:
    inner = _Inner()
    await _get(GuardTransport(inner, resolve=_resolving_to()), "http://nowhere.invalid/")
    assert inner.requests == ["http://nowhere.invalid/"]


async def test_a_connection_that_went_to_a_private_address_is_refused_and_closed() -> None:
    inner = _Inner(peer=("127.0.0.1", 80))
    guard = GuardTransport(inner, resolve=_resolving_to("93.184.216.34"))
    with pytest.raises(PrivateAddressError) as caught:
        await _get(guard, "http://rebind.example/")
    assert caught.value.reason == "rebind.example connected to 127.0.0.1, a private or local address"
    assert inner.requests == ["http://rebind.example/"]
    assert inner.body.closed


async def test_through_a_proxy_the_connected_address_is_not_checked() -> None:
    inner = _Inner(peer=("127.0.0.1", 3128))  # the proxy
    guard = GuardTransport(inner, check_peer=False, resolve=_resolving_to("93.184.216.34"))
    assert (await _get(guard, "http://rebind.example/")).text == "hello"


async def test_allowed_hosts_skip_every_check() -> None:
    inner = _Inner(peer=("10.0.0.5", 443))
    guard = GuardTransport(inner, allow_hosts=["*.Corp.Example"], resolve=_resolving_to("10.0.0.5"))
    assert (await _get(guard, "https://docs.corp.example/")).text == "hello"
    with pytest.raises(PrivateAddressError):
        await _get(guard, "https://corp.example/")


@pytest.mark.parametrize(
    ("pattern", "url", "allowed"),
    [
        ("docs.internal", "http://docs.internal/", True),
        ("docs.internal", "http://DOCS.internal:8080/", True),
        ("docs.internal:80", "http://docs.internal/", True),
        ("docs.internal:8080", "http://docs.internal/", False),
        ("docs.internal:443", "https://docs.internal/", True),
        ("127.0.0.1:8080", "http://127.0.0.1:8080/", True),
        ("127.0.0.1:8080", "http://127.0.0.1:8081/", False),
        ("*.corp.example", "http://a.b.corp.example/", True),
        ("*.corp.example", "http://corp.example/", False),
        ("[::1]:*", "http://[::1]:9000/", True),
        ("::1", "http://[::1]:9000/", True),
        ("localhost", "http://localhost./", True),
    ],
)
async def test_allowed_hosts_are_host_or_host_port_globs(pattern: str, url: str, allowed: bool) -> None:
    inner = _Inner(peer=("127.0.0.1", 80))
    guard = GuardTransport(inner, allow_hosts=[pattern], resolve=_resolving_to("127.0.0.1"))
    if allowed:
        assert (await _get(guard, url)).text == "hello"
    else:
        with pytest.raises(PrivateAddressError):
            await _get(guard, url)


def test_proxies_from_the_environment_are_guarded_without_the_peer_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTPS_PROXY", "proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", "internal.example,::1")
    direct, mounts = guarded_transports(allow_hosts=["a.example"])
    assert direct.check_peer and direct.allow_hosts == ("a.example",)
    assert sorted(mounts) == ["all://*internal.example", "all://[::1]", "https://"]
    proxied = mounts["https://"]
    assert isinstance(proxied, GuardTransport) and not proxied.check_peer
    assert mounts["all://*internal.example"] is None and mounts["all://[::1]"] is None
