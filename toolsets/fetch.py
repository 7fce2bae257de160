"""The ``fetch`` toolset: one tool, ``fetch``, an HTTP(S) GET whose response is returned as text.

HTML becomes readable text (scripts, styles and tags dropped; headings, list items, table cells and
links kept in a light Markdown form); JSON is re-indented compactly; other text is returned as it is;
binary content is refused. Long text is returned ``max_chars`` at a time (the ``start`` argument reads
on). A non-2xx status is a tool error with the status and the beginning of the body. Only ``http`` and
``https`` URLs are fetched; redirects are followed.

Private and local addresses are refused (a guard against server-side request forgery, in
``toolsets._netguard``): loopback, private networks, link-local (cloud metadata at 169.254.169.254),
CGNAT, unique-local, site-local, multicast and the like, IPv6 spellings of IPv4 ones included, whether
the URL names the address or its host name resolves to it, for the URL and for every redirect
followed. A name is resolved once and the connection goes to the addresses checked (no DNS
rebinding); through a proxy, a name that does not resolve here is refused.

Options: ``max_chars`` (default 100000), ``timeout_s`` (the whole request, default 20), ``headers``
(sent with every request), ``allow_hosts`` (``host`` or ``host:port`` globs fetched even when
private, e.g. ``docs.internal``, ``127.0.0.1:8080``, ``*.corp.example``) and ``allow_private``
(true turns the guard off), ``propagate_trace`` (true: while tracing is on, each request carries the
``execute_tool`` span's ``traceparent``; off by default, since the hosts are arbitrary and a trace id
tells them which run asked). One ``httpx.AsyncClient`` per source, closed with the session; proxies
from the environment are used.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from html.parser import HTMLParser
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit

import runner.telemetry as telemetry
from runner.errors import ConfigError, ToolError
from runner.tls import tls_context
from runner.tools.base import RunContext, Tool

if TYPE_CHECKING:
    import httpx

    from runner.tools.toolset import ToolsetContext
    from toolsets._netguard import PrivateAddressError

__all__ = ["OPTIONS_SCHEMA", "build", "html_to_text"]

OPTIONS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "max_chars": {
            "type": "integer",
            "minimum": 1,
            "default": 100_000,
            "description": "the most characters one call returns (the start argument reads on)",
        },
        "timeout_s": {
            "type": "number",
            "exclusiveMinimum": 0,
            "default": 20,
            "description": "seconds one request may take in all",
        },
        "headers": {
            "type": "object",
            "additionalProperties": {"type": "string"},
            "default": {},
            "description": "HTTP headers sent with every request",
        },
        "allow_private": {
            "type": "boolean",
            "default": False,
            "description": "fetch private and local addresses too (loopback, private networks, "
            "link-local such as 169.254.169.254); off by default",
        },
        "allow_hosts": {
            "type": "array",
            "items": {"type": "string", "minLength": 1},
            "default": [],
            "description": "hosts fetched even when they are private or local: host or host:port globs, "
            "any case, e.g. docs.internal, 127.0.0.1:8080, *.corp.example",
        },
        "propagate_trace": {
            "type": "boolean",
            "default": False,
            "description": "send the tool call's W3C trace context (traceparent, tracestate) with each "
            "request while tracing is on (--otel); off by default: fetch reaches arbitrary hosts",
        },
    },
    "additionalProperties": False,
}

_USER_AGENT = "Mozilla/5.0 (compatible; runner-fetch/1)"
_MAX_BYTES = 5_000_000
_ERROR_BODY_CHARS = 500
_TIMEOUT_GRACE_S = 5.0
_TEXT_TYPES = re.compile(
    r"^(text/.*|application/(xml|javascript|ecmascript|x-yaml|yaml|toml|csv|x-sh|x-ndjson|sql)|.*\+xml)$"
)


def build(options: dict[str, Any], ctx: ToolsetContext) -> list[Tool]:
    """The ``fetch`` tool, with one HTTP client that the session's exit stack closes."""
    import httpx

    timeout_s = float(options["timeout_s"])
    headers = {"User-Agent": _USER_AGENT, **{str(k): str(v) for k, v in options["headers"].items()}}
    settings: dict[str, Any] = {
        "verify": tls_context(),
        "timeout": timeout_s,
        "follow_redirects": True,
        "max_redirects": 10,
    }
    try:
        if options["allow_private"]:
            client = httpx.AsyncClient(headers=headers, **settings)
        else:
            from toolsets._netguard import guarded_transports

            allow_hosts = [str(host) for host in options["allow_hosts"]]
            transport, mounts = guarded_transports(allow_hosts=allow_hosts)
            client = httpx.AsyncClient(headers=headers, transport=transport, mounts=mounts, **settings)
    except (ImportError, ValueError) as exc:  # a proxy from the environment httpx cannot use
        raise ConfigError(
            f"cannot use the proxy set in the environment: {exc}",
            hint="fix or unset HTTP_PROXY / HTTPS_PROXY / ALL_PROXY (a socks5:// proxy needs httpx[socks])",
        ) from None
    ctx.stack.push_async_callback(client.aclose)
    fetcher = _Fetcher(
        client,
        max_chars=int(options["max_chars"]),
        timeout_s=timeout_s,
        propagate_trace=bool(options.get("propagate_trace", False)),
    )

    async def call(arguments: dict[str, Any], run: RunContext) -> str:
        return await fetcher.fetch(str(arguments["url"]), start=int(arguments.get("start", 0)))

    return [
        Tool(
            name="fetch",
            description=(
                "Fetch a web page or file over HTTP(S) (GET) and return it as text: HTML as readable "
                "text with links as [text](url), JSON re-indented, other text as is. At most "
                f"{fetcher.max_chars} characters per call; when there is more, a note gives the start "
                "value to read on."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "url": {"type": "string", "description": "the http:// or https:// URL to fetch"},
                    "start": {
                        "type": "integer",
                        "minimum": 0,
                        "description": "character offset to start from (to read on after a cut)",
                    },
                },
                "required": ["url"],
            },
            source_kind="builtin",
            source_id="fetch",
            call=call,
            timeout_s=timeout_s + _TIMEOUT_GRACE_S,
        )
    ]


