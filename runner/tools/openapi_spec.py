"""OpenAPI documents: fetch or read one, cache fetched ones, parse it, check it, resolve its ``$ref`` s.

``load_document`` gives an ``OpenApiDocument``: a URL is fetched with httpx (imported on first use) and
cached on disk under ``ctx.cache_dir`` for ``ctx.openapi_cache_ttl_s`` (``ctx.refresh`` bypasses the
cache; a failed fetch falls back to a stale copy with a warning); a path is read relative to the agent
file. JSON and YAML; OpenAPI 3.0 and 3.1; Swagger 2.0 is refused with a hint on converting it. A
fetched document is streamed and refused past ``MAX_DOCUMENT_BYTES`` (the largest public APIs' are a
few MB), so that an endless or huge answer cannot exhaust memory.

``SchemaResolver`` resolves local references (``#/...``). ``deref`` follows those of non-schema objects
(parameters, request bodies, path items); ``schema`` inlines every reference of a schema with the one
inliner of ``tools/refs.py`` (the recursion placeholder and limits every tool source shares), so a
recursive model converts instead of looping. Expansions without a cut are memoized (thousands of
operations over shared components convert in linear time). An external or dangling reference, like
every other problem here, is a ``ConfigError`` that names the source.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import yaml

from runner.agentfile.validate import resolve_pointer
from runner.errors import ConfigError
from runner.tls import tls_context
from runner.tools.refs import RefInliner

if TYPE_CHECKING:
    import httpx

    from runner.agentfile.config import ToolSourceConfig
    from runner.tools.sources import SourceContext

__all__ = [
    "MAX_DOCUMENT_BYTES",
    "OpenApiDocument",
    "SchemaResolver",
    "is_url",
    "load_document",
    "openapi_error",
    "parse_document",
]

_ACCEPT = "application/json, application/yaml;q=0.9, text/yaml;q=0.9, */*;q=0.5"
MAX_DOCUMENT_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class OpenApiDocument:
    """A parsed OpenAPI 3.x document, the URL it came from (``file:`` for files) and its source label."""

    data: dict[str, Any]
    url: str
    label: str


def openapi_error(label: str, message: str, *, hint: str | None = None) -> ConfigError:
    """A ``ConfigError`` about the OpenAPI source ``label``."""
    return ConfigError(f"openapi source '{label}': {message}", hint=hint)


async def load_document(spec: ToolSourceConfig, ctx: SourceContext) -> OpenApiDocument:
    """Fetch (cached) or read the source's document and check that it is OpenAPI 3.x."""
    label = spec.label
    if is_url(spec.target):
        return OpenApiDocument(await _fetch_cached(spec, ctx), spec.target, label)
    path = spec.base_dir / spec.target
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = "file not found" if isinstance(exc, FileNotFoundError) else str(exc)
        raise openapi_error(
            label,
            f"cannot read {path}: {reason}",
            hint="give an http(s) URL or a path relative to the agent file",
        ) from None
    data = parse_document(text, label=label, where=str(path))
    return OpenApiDocument(data, path.resolve().as_uri(), label)


