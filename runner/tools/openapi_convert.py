"""OpenAPI operations as tools: one ``OperationPlan`` per operation of a document.

A plan holds what the model sees (name, description, parameter schema) and how each argument travels:
path, query, header and cookie parameters (path-level and operation-level merged, the operation winning
on the same name and location), and the request body (JSON, form or text). An object body's properties
are merged into the parameters when no name clashes; otherwise the body is one ``body`` property.
Names come from ``operationId`` (sanitized), else from the method and path (``get_pets_petId``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from runner.tools.openapi_spec import OpenApiDocument, SchemaResolver, openapi_error
from runner.tools.registry import fit_name_length, sanitize_name
from runner.tools.schema import clean_schema

__all__ = ["BodyPlan", "Location", "OperationPlan", "ParamPlan", "convert_operations", "split_template"]

Location = Literal["path", "query", "header", "cookie"]
_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
_LOCATIONS: tuple[Location, ...] = ("path", "query", "header", "cookie")
# OpenAPI: header parameters with these names SHALL be ignored (the client sets them).
_IGNORED_HEADERS = frozenset({"accept", "content-type", "authorization"})
_TEMPLATE = re.compile(r"\{([^{}]+)\}")
_PROPERTY_CHARS = re.compile(r"[^a-zA-Z0-9_.-]")
_SLUG_CHARS = re.compile(r"[^a-zA-Z0-9_-]+")
_MAX_DESCRIPTION = 1024


@dataclass(frozen=True)
class ParamPlan:
    """How one argument is sent: its schema property, its name on the wire, where and in which style."""

    prop: str
    name: str
    location: Location
    style: str
    explode: bool
    as_json: bool = False


@dataclass(frozen=True)
class BodyPlan:
    """How the request body is built: one ``prop`` argument, or the merged ``fields`` (property, key)."""

    media_type: str
    required: bool
    prop: str | None = None
    fields: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class OperationPlan:
    """One operation as a tool: name, description, parameter schema, and how to build its request."""

    name: str
    method: str
    path: str
    description: str
    parameters: dict[str, Any]
    params: tuple[ParamPlan, ...]
    body: BodyPlan | None
    server_url: str | None


def convert_operations(
    document: OpenApiDocument,
    *,
    fixed_headers: Iterable[str] = (),
    warn: Callable[[str], None] | None = None,
) -> list[OperationPlan]:
    """Plan one tool per operation, in document order; ``warn`` hears about skipped operations.

    Header parameters named in ``fixed_headers`` (the source's configured headers) are left out.
    """
    label = document.label
    ignored = _IGNORED_HEADERS | {name.lower() for name in fixed_headers}
    resolver = SchemaResolver(document.data, label)
    paths = document.data.get("paths") or {}
    if not isinstance(paths, Mapping):
        raise openapi_error(label, "'paths' is not a mapping")
    root_server = _server_url(document.data.get("servers"))
    plans: list[OperationPlan] = []
    taken: set[str] = set()
    for path, raw_item in paths.items():
        item = resolver.deref(raw_item)
        if not isinstance(item, Mapping):
            raise openapi_error(label, f"paths[{path!r}] is not a mapping")
        shared = _list(item.get("parameters"))
        path_server = _server_url(item.get("servers")) or root_server
        for method in _METHODS:
            operation = item.get(method)
            if operation is None:
                continue
            if not isinstance(operation, Mapping):
                raise openapi_error(label, f"paths[{path!r}].{method} is not a mapping")
            plan = _plan(resolver, str(path), method, operation, shared, taken, path_server, ignored)
            if plan is None:
                if warn is not None:
                    warn(
                        f"openapi source '{label}': {method.upper()} {path} skipped (its request body "
                        "has no JSON, form or text media type)"
                    )
                continue
            taken.add(plan.name)
            plans.append(plan)
    if not plans:
        raise openapi_error(label, "the document defines no operations")
    return plans


def _plan(
    resolver: SchemaResolver,
    path: str,
    method: str,
    operation: Mapping[str, Any],
    shared: list[Any],
    taken: set[str],
    server_url: str | None,
    ignored_headers: frozenset[str],
) -> OperationPlan | None:
    merged: dict[tuple[str, str], Mapping[str, Any]] = {}
    for raw in [*shared, *_list(operation.get("parameters"))]:  # the operation's win on name + in
        param = resolver.deref(raw)
        if isinstance(param, Mapping) and isinstance(param.get("name"), str):
            merged[(param["name"], str(param.get("in")))] = param
    props: dict[str, Any] = {}
    required: list[str] = []
    bindings: list[ParamPlan] = []
    for (name, location), param in merged.items():
        if (
            location not in _LOCATIONS
            or not name
            or (location == "header" and name.lower() in ignored_headers)
        ):
            continue
        schema, as_json = _param_schema(resolver, param)
        prop = _free_name(_PROPERTY_CHARS.sub("_", name)[:64] or "param", props, location)
        props[prop] = schema
        if param.get("required") or location == "path":
            required.append(prop)
        default_style = "form" if location in ("query", "cookie") else "simple"
        style = str(param.get("style") or default_style)
        explode = bool(param.get("explode", style == "form"))
        bindings.append(ParamPlan(prop, name, location, style, explode, as_json))
    bound = {b.name for b in bindings if b.location == "path"}
    for name in _TEMPLATE.findall(path):
        if name not in bound:  # a template variable nobody declared is still required
            prop = _free_name(_PROPERTY_CHARS.sub("_", name)[:64] or "param", props, "path")
            props[prop] = {"type": "string"}
            required.append(prop)
            bindings.append(ParamPlan(prop, name, "path", "simple", False))
    body = _body_plan(resolver, operation.get("requestBody"), props, required)
    if body is False:
        return None
    parameters = clean_schema({"type": "object", "properties": props, "required": required})
    return OperationPlan(
        name=_unique(_tool_name(operation.get("operationId"), method, path), taken),
        method=method.upper(),
        path=path if path.startswith("/") else f"/{path}",
        description=_description(operation, method, path),
        parameters=parameters,
        params=tuple(bindings),
        body=body or None,
        server_url=_server_url(operation.get("servers")) or server_url,
    )


def split_template(path: str) -> list[tuple[str, str | None]]:
    """``/pets/{id}/tags`` -> ``[("/pets/", "id"), ("/tags", None)]``: literals and variable names."""
    parts: list[tuple[str, str | None]] = []
    last = 0
    for match in _TEMPLATE.finditer(path):
        parts.append((path[last : match.start()], match.group(1)))
        last = match.end()
    parts.append((path[last:], None))
    return parts


def _param_schema(resolver: SchemaResolver, param: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
    as_json = False
    raw = param.get("schema")
    if raw is None and isinstance(param.get("content"), Mapping) and param["content"]:
        media = next(iter(param["content"].values()))  # `content` parameters are serialized as JSON
        raw, as_json = (media.get("schema") if isinstance(media, Mapping) else None), True
    schema = resolver.schema(raw if raw is not None else {"type": "string"})
    description = param.get("description")
    if isinstance(description, str) and description.strip() and "description" not in schema:
        schema = {**schema, "description": description.strip()}
    if param.get("deprecated") and "deprecated" not in schema:
        schema = {**schema, "deprecated": True}
    return schema, as_json


def _body_plan(
    resolver: SchemaResolver, raw: Any, props: dict[str, Any], required: list[str]
) -> BodyPlan | Literal[False] | None:
    """Add the request body to ``props``; ``False`` when no media type can be sent."""
    if raw is None:
        return None
    body = resolver.deref(raw)
    content = body.get("content") if isinstance(body, Mapping) else None
    if not isinstance(content, Mapping) or not content:
        return None
    media = _pick_media(content)
    is_required = bool(body.get("required"))
    if media is None:
        return False if is_required else None
    entry = content[media]
    schema = resolver.schema(entry.get("schema") if isinstance(entry, Mapping) else None)
    if media.startswith("text/") and not schema:
        schema = {"type": "string"}
    fields = None if media.startswith("text/") else _object_fields(schema)
    if fields is not None:
        renamed = {_PROPERTY_CHARS.sub("_", key)[:64] or "field": key for key in fields[0]}
        if len(renamed) == len(fields[0]) and not set(renamed) & set(props):
            for prop, key in renamed.items():
                props[prop] = fields[0][key]
            if is_required:
                required.extend(prop for prop, key in renamed.items() if key in fields[1])
            return BodyPlan(media, is_required, fields=tuple(renamed.items()))
    description = body.get("description")
    if isinstance(description, str) and description.strip() and "description" not in schema:
        schema = {**schema, "description": description.strip()}
    prop = _free_name("body", props, "request")
    props[prop] = schema
    if is_required:
        required.append(prop)
    return BodyPlan(media, is_required, prop=prop)


def _pick_media(content: Mapping[str, Any]) -> str | None:
    types = [str(t).lower() for t in content]
    for wanted in _MEDIA_PREFERENCE:
        for original, lowered in zip(content, types, strict=True):
            if wanted(lowered):
                return str(original)
    return None


_MEDIA_PREFERENCE: tuple[Callable[[str], bool], ...] = (
    lambda t: t.split(";")[0] == "application/json",
    lambda t: t.split(";")[0].endswith(("/json", "+json")),
    lambda t: t.split(";")[0] == "application/x-www-form-urlencoded",
    lambda t: t.startswith("text/"),
)


def _object_fields(schema: Mapping[str, Any]) -> tuple[dict[str, Any], set[str]] | None:
    """The properties and required names of a plain object schema (``allOf`` flattened), else None."""
    members = [schema]
    if isinstance(schema.get("allOf"), list):
        members = [{k: v for k, v in schema.items() if k != "allOf"}, *schema["allOf"]]
    properties: dict[str, Any] = {}
    names: set[str] = set()
    for member in members:
        if not isinstance(member, Mapping) or member.get("type", "object") != "object":
            return None
        if any(key in member for key in ("anyOf", "oneOf", "allOf", "not", "if")):
            return None
        props = member.get("properties")
        if isinstance(props, Mapping):
            properties.update(
                (k, v) for k, v in props.items() if not (isinstance(v, Mapping) and v.get("readOnly"))
            )
        if isinstance(member.get("required"), list):
            names.update(str(name) for name in member["required"])
    return (properties, names) if properties else None


def _tool_name(operation_id: Any, method: str, path: str) -> str:
    if isinstance(operation_id, str) and operation_id.strip():
        name = sanitize_name(operation_id.strip())
    else:
        name = _SLUG_CHARS.sub("_", f"{method} {path}").strip("_") or method
    return fit_name_length(name)


def _unique(name: str, taken: set[str]) -> str:
    number = 2
    candidate = name
    while candidate in taken:
        suffix = f"_{number}"
        candidate = f"{name[: 64 - len(suffix)]}{suffix}"
        number += 1
    return candidate


def _free_name(name: str, props: Mapping[str, Any], location: str) -> str:
    """``name``, else ``<location>_<name>``, else numbered: property names stay unique."""
    if name not in props:
        return name
    candidate = f"{location}_{name}"[:64]
    number = 2
    while candidate in props:
        candidate = f"{location}_{name}"[:60] + f"_{number}"
        number += 1
    return candidate


def _description(operation: Mapping[str, Any], method: str, path: str) -> str:
    parts = [str(operation.get(key) or "").strip() for key in ("summary", "description")]
    summary, details = parts
    if summary and details.startswith(summary):
        summary = ""
    text = "\n\n".join(part for part in (summary, details) if part) or f"{method.upper()} {path}"
    if operation.get("deprecated"):
        text = f"(deprecated) {text}"
    return text if len(text) <= _MAX_DESCRIPTION else text[: _MAX_DESCRIPTION - 1].rstrip() + "…"


def _server_url(servers: Any) -> str | None:
    """``servers[0].url`` with its variables replaced by their defaults."""
    if not isinstance(servers, list) or not servers or not isinstance(servers[0], Mapping):
        return None
    server = servers[0]
    url = server.get("url")
    if not isinstance(url, str):
        return None
    found = server.get("variables")
    variables: Mapping[str, Any] = found if isinstance(found, Mapping) else {}

    def default(match: re.Match[str]) -> str:
        variable = variables.get(match.group(1))
        return str(variable.get("default", "")) if isinstance(variable, Mapping) else match.group(0)

    return _TEMPLATE.sub(default, url)


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
