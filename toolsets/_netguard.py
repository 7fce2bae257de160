"""A guard against server-side request forgery for HTTP clients: private and local addresses refused.

``guarded_transports(allow_hosts=...)`` gives the ``transport`` and ``mounts`` of an
``httpx.AsyncClient``. Every request the client sends, the first one and each redirect it follows,
goes through a ``GuardTransport``, and nothing is sent to an address that was not checked:

- hosts matching one of ``allow_hosts`` go through unchecked (``host`` or ``host:port`` globs, any
  case, matched with ``fnmatch``);
- an IP literal that is not globally routable (``is_refused``) is refused;
- a name is resolved once and refused when any of its addresses is refused. Direct connections go
  to the addresses that were checked: the connection pool's network backend (``PinningBackend``)
  resolves, checks and connects in one step, so a name that answers a public address first and a
  private one next (DNS rebinding) cannot slip between the check and the connection. The request
  keeps its ``Host`` header, and TLS its server name and certificate check, for the name.
- through a proxy (``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``; ``NO_PROXY`` hosts go direct, as
  httpx reads them — a client given its own transport no longer reads them itself), the destination
  is checked the same way before the request goes to the proxy, and a name that does not resolve
  here is refused, since its address cannot be checked. A plain ``http`` request then names the
  checked address to the proxy (its ``Host`` header keeps the name), so the proxy cannot resolve
  the name elsewhere; an ``https`` one names the host, and the TLS handshake, which checks the
  certificate for that name before any request is sent, is what keeps a rebound name out.

A refusal is a ``PrivateAddressError`` (an ``httpx.TransportError``). This module imports httpx: import
it inside functions, so that importing a toolset (``runner validate`` does) stays cheap.
"""

from __future__ import annotations

import asyncio
import fnmatch
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal
from urllib.request import getproxies

import httpcore
import httpx

from runner.tls import tls_context

__all__ = [
    "GuardTransport",
    "HostPolicy",
    "PinningBackend",
    "PrivateAddressError",
    "Resolver",
    "guarded_transports",
    "is_refused",
]

Resolver = Callable[[str, int], Awaitable[list[str]]]
"""``(host, port) -> addresses``: how a host name is resolved before a request (``[]`` when it is not)."""

Refusal = Literal["is", "resolves", "unresolved"]
"""Why a host is refused: it is a private address, resolves to one, or cannot be resolved here."""

_DEFAULT_PORTS = {"http": 80, "https": 443}
_GLOBAL_UNICAST = ipaddress.IPv6Network("2000::/3")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=20, keepalive_expiry=5.0)


