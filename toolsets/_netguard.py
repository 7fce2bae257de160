"""A guard against server-side request forgery for HTTP clients: private and local addresses refused.

``guarded_transports(allow_hosts=...)`` gives the ``transport`` and ``mounts`` of an
``httpx.AsyncClient``. Every request the client sends, the first one and each redirect it follows,
passes through a ``GuardTransport`` which, before the request leaves:

- lets hosts matching one of ``allow_hosts`` through unchecked (``host`` or ``host:port`` globs, any
  case, matched with ``fnmatch``);
- refuses an IP literal that is not globally routable (``is_refused``);
- resolves a name and refuses it when any of its addresses is refused (a name that does not
  resolve is passed on: the inner transport reports the failure).

After the inner transport connects, the address the connection actually went to (httpcore's
``network_stream``) is checked again, so that a name which resolves to a public address for the
check and to a private one for the connection (DNS rebinding) is refused too. Requests sent through a
proxy skip that second check, as the peer is then the proxy. Proxies come from the environment
(``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``, ``NO_PROXY``) as httpx reads them, since a client given
its own transport no longer reads them itself.

A refusal is a ``PrivateAddressError`` (an ``httpx.TransportError``). This module imports httpx: import
it inside functions, so that importing a toolset (``runner validate`` does) stays cheap.
"""

from __future__ import annotations

import asyncio
import fnmatch
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Sequence
from typing import Literal
from urllib.request import getproxies

import httpx

__all__ = ["GuardTransport", "PrivateAddressError", "Resolver", "guarded_transports", "is_refused"]

Resolver = Callable[[str, int], Awaitable[list[str]]]
"""``(host, port) -> addresses``: how a host name is resolved before a request (``[]`` when it is not)."""

_DEFAULT_PORTS = {"http": 80, "https": 443}
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


def is_refused(address: str | ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Whether an address is not globally routable: loopback, private, link-local, CGNAT, multicast...

    An IPv6 address that carries an IPv4 one (IPv4-mapped ``::ffff:a.b.c.d``, NAT64 ``64:ff9b::/96``,
    6to4 ``2002::/16``) is judged by that IPv4 address. A string that is not an address is refused.
    """
    try:
        ip = ipaddress.ip_address(address) if isinstance(address, str) else address
    except ValueError:
        return True
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        elif ip in _NAT64:
            ip = ipaddress.IPv4Address(int(ip) & 0xFFFF_FFFF)
        elif ip.sixtofour is not None:
            ip = ip.sixtofour
    return not ip.is_global or ip.is_multicast


class PrivateAddressError(httpx.TransportError):
    """A request refused because its host is, resolves to or connected to a private or local address."""

    def __init__(
        self, request: httpx.Request, address: str, *, how: Literal["is", "resolves", "connected"]
    ) -> None:
        self.url = request.url
        self.address = address
        self.how = how
        super().__init__(f"{self.url}: {self.reason}", request=request)

    @property
    def reason(self) -> str:
        """What is wrong, e.g. ``localhost resolves to 127.0.0.1, a private or local address``."""
        if self.how == "is":
            return f"{self.address} is a private or local address"
        verb = "resolves to" if self.how == "resolves" else "connected to"
        return f"{self.url.host} {verb} {self.address}, a private or local address"

    @property
    def allow_entry(self) -> str:
        """The ``allow_hosts`` entry that lets this URL through: its host, with the port if one is given."""
        host = _bracketed(self.url.host)
        return f"{host}:{self.url.port}" if self.url.port is not None else host


class GuardTransport(httpx.AsyncBaseTransport):
    """Sends requests through ``inner`` unless they go to a private or local address."""

    def __init__(
        self,
        inner: httpx.AsyncBaseTransport,
        *,
        allow_hosts: Sequence[str] = (),
        check_peer: bool = True,
        resolve: Resolver | None = None,
    ) -> None:
        self.inner = inner
        self.allow_hosts = tuple(pattern.strip().lower() for pattern in allow_hosts)
        self.check_peer = check_peer
        """False when ``inner`` goes through a proxy: the connected peer is then the proxy."""
        self.resolve = resolve or _resolve

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Refuse the request before it leaves, or after connecting; otherwise the inner response."""
        url = request.url
        if self._allowed(url):
            return await self.inner.handle_async_request(request)
        if _is_ip(url.host):
            if is_refused(url.host):
                raise PrivateAddressError(request, url.host, how="is")
        else:
            port = url.port or _DEFAULT_PORTS.get(url.scheme, 80)
            for address in await self.resolve(url.raw_host.decode("ascii"), port):
                if is_refused(address):
                    raise PrivateAddressError(request, address, how="resolves")
        response = await self.inner.handle_async_request(request)
        peer = _peer_address(response) if self.check_peer else None
        if peer is not None and is_refused(peer):
            await response.aclose()
            raise PrivateAddressError(request, peer, how="connected")
        return response

    async def aclose(self) -> None:
        """Close the inner transport."""
        await self.inner.aclose()

    def _allowed(self, url: httpx.URL) -> bool:
        if not self.allow_hosts:
            return False
        host = url.host.lower().rstrip(".")
        port = url.port or _DEFAULT_PORTS.get(url.scheme, 80)
        names = {host, _bracketed(host), f"{_bracketed(host)}:{port}"}
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in self.allow_hosts for name in names)


def guarded_transports(
    *, allow_hosts: Sequence[str] = ()
) -> tuple[GuardTransport, dict[str, httpx.AsyncBaseTransport | None]]:
    """The ``transport`` and ``mounts`` for an ``httpx.AsyncClient``: direct and proxied, all guarded."""
    direct = GuardTransport(httpx.AsyncHTTPTransport(), allow_hosts=allow_hosts)
    mounts: dict[str, httpx.AsyncBaseTransport | None] = {
        pattern: None
        if proxy is None
        else GuardTransport(httpx.AsyncHTTPTransport(proxy=proxy), allow_hosts=allow_hosts, check_peer=False)
        for pattern, proxy in _environment_proxies().items()
    }
    return direct, mounts


def _environment_proxies() -> dict[str, str | None]:
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


def _peer_address(response: httpx.Response) -> str | None:
    """The address the response's connection went to, when the transport tells."""
    stream = response.extensions.get("network_stream")
    get_extra_info = getattr(stream, "get_extra_info", None)
    if get_extra_info is None:
        return None
    peer = get_extra_info("server_addr")
    return str(peer[0]) if isinstance(peer, tuple) and peer else None


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _bracketed(host: str) -> str:
    """An IPv6 host in brackets, as it is written before a port; other hosts as they are."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host
