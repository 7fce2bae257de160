"""``runner/serve/server.py`` subclasses uvicorn's protocol classes: uvicorn stays in a tested range.

A uvicorn outside the range ``pyproject.toml`` declares, or one that renames what ``server.py`` relies
on, fails here by name instead of breaking ``runner serve``'s header deadline and connection cap.
"""

from __future__ import annotations

import asyncio
import tomllib
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from packaging.requirements import Requirement
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

from runner.serve.server import GuardedH11Protocol, guarded_protocol

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
# What server.py overrides or calls on uvicorn's protocols, and the attributes it reads from them.
H11_METHODS = ("connection_made", "connection_lost", "data_received", "on_response_complete")
HTTPTOOLS_METHODS = (*H11_METHODS, "on_headers_complete")
ATTRIBUTES = ("app", "connections", "loop", "transport")


def _uvicorn_requirements() -> list[Requirement]:
    project = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]
    declared = [*project.get("dependencies", [])]
    for extra in project.get("optional-dependencies", {}).values():
        declared.extend(extra)
    return [req for req in map(Requirement, declared) if req.name == "uvicorn"]


def test_every_uvicorn_requirement_has_an_upper_bound_and_the_same_range() -> None:
    requirements = _uvicorn_requirements()
    assert requirements, "pyproject.toml no longer names uvicorn"
    for requirement in requirements:
        operators = {spec.operator for spec in requirement.specifier}
        assert "<" in operators, f"{requirement} has no upper bound (server.py subclasses uvicorn internals)"
        assert ">=" in operators, f"{requirement} has no lower bound"
    assert len({str(req.specifier) for req in requirements}) == 1, "uvicorn is declared with two ranges"


def test_the_installed_uvicorn_is_inside_the_declared_range() -> None:
    installed = metadata.version("uvicorn")
    for requirement in _uvicorn_requirements():
        assert requirement.specifier.contains(installed, prereleases=True), (
            f"uvicorn {installed} is installed, outside {requirement}: run tests/serve against it and "
            "move the range in pyproject.toml (and docs/decisions.md)"
        )


def _protocol(cls: type[Any]) -> Any:
    async def app(scope: Any, receive: Any, send: Any) -> None:  # pragma: no cover - never called
        raise AssertionError

    config = uvicorn.Config(app)
    config.load()
    return cls(config=config, server_state=ServerState(), app_state={}, _loop=asyncio.new_event_loop())


def _check(protocol: Any, methods: tuple[str, ...]) -> None:
    name = type(protocol).__name__
    for method in methods:
        assert callable(getattr(type(protocol), method, None)), f"uvicorn lost {name}.{method}"
    for attribute in ATTRIBUTES:
        assert hasattr(protocol, attribute), f"uvicorn's protocol no longer sets .{attribute}"
    protocol.loop.close()


def test_the_h11_internals_server_py_relies_on_exist() -> None:
    protocol = _protocol(H11Protocol)
    assert hasattr(protocol, "conn") and hasattr(protocol.conn, "their_state")  # read by _awaiting_headers
    _check(protocol, H11_METHODS)
    assert issubclass(GuardedH11Protocol, H11Protocol)


def test_the_httptools_internals_server_py_relies_on_exist() -> None:
    pytest.importorskip("httptools", reason="httptools is optional; without it server.py uses h11 only")
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    _check(_protocol(HttpToolsProtocol), HTTPTOOLS_METHODS)
    guarded = guarded_protocol(header_timeout_s=1.0, max_connections=1)
    assert issubclass(guarded, HttpToolsProtocol)


def test_uvicorn_accepts_the_guarded_protocol_class_as_http() -> None:
    guarded = guarded_protocol(header_timeout_s=1.0, max_connections=1)
    config = uvicorn.Config(lambda scope, receive, send: None, http=guarded)
    config.load()
    assert config.http_protocol_class is guarded