def is_refused(address: str | ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Whether an address is not globally routable: loopback, private, link-local, CGNAT, multicast...

    An IPv6 address that carries an IPv4 one (IPv4-mapped ``::ffff:a.b.c.d``, NAT64 ``64:ff9b::/96``,
    6to4 ``2002::/16``, Teredo ``2001::/32``) is judged by that IPv4 address (Teredo: by both). Any
    other IPv6 address must be global unicast (``2000::/3``) and global: IPv4-compatible ``::a.b.c.d``,
    IPv4-translated ``::ffff:0:a.b.c.d``, local-use NAT64 ``64:ff9b:1::/48``, site-local ``fec0::/10``,
    unique-local, link-local, multicast and the unspecified address are refused. A string that is not
    an address is refused.
    """
    try:
        ip = ipaddress.ip_address(address) if isinstance(address, str) else address
    except ValueError:
        return True
    if isinstance(ip, ipaddress.IPv4Address):
        return _ipv4_refused(ip)
    if ip.ipv4_mapped is not None:
        return _ipv4_refused(ip.ipv4_mapped)
    if ip in _NAT64:
        return _ipv4_refused(ipaddress.IPv4Address(int(ip) & 0xFFFF_FFFF))
    if ip.sixtofour is not None:
        return _ipv4_refused(ip.sixtofour)
    if ip.teredo is not None:
        return any(_ipv4_refused(embedded) for embedded in ip.teredo)
    return ip not in _GLOBAL_UNICAST or not ip.is_global or ip.is_multicast


def _ipv4_refused(ip: ipaddress.IPv4Address) -> bool:
    return not ip.is_global or ip.is_multicast


class PrivateAddressError(httpx.TransportError):
    """A request refused because its host is, resolves to, or may resolve to a private or local address."""

    def __init__(self, request: httpx.Request, address: str, *, how: Refusal) -> None:
        self.url = request.url
        self.address = address
        self.how = how
        super().__init__(f"{self.url}: {self.reason}", request=request)

    @property
    def reason(self) -> str:
        """What is wrong, e.g. ``localhost resolves to 127.0.0.1, a private or local address``."""
        if self.how == "is":
            return f"{self.address} is a private or local address"
        if self.how == "unresolved":
            return (
                f"{self.url.host} does not resolve here, so the address a proxy would connect to "
                "cannot be checked"
            )
        return f"{self.url.host} resolves to {self.address}, a private or local address"

    @property
    def allow_entry(self) -> str:
        """The ``allow_hosts`` entry that lets this URL through: its host, with the port if one is given."""
        host = _bracketed(self.url.host)
        return f"{host}:{self.url.port}" if self.url.port is not None else host


class _Refused(Exception):
    """A refusal from below httpx (the network backend), where the request is not known."""

    def __init__(self, address: str, how: Refusal) -> None:
        super().__init__(address, how)
        self.address = address
        self.how = how


@dataclass(frozen=True)
class HostPolicy:
    """Which hosts may be connected to: ``allow_hosts`` globs, else only globally routable addresses."""

    allow_hosts: tuple[str, ...] = ()
    resolve: Resolver | None = None
    """Resolves names (the system resolver when None); tests give their own."""

    @classmethod
    def of(cls, allow_hosts: Iterable[str] = (), resolve: Resolver | None = None) -> HostPolicy:
        """A policy with the globs normalised: stripped, lower case, international names in ASCII."""
        return cls(tuple(_ascii(pattern.strip().lower()) for pattern in allow_hosts), resolve)

    def allows(self, host: str, port: int) -> bool:
        """Whether ``host:port`` matches an ``allow_hosts`` glob (and so goes through unchecked)."""
        if not self.allow_hosts:
            return False
        host = _ascii(host.lower().rstrip("."))
        names = {host, _bracketed(host), f"{_bracketed(host)}:{port}"}
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in self.allow_hosts for name in names)

    async def checked_addresses(self, host: str, port: int) -> list[str]:
        """The addresses of ``host`` (itself if it is an IP literal), every one checked.

        Raises ``_Refused`` when one of them is refused, or (``"unresolved"``) when there are none.
        """
        if _is_ip(host):
            if is_refused(host):
                raise _Refused(host, "is")
            return [host]
        addresses = list(dict.fromkeys(await (self.resolve or _resolve)(host, port)))
        if not addresses:
            raise _Refused(host, "unresolved")
        for address in addresses:
            if is_refused(address):
                raise _Refused(address, "resolves")
        return addresses


class PinningBackend(httpcore.AsyncNetworkBackend):
    """A network backend that connects only to checked addresses: resolve once, check, connect to those."""

    def __init__(self, policy: HostPolicy, inner: httpcore.AsyncNetworkBackend | None = None) -> None:
        self.policy = policy
        self.inner = inner or httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        """Connect to the first checked address of ``host`` that answers (allowed hosts: as they are)."""
        if self.policy.allows(host, port):
            addresses = [host]
        else:
            try:
                addresses = await self.policy.checked_addresses(host, port)
            except _Refused as refused:
                if refused.how != "unresolved":
                    raise
                raise httpcore.ConnectError(f"{host} does not resolve") from None
        failure: Exception | None = None
        for address in addresses:
            try:
                return await self.inner.connect_tcp(
                    address, port, timeout=timeout, local_address=local_address, socket_options=socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        assert failure is not None  # addresses is never empty
        raise failure

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        """Refused: a Unix socket is local by definition."""
        raise _Refused(path, "is")

    async def sleep(self, seconds: float) -> None:
        """Sleep as the inner backend does."""
        await self.inner.sleep(seconds)


class _PinnedHTTPTransport(httpx.AsyncHTTPTransport):
    """httpx's transport, with a connection pool whose connections go through a ``PinningBackend``."""

    def __init__(self, backend: PinningBackend) -> None:
        ssl_context = tls_context()
        super().__init__(verify=ssl_context, limits=_LIMITS)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context,
            max_connections=_LIMITS.max_connections,
            max_keepalive_connections=_LIMITS.max_keepalive_connections,
            keepalive_expiry=_LIMITS.keepalive_expiry,
            network_backend=backend,
        )