def parse_document(text: str, *, label: str, where: str) -> dict[str, Any]:
    """Parse JSON or YAML text and check it is an OpenAPI 3.x document (Swagger 2.0 is refused)."""
    stripped = text.lstrip("\ufeff \t\r\n")
    try:
        if stripped.startswith(("{", "[")):
            data = json.loads(stripped)
        else:
            data = yaml.load(stripped, Loader=_loader())
    except json.JSONDecodeError as exc:
        raise openapi_error(
            label, f"{where} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise openapi_error(label, f"{where} is not valid YAML{at}: {problem}") from None
    if not isinstance(data, dict):
        raise openapi_error(label, f"{where} is not an OpenAPI document (its top level is not a mapping)")
    if "swagger" in data:
        raise openapi_error(
            label,
            f"{where} is a Swagger {data.get('swagger')} document; only OpenAPI 3.0 and 3.1 are supported",
            hint="convert it first, e.g. `npx swagger2openapi spec.json -o openapi.json`",
        )
    version = data.get("openapi")
    if version is None:
        raise openapi_error(label, f"{where} is not an OpenAPI document (it has no 'openapi' field)")
    if not str(version).startswith("3."):
        raise openapi_error(label, f"{where} declares OpenAPI {version}; only 3.0 and 3.1 are supported")
    return data


def _loader() -> type[yaml.SafeLoader]:
    """A safe YAML loader that keeps dates as strings (a schema's ``example: 2024-01-01`` stays JSON)."""
    global _LOADER
    if _LOADER is None:
        base: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        loader: Any = type("_OpenApiLoader", (base,), {})
        loader.yaml_implicit_resolvers = {
            first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
            for first, resolvers in base.yaml_implicit_resolvers.items()
        }
        _LOADER = loader
    return _LOADER


_LOADER: type[yaml.SafeLoader] | None = None


def is_url(target: str) -> bool:
    """True for an http(s) URL (the document is fetched), false for a path (it is read)."""
    return urlsplit(target).scheme.lower() in ("http", "https")


class SchemaResolver:
    """Resolves local JSON pointers of one document; inlines a schema's references (``tools/refs.py``)."""

    def __init__(self, document: Mapping[str, Any], label: str) -> None:
        self.document = document
        self.label = label
        self._inliner = RefInliner(
            document, resolve=self.target, finish=_exclusive_bounds_to_numbers, memoize=True
        )

    def target(self, ref: str) -> Any:
        """The node ``ref`` points to; a ``ConfigError`` when it is external or points to nothing."""
        if not ref.startswith("#"):
            raise openapi_error(
                self.label,
                f"external $ref {ref!r} is not supported (only '#/...' references inside the document)",
                hint="bundle the document into one file first, e.g. `npx @redocly/cli bundle`",
            )
        try:
            return resolve_pointer(self.document, ref)
        except LookupError:
            raise openapi_error(self.label, f"$ref {ref!r} points to nothing in the document") from None

    def deref(self, node: Any) -> Any:
        """Follow a chain of ``$ref`` s of a non-schema object (a parameter, a request body...)."""
        seen: list[str] = []
        while isinstance(node, Mapping) and isinstance(node.get("$ref"), str):
            ref = node["$ref"]
            if ref in seen:
                raise openapi_error(self.label, f"$ref cycle: {' -> '.join([*seen, ref])}")
            seen.append(ref)
            node = self.target(ref)
        return node

    def schema(self, node: Any) -> dict[str, Any]:
        """A copy of the schema ``node`` with every reference inlined (``{}`` for a non-object)."""
        result = self._inliner.inline(node)
        return result if isinstance(result, dict) else {}


def _exclusive_bounds_to_numbers(schema: dict[str, Any]) -> None:
    """OpenAPI 3.0's boolean ``exclusiveMinimum: true`` + ``minimum: n`` -> JSON Schema's number form."""
    for exclusive, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        flag = schema.get(exclusive)
        if not isinstance(flag, bool):
            continue
        del schema[exclusive]
        if flag and isinstance(schema.get(bound), int | float):
            schema[exclusive] = schema.pop(bound)


# ---- fetching and the disk cache ----------------------------------------------------------------


async def _fetch_cached(spec: ToolSourceConfig, ctx: SourceContext) -> dict[str, Any]:
    url = spec.target
    cache_file = Path(ctx.cache_dir) / "openapi" / f"{hashlib.sha256(url.encode()).hexdigest()[:32]}.json"
    cached = None if ctx.refresh else _read_cache(cache_file, url)
    if cached is not None and time.time() - cached[0] < ctx.openapi_cache_ttl_s:
        return cached[1]
    try:
        data = parse_document(await _fetch(url, spec, ctx), label=spec.label, where=url)
    except ConfigError as exc:
        if cached is None:
            raise
        ctx.logger.warning("%s; using the copy cached %.0f s ago", exc.message, time.time() - cached[0])
        return cached[1]
    _write_cache(cache_file, url, data, ctx)
    return data


async def _fetch(url: str, spec: ToolSourceConfig, ctx: SourceContext) -> str:
    import httpx

    timeout = spec.timeout_s if spec.timeout_s is not None else ctx.default_timeout_s
    # Configured headers (credentials) go to the spec URL only when it is on the API's own origin.
    same_origin = spec.base_url is None or _origin(spec.base_url) in ("", _origin(url))
    headers = {**(spec.headers if same_origin else {}), "Accept": _ACCEPT}
    try:
        async with (
            httpx.AsyncClient(timeout=timeout, follow_redirects=True, verify=tls_context()) as client,
            client.stream("GET", url, headers=headers) as response,
        ):
            body = await _read_document(response, spec.label, url)
    except httpx.TimeoutException:
        raise openapi_error(spec.label, f"fetching {url} timed out after {timeout:g} s") from None
    except httpx.HTTPError as exc:
        raise openapi_error(
            spec.label,
            f"cannot fetch {url}: {exc or type(exc).__name__}",
            hint="is the server running, and is the URL right?",
        ) from None
    return body.decode(response.encoding or "utf-8", errors="replace")


async def _read_document(response: httpx.Response, label: str, url: str) -> bytes:
    """The body of a successful ``httpx.Response`` being streamed, up to ``MAX_DOCUMENT_BYTES``."""
    if not response.is_success:
        raise openapi_error(
            label, f"fetching {url} answered HTTP {response.status_code} {response.reason_phrase}"
        )
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > MAX_DOCUMENT_BYTES:
            raise openapi_error(
                label,
                f"the document at {url} is larger than {MAX_DOCUMENT_BYTES // (1024 * 1024)} MB",
                hint="download it, keep the operations the agent needs, and point `openapi:` at that file",
            )
        chunks.append(chunk)
    return b"".join(chunks)


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}" if parts.netloc else ""


def _read_cache(path: Path, url: str) -> tuple[float, dict[str, Any]] | None:
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(entry, dict) or entry.get("url") != url or not isinstance(entry.get("document"), dict):
        return None
    fetched_at = entry.get("fetched_at")
    return (float(fetched_at), entry["document"]) if isinstance(fetched_at, int | float) else None


def _write_cache(path: Path, url: str, data: dict[str, Any], ctx: SourceContext) -> None:
    entry = {"url": url, "fetched_at": time.time(), "document": data}
    temporary = path.with_suffix(f".{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary.write_text(json.dumps(entry, separators=(",", ":"), default=str), encoding="utf-8")
        os.replace(temporary, path)
    except OSError as exc:  # a read-only cache costs a re-fetch next time, nothing more
        ctx.logger.warning("could not cache the OpenAPI document of %s: %s", url, exc)