class _Fetcher:
    """GETs URLs with one client and turns the responses into text."""

    def __init__(
        self, client: httpx.AsyncClient, *, max_chars: int, timeout_s: float, propagate_trace: bool = False
    ) -> None:
        self.client = client
        self.max_chars = max_chars
        self.timeout_s = timeout_s
        self.propagate_trace = propagate_trace

    async def fetch(self, url: str, *, start: int = 0) -> str:
        """The response to ``GET url`` as text, ``max_chars`` from ``start``; failures are ToolErrors."""
        import httpx

        from toolsets._netguard import PrivateAddressError

        url = url.strip()
        parts = urlsplit(url)
        if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
            raise ToolError(f"Only http:// and https:// URLs can be fetched, not {url!r}.")
        try:
            async with asyncio.timeout(self.timeout_s):
                headers = telemetry.trace_headers() if self.propagate_trace else None
                async with self.client.stream("GET", url, headers=headers) as response:
                    body, complete = await _read_capped(response)
        except PrivateAddressError as exc:
            raise ToolError(_refusal(url, exc)) from None
        except (TimeoutError, httpx.TimeoutException):
            raise ToolError(f"Fetching {url} timed out after {self.timeout_s:g} s.") from None
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise ToolError(f"Could not fetch {url}: {type(exc).__name__}: {exc}") from None
        final_url = str(response.url)
        mime = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        text = _render(body, mime, encoding=response.charset_encoding or "utf-8", url=final_url)
        if not response.is_success:
            excerpt = (text or "").strip()[:_ERROR_BODY_CHARS]
            raise ToolError(
                f"HTTP {response.status_code} {response.reason_phrase} from {final_url}"
                + (f": {excerpt}" if excerpt else "")
            )
        if text is None:
            raise ToolError(
                f"{final_url} returned {mime or 'binary'} content ({len(body)} bytes), which is not text."
            )
        redirected_to = final_url if response.history else None
        return self._page(text, start=start, complete=complete, redirected_to=redirected_to)

    def _page(self, text: str, *, start: int, complete: bool, redirected_to: str | None) -> str:
        """``max_chars`` of ``text`` from ``start``, with notes about a redirect and what is left."""
        if start and start >= len(text):
            raise ToolError(f"start={start} is past the end: the text has {len(text)} characters.")
        piece = text[start : start + self.max_chars] or "(empty response)"
        end = min(start + self.max_chars, len(text))
        lines = [f"[redirected to {redirected_to}]"] if redirected_to else []
        lines.append(piece)
        if end < len(text):
            lines.append(
                f"[cut: characters {start}-{end} of {len(text)} shown; "
                f"call fetch with start={end} to read on]"
            )
        if not complete:
            lines.append(f"[the response is larger than {_MAX_BYTES} bytes; only its beginning was read]")
        return "\n".join(lines)


def _refusal(url: str, error: PrivateAddressError) -> str:
    """Why ``url`` was not fetched, and the options that would allow it."""
    import httpx

    where = f"it redirects to {error.url}, and " if error.url != httpx.URL(url) else ""
    return (
        f"Refused to fetch {url}: {where}{error.reason}. The agent can allow it with the fetch "
        f'toolset\'s option allow_private: true or allow_hosts: ["{error.allow_entry}"].'
    )