class GuardTransport(httpx.AsyncBaseTransport):
    """Sends requests directly (to checked addresses only) or through ``proxy`` (destination checked)."""

    def __init__(
        self,
        *,
        allow_hosts: Sequence[str] = (),
        proxy: str | None = None,
        resolve: Resolver | None = None,
        network_backend: httpcore.AsyncNetworkBackend | None = None,
    ) -> None:
        self.policy = HostPolicy.of(allow_hosts, resolve)
        self.proxy = proxy
        self.inner: httpx.AsyncBaseTransport = (
            _PinnedHTTPTransport(PinningBackend(self.policy, network_backend))
            if proxy is None
            else httpx.AsyncHTTPTransport(proxy=proxy, limits=_LIMITS, verify=tls_context())
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """The inner response, unless the destination is refused (nothing is sent then)."""
        url = request.url
        host = url.raw_host.decode("ascii")
        port = url.port or _DEFAULT_PORTS.get(url.scheme, 80)
        if self.policy.allows(url.host, port) or self.policy.allows(host, port):
            return await self.inner.handle_async_request(request)
        try:
            if self.proxy is not None:
                addresses = await self.policy.checked_addresses(host, port)
                if url.scheme == "http":
                    request = _addressed_to(request, addresses[0])
            elif _is_ip(host):
                await self.policy.checked_addresses(host, port)
            return await self.inner.handle_async_request(request)
        except _Refused as refused:
            raise PrivateAddressError(request, refused.address, how=refused.how) from None

    async def aclose(self) -> None:
        """Close the inner transport."""
        await self.inner.aclose()


def _addressed_to(request: httpx.Request, address: str) -> httpx.Request:
    """``request`` with its URL naming ``address`` in place of the host; the ``Host`` header is kept."""
    return httpx.Request(
        request.method,
        request.url.copy_with(host=address),
        headers=request.headers,
        stream=request.stream,
        extensions=request.extensions,
    )


def guarded_transports(
    *,
    allow_hosts: Sequence[str] = (),
    resolve: Resolver | None = None,
    network_backend: httpcore.AsyncNetworkBackend | None = None,
) -> tuple[GuardTransport, dict[str, httpx.AsyncBaseTransport | None]]:
    """The ``transport`` and ``mounts`` for an ``httpx.AsyncClient``: direct and proxied, all guarded."""
    direct = GuardTransport(allow_hosts=allow_hosts, resolve=resolve, network_backend=network_backend)
    mounts: dict[str, httpx.AsyncBaseTransport | None] = {
        pattern: None
        if proxy is None
        else GuardTransport(allow_hosts=allow_hosts, proxy=proxy, resolve=resolve)
        for pattern, proxy in environment_proxies().items()
    }
    return direct, mounts


def environment_proxies() -> dict[str, str | None]:
    """Proxy URLs by httpx mount pattern, as httpx reads the environment (None: connect directly)."""
    info = getproxies()
    mounts: dict[str, str | None] = {}
    for scheme in ("http", "https", "all"):
        if info.get(scheme):
            proxy = info[scheme]
            mounts[f"{scheme}://"] = proxy if "://" in proxy else f"http://{proxy}"
    for host in (part.strip() for part in info.get("no", "").split(",")):
        if host == "*":
            return {}
        if not host:
            continue
        if "://" in host:
            mounts[host] = None
        elif _is_ip(host.split("/", 1)[0]):
            mounts[f"all://{_bracketed(host)}"] = None
        elif host.lower() == "localhost":
            mounts[f"all://{host}"] = None
        else:
            mounts[f"all://*{host}"] = None
    return mounts


async def _resolve(host: str, port: int) -> list[str]:
    """The addresses ``host`` resolves to, or ``[]`` when it does not resolve."""
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return []
    return [str(info[4][0]) for info in infos]


def _ascii(name: str) -> str:
    """A host name (or glob) with its international labels in IDNA form, as connections see them."""
    try:
        return ".".join(
            label if label.isascii() else label.encode("idna").decode() for label in name.split(".")
        )
    except UnicodeError:
        return name


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _bracketed(host: str) -> str:
    """An IPv6 host in brackets, as it is written before a port; other hosts as they are."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host
