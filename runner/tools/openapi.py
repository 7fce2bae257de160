"""OpenAPI tool sources: ``load_source`` turns a document into tools that call its operations over HTTP.

Calls of one source share one ``httpx.AsyncClient`` per session, opened on the first call and closed
by the session's exit stack. The base URL is the source's ``base_url``, else ``servers[0].url``
resolved against the document's URL (relative server URLs work), else the document's origin.

Model-written arguments cannot steer a call elsewhere: every path parameter is percent-encoded whole
(``quote(value, safe="")``, and a value of dots is encoded too, so ``..`` is no dot segment), and the
final URL is checked to keep the base URL's scheme, host, port and path prefix. Query, header and
cookie parameters are sent in their declared style; the source's ``headers`` go with every call (and
header parameters of the same names are not offered to the model). A JSON response comes back as
compact JSON, text as text; a non-2xx status, a timeout or a network failure is a ``ToolError``.

A response body is streamed and read only as far as the agent's ``limits.tool_output_chars`` can
use (four bytes a character, the most UTF-8 needs): a longer one is cut there, returned as text
(JSON cannot be compacted then), with a note saying it was cut — a huge answer costs no memory.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urljoin, urlsplit, urlunsplit

import httpx

import runner.telemetry as telemetry
from runner.agentfile.config import ToolSourceConfig
from runner.errors import ToolError
from runner.tls import tls_context
from runner.tools.base import RunContext, Tool
from runner.tools.openapi_convert import OperationPlan, ParamPlan, convert_operations, split_template
from runner.tools.openapi_spec import OpenApiDocument, load_document, openapi_error
from runner.tools.sources import LoadedSource, SourceContext

__all__ = [
    "HttpRequest",
    "OpenApiCall",
    "SharedClient",
    "Target",
    "build_request",
    "load_source",
    "read_body",
    "read_response",
    "resolve_target",
]

_ERROR_BODY_CHARS = 500
_BYTES_PER_CHAR = 4  # the most bytes one character takes in UTF-8
# Characters kept as they are in the literal parts of a path template (RFC 3986 pchar and "/").
_PATH_SAFE = "/:@!$&'()*+,;=%"
_TEXT_TYPES = ("application/xml", "application/yaml", "application/javascript", "application/x-yaml")


async def load_source(spec: ToolSourceConfig, ctx: SourceContext, stack: AsyncExitStack) -> LoadedSource:
    """Load the document of an ``openapi:`` source and make one tool per operation."""
    document = await load_document(spec, ctx)
    plans = convert_operations(document, fixed_headers=spec.headers, warn=ctx.logger.warning)
    timeout_s = spec.timeout_s if spec.timeout_s is not None else ctx.default_timeout_s
    output_chars = ctx.agent.limits.tool_output_chars
    client = SharedClient(headers=spec.headers, timeout_s=timeout_s)
    stack.push_async_callback(client.aclose)
    targets: dict[str | None, Target] = {}
    tools: list[Tool] = []
    for plan in plans:
        server = spec.base_url if spec.base_url is not None else plan.server_url
        if server not in targets:
            where = "base_url" if spec.base_url is not None else "servers[0].url"
            targets[server] = resolve_target(server, document=document, where=where)
        tools.append(
            Tool(
                name=plan.name,
                description=plan.description,
                parameters=plan.parameters,
                source_kind="openapi",
                source_id=spec.id or "openapi",
                call=OpenApiCall(plan, targets[server], client, timeout_s, output_chars=output_chars),
            )
        )
    return LoadedSource(tools)


async def unreachable(tools: list[Tool], *, timeout_s: float = 5.0) -> list[str]:
    """For ``runner tools --check``: the base URLs of these OpenAPI tools that do not answer at all
    (any HTTP status counts as an answer), each with why."""
    import httpx

    roots = sorted({t.call.target.root for t in tools if isinstance(t.call, OpenApiCall)})
    problems = []
    async with httpx.AsyncClient(timeout=timeout_s, verify=tls_context()) as client:
        for root in roots:
            try:
                await client.get(root + "/")
            except httpx.HTTPError as exc:
                problems.append(f"{root} does not answer: {str(exc) or type(exc).__name__}")
    return problems


@dataclass(frozen=True)
class Target:
    """Where the calls of an operation go: the base URL without a trailing slash, and its query."""

    root: str
    query: tuple[tuple[str, str], ...] = ()


def resolve_target(server: str | None, *, document: OpenApiDocument, where: str = "base_url") -> Target:
    """Resolve a base or server URL against the document's URL (``None``: the document's origin)."""
    absolute = urljoin(document.url, server if server is not None else "/")
    parts = urlsplit(absolute)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        shown = f"{where} {server!r}" if server is not None else "the document (it has no servers)"
        raise openapi_error(
            document.label,
            f"cannot tell where to send calls: {shown} resolves to {absolute!r}",
            hint="set `base_url:` on the source to the API's http(s) address",
        )
    root = urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), "", ""))
    return Target(root, tuple(parse_qsl(parts.query, keep_blank_values=True)))


class SharedClient:
    """The one ``httpx.AsyncClient`` of a source in a session: opened on first use, closed at the end."""

    def __init__(self, *, headers: Mapping[str, str], timeout_s: float | None) -> None:
        self._headers = dict(headers)
        self._timeout = httpx.Timeout(timeout_s if timeout_s and timeout_s > 0 else None)
        self._client: httpx.AsyncClient | None = None
        self.closed = False

    def get(self) -> httpx.AsyncClient:
        """The client, created on the first call."""
        if self.closed:
            raise ToolError("this OpenAPI tool's session has ended")
        if self._client is None:
            self._client = httpx.AsyncClient(
                headers=self._headers, timeout=self._timeout, verify=tls_context()
            )
        return self._client

    async def aclose(self) -> None:
        """Close the client (if it was ever opened); later calls are tool errors."""
        self.closed = True
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()


@dataclass(frozen=True)
class HttpRequest:
    """A request ready for httpx: the URL carries the path, ``params`` the query."""

    method: str
    url: str
    params: tuple[tuple[str, str], ...]
    headers: dict[str, str]
    content: bytes | None = None


@dataclass(frozen=True)
class OpenApiCall:
    """The callable of one operation's tool."""

    plan: OperationPlan
    target: Target
    client: SharedClient
    timeout_s: float
    output_chars: int = 0
    """The most characters a result may have (``limits.tool_output_chars``); 0: no limit."""

    async def __call__(self, arguments: dict[str, Any], ctx: RunContext) -> str:
        """Send the operation's request built from ``arguments`` and return the response as text."""
        request = build_request(self.plan, self.target, arguments)
        what = f"{request.method} {urlsplit(request.url).path}"
        limit = _BYTES_PER_CHAR * self.output_chars if self.output_chars > 0 else None
        try:
            async with self.client.get().stream(
                request.method,
                request.url,
                params=request.params,
                headers=telemetry.inject(dict(request.headers)) if telemetry.enabled() else request.headers,
                content=request.content,
            ) as response:
                body, complete = await read_body(response, limit)
        except httpx.TimeoutException:
            raise ToolError(f"{what} timed out after {self.timeout_s:g} s") from None
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise ToolError(f"{what} failed: {exc or type(exc).__name__}") from None
        return read_response(response, what, body=body, complete=complete, output_chars=self.output_chars)