async def _read_capped(response: httpx.Response) -> tuple[bytes, bool]:
    """The body, at most ``_MAX_BYTES`` of it, and whether it was read whole."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size > _MAX_BYTES:
            return b"".join(chunks)[:_MAX_BYTES], False
    return b"".join(chunks), True


def _render(body: bytes, mime: str, *, encoding: str, url: str) -> str | None:
    """The body as text by content type, or None when it is not text."""
    try:
        text = body.decode(encoding, errors="replace")
    except LookupError:  # an unknown charset name
        text = body.decode("utf-8", errors="replace")
    sniff = text[:512].lstrip().lower()
    if mime in ("text/html", "application/xhtml+xml") or (
        not mime and sniff.startswith(("<!doctype html", "<html"))
    ):
        return html_to_text(text, base_url=url)
    if mime == "application/json" or mime.endswith("+json"):
        try:
            return json.dumps(json.loads(text), indent=1, ensure_ascii=False)
        except ValueError:
            return text
    if (mime and not _TEXT_TYPES.match(mime)) or b"\0" in body[:1024]:
        return None
    return text


_BLOCK_TAGS = frozenset(
    {
        *("address", "article", "aside", "blockquote", "dd", "details", "div", "dl", "dt", "fieldset"),
        *("figcaption", "figure", "footer", "form", "header", "hr", "main", "nav", "ol", "p", "pre"),
        *("section", "summary", "table", "tbody", "thead", "tfoot", "ul"),
    }
)
_SKIPPED_TAGS = frozenset({"script", "style", "noscript", "template", "svg", "iframe", "object", "canvas"})
_HEADINGS = {f"h{level}": level for level in range(1, 7)}


class _TextExtractor(HTMLParser):
    """Collects the readable text of an HTML document in a light Markdown form."""

    def __init__(self, base_url: str) -> None:
        super().__init__(convert_charrefs=True)
        self.base_url = base_url
        self.parts: list[str] = []
        self.title = ""
        self._skip = 0
        self._pre = 0
        self._in_title = False
        self._links: list[tuple[str | None, int]] = []
        self._cells = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        """Open a skipped region, or emit the Markdown that starts a block, item, cell or link."""
        if tag == "title":
            self._in_title = True
        if tag in _SKIPPED_TAGS:
            self._skip += 1
        if self._skip:
            return
        if tag in _HEADINGS:
            self.parts.append("\n\n" + "#" * _HEADINGS[tag] + " ")
        elif tag == "li":
            self.parts.append("\n- ")
        elif tag == "br":
            self.parts.append("\n")
        elif tag == "tr":
            self.parts.append("\n")
            self._cells = 0
        elif tag in ("td", "th"):
            self.parts.append(" | " if self._cells else "")
            self._cells += 1
        elif tag == "a":
            href = dict(attrs).get("href")
            self._links.append((self._link_target(href), len(self.parts)))
        elif tag == "img":
            alt = (dict(attrs).get("alt") or "").strip()
            if alt:
                self.parts.append(f"[image: {alt}]")
        if tag == "pre":
            self._pre += 1
        if tag in _BLOCK_TAGS:
            self.parts.append("\n\n" if tag == "p" else "\n")

    def handle_endtag(self, tag: str) -> None:
        """Close a skipped region, finish a link, or end a block."""
        if tag == "title":
            self._in_title = False
        if tag in _SKIPPED_TAGS:
            self._skip = max(self._skip - 1, 0)
            return
        if self._skip:
            return
        if tag == "a" and self._links:
            target, index = self._links.pop()
            label = re.sub(r"\s+", " ", "".join(self.parts[index:])).strip()
            if target and label:
                self.parts[index:] = [f"[{label}]({target})"]
        if tag == "pre":
            self._pre = max(self._pre - 1, 0)
        if tag in _HEADINGS or tag in _BLOCK_TAGS:
            self.parts.append("\n\n" if tag in _HEADINGS or tag == "p" else "\n")

    def handle_data(self, data: str) -> None:
        """Keep text: whitespace collapsed outside ``<pre>``, the title set aside."""
        if self._in_title:
            self.title += data
            return
        if self._skip:
            return
        if self._pre:
            self.parts.append(data)
            return
        text = re.sub(r"\s+", " ", data)
        if not self.parts or self.parts[-1][-1:].isspace():
            text = text.lstrip()
        if text:
            self.parts.append(text)

    def _link_target(self, href: str | None) -> str | None:
        if not href or href.startswith("#"):
            return None
        target = urljoin(self.base_url, href.strip())
        return target if urlsplit(target).scheme in ("http", "https") else None

    def text(self) -> str:
        """The collected text, with the title as a first heading and tidy blank lines."""
        lines = [line.rstrip() for line in "".join(self.parts).splitlines()]
        body = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip("\n")
        title = re.sub(r"\s+", " ", self.title).strip()
        if title and not body.startswith(f"# {title}"):
            return f"# {title}\n\n{body}" if body else f"# {title}"
        return body


def html_to_text(html: str, *, base_url: str = "") -> str:
    """Readable text of an HTML document: no scripts, styles or tags; links as ``[text](url)``."""
    parser = _TextExtractor(base_url)
    with contextlib.suppress(AssertionError, ValueError):  # html.parser gives up on some malformed markup
        parser.feed(html)
        parser.close()
    return parser.text()