def build_request(plan: OperationPlan, target: Target, arguments: Mapping[str, Any]) -> HttpRequest:
    """The HTTP request of one call; a ``ToolError`` when an argument cannot be sent safely."""
    path_values: dict[str, str] = {}
    query = list(target.query)
    headers: dict[str, str] = {}
    cookies: list[str] = []
    for param in plan.params:
        value = arguments.get(param.prop)
        if value is None:
            if param.location == "path":
                raise ToolError(f"missing path parameter {param.prop!r}")
            continue
        if param.location == "path":
            path_values[param.name] = _path_value(param, value)
        elif param.location == "query":
            query.extend(_query_pairs(param, value))
        elif param.location == "header":
            headers[param.name] = _header_value(param, value)
        else:
            cookies.append(f"{param.name}={quote(_serialize(param, value), safe='')}")
    if cookies:
        headers["Cookie"] = "; ".join(cookies)
    path = _fill_path(plan.path, path_values)
    url = target.root + path
    _check_inside(url, path, target)
    content = _body(plan, arguments, headers)
    return HttpRequest(plan.method, url, tuple(query), headers, content)


async def read_body(response: httpx.Response, limit: int | None) -> tuple[bytes, bool]:
    """A streamed body, at most ``limit`` bytes of it (None: all), and whether it was read whole."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if limit is not None and size > limit:
            return b"".join(chunks)[:limit], False
    return b"".join(chunks), True


def read_response(
    response: httpx.Response,
    what: str,
    *,
    body: bytes | None = None,
    complete: bool = True,
    output_chars: int = 0,
) -> str:
    """A 2xx response as text (JSON compacted); any other status is a ``ToolError`` with the body.

    ``body`` is what was read of a streamed response (else ``response.content``); when it is not
    ``complete``, the text is cut to ``output_chars`` with a note that says so.
    """
    content = response.content if body is None else body
    status = response.status_code
    media = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if not 200 <= status < 300:
        text = _decode(response, content).strip()
        if len(text) > _ERROR_BODY_CHARS or not complete:
            text = text[:_ERROR_BODY_CHARS] + "…"
        detail = f": {text}" if text else ""
        raise ToolError(f"{what} answered HTTP {status} {response.reason_phrase}{detail}".rstrip())
    if not content:
        return f"HTTP {status} {response.reason_phrase} (no content)"
    json_like = media == "application/json" or media.endswith("+json")
    is_text = not media or media.startswith("text/") or media in _TEXT_TYPES or media.endswith("+xml")
    if not complete:
        if not (json_like or is_text):
            return f"(binary response: {media}, more than {len(content)} bytes)"
        note = (
            f"\n[response cut: it is longer than {len(content)} bytes, and only its beginning was read "
            f"(limits.tool_output_chars is {output_chars})]"
        )
        return _decode(response, content)[: max(output_chars - len(note), 0)] + note
    if json_like or (not media and content.lstrip()[:1] in (b"{", b"[")):
        try:
            return json.dumps(json.loads(content), ensure_ascii=False, separators=(",", ":"))
        except ValueError:
            return _decode(response, content)
    if is_text:
        return _decode(response, content)
    return f"(binary response: {media}, {len(content)} bytes)"


def _decode(response: httpx.Response, content: bytes) -> str:
    return content.decode(response.encoding or "utf-8", errors="replace")


def _fill_path(template: str, values: Mapping[str, str]) -> str:
    parts: list[str] = []
    for literal, name in split_template(template):
        parts.append(quote(literal, safe=_PATH_SAFE))
        if name is not None:
            if name not in values:
                raise ToolError(f"missing path parameter {name!r}")
            parts.append(values[name])
    return "".join(parts)


def _check_inside(url: str, path: str, target: Target) -> None:
    """Refuse a URL that left the base URL's host or path (defence in depth behind the encoding)."""
    try:
        built, base = httpx.URL(url), httpx.URL(target.root)
    except httpx.InvalidURL as exc:
        raise ToolError(f"cannot build a valid URL for {path!r}: {exc}") from None
    expected = base.raw_path.rstrip(b"/") + path.encode("ascii")
    if (built.scheme, built.host, built.port) != (base.scheme, base.host, base.port) or (
        built.raw_path != expected
    ):
        raise ToolError(f"refused: the path {path!r} would leave {target.root}")


def _encode_segment(text: str) -> str:
    encoded = quote(text, safe="")
    if encoded and encoded.strip(".") == "":  # "." and ".." would be dot segments
        encoded = encoded.replace(".", "%2E")
    return encoded


def _path_value(param: ParamPlan, value: Any) -> str:
    if param.as_json:
        text = _encode_segment(json.dumps(value, ensure_ascii=False, separators=(",", ":")))
    elif isinstance(value, list):
        text = ",".join(_encode_segment(_scalar(item)) for item in value)
    elif isinstance(value, Mapping):
        pairs = [(_encode_segment(str(k)), _encode_segment(_scalar(v))) for k, v in value.items()]
        text = ",".join(f"{k}={v}" if param.explode else f"{k},{v}" for k, v in pairs)
    else:
        text = _encode_segment(_scalar(value))
    if not text:
        raise ToolError(f"path parameter {param.prop!r} must not be empty")
    if param.style == "label":
        return f".{text}"
    if param.style == "matrix":
        return f";{_encode_segment(param.name)}={text}"
    return text


def _query_pairs(param: ParamPlan, value: Any) -> list[tuple[str, str]]:
    name = param.name
    if param.as_json:
        return [(name, json.dumps(value, ensure_ascii=False, separators=(",", ":")))]
    if isinstance(value, list):
        items = [_scalar(item) for item in value]
        if param.explode and param.style == "form":
            return [(name, item) for item in items]
        separator = {"spaceDelimited": " ", "pipeDelimited": "|"}.get(param.style, ",")
        return [(name, separator.join(items))]
    if isinstance(value, Mapping):
        if param.style == "deepObject":
            return [(f"{name}[{key}]", _scalar(item)) for key, item in value.items()]
        if param.explode:
            return [(str(key), _scalar(item)) for key, item in value.items()]
        return [(name, ",".join(f"{key},{_scalar(item)}" for key, item in value.items()))]
    return [(name, _scalar(value))]


def _header_value(param: ParamPlan, value: Any) -> str:
    text = _serialize(param, value)
    if any(ch in text for ch in "\r\n\0"):
        raise ToolError(f"header parameter {param.prop!r} must not contain line breaks")
    try:
        text.encode("latin-1")
    except UnicodeEncodeError:
        raise ToolError(f"header parameter {param.prop!r} must be plain Latin-1 text") from None
    return text


def _serialize(param: ParamPlan, value: Any) -> str:
    """A header or cookie value in the simple style (lists comma-joined), or JSON for ``content``."""
    if param.as_json:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if isinstance(value, list):
        return ",".join(_scalar(item) for item in value)
    if isinstance(value, Mapping):
        pairs = [(str(key), _scalar(item)) for key, item in value.items()]
        return ",".join(f"{k}={v}" if param.explode else f"{k},{v}" for k, v in pairs)
    return _scalar(value)


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, list | dict):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return str(value)


def _body(plan: OperationPlan, arguments: Mapping[str, Any], headers: dict[str, str]) -> bytes | None:
    body = plan.body
    if body is None:
        return None
    if body.prop is not None:
        payload = arguments.get(body.prop)
        if payload is None and not body.required:
            return None
    else:
        payload = {key: arguments[prop] for prop, key in body.fields if prop in arguments}
        if not payload and not body.required:
            return None
    media = body.media_type.split(";")[0].strip().lower()
    headers["Content-Type"] = body.media_type
    if media == "application/x-www-form-urlencoded":
        if not isinstance(payload, Mapping):
            raise ToolError("the form body must be an object")
        return urlencode([(str(k), _scalar(v)) for k, v in payload.items()]).encode("ascii")
    if media.startswith("text/"):
        return _scalar(payload).encode("utf-8")
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
