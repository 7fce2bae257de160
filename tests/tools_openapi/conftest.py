"""Fixtures for OpenAPI sources: a source context, source specs, documents on disk, the example server."""

from __future__ import annotations

import importlib.util
import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

import pytest
import uvicorn
import yaml

from runner.agentfile.config import AgentConfig, ToolSourceConfig
from runner.tools.sources import SourceContext

ROOT = Path(__file__).resolve().parents[2]
SPECS = Path(__file__).resolve().parent / "specs"


def _load_example_server() -> ModuleType:
    spec = importlib.util.spec_from_file_location("petstore_server", ROOT / "examples" / "petstore_server.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


petstore_server = _load_example_server()


class MakeSource(Protocol):
    def __call__(self, target: str, **fields: Any) -> ToolSourceConfig: ...


class WriteDoc(Protocol):
    def __call__(self, document: dict[str, Any] | str, name: str = "openapi.yaml") -> str: ...


@pytest.fixture
def source_ctx(tmp_path: Path) -> SourceContext:
    """A source context with its own cache directory and a 10 s default timeout."""
    return SourceContext(
        agent=AgentConfig(name="tester", path=tmp_path / "agent.yaml"),
        cache_dir=tmp_path / "cache",
        default_timeout_s=10.0,
        logger=logging.getLogger("tests.openapi"),
    )


@pytest.fixture
def make_source(tmp_path: Path) -> MakeSource:
    """Build an ``openapi:`` source spec whose relative paths resolve in ``tmp_path``."""

    def make(target: str, **fields: Any) -> ToolSourceConfig:
        fields.setdefault("base_dir", tmp_path)
        return ToolSourceConfig(kind="openapi", target=target, **fields)

    return make


@pytest.fixture
def write_doc(tmp_path: Path) -> WriteDoc:
    """Write a document (a dict as YAML or JSON by the file's suffix, or raw text); returns its name."""

    def write(document: dict[str, Any] | str, name: str = "openapi.yaml") -> str:
        if isinstance(document, str):
            text = document
        elif name.endswith(".json"):
            text = json.dumps(document)
        else:
            text = yaml.safe_dump(document, sort_keys=False)
        (tmp_path / name).write_text(text, encoding="utf-8")
        return name

    return write


def closed_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@dataclass
class RunningServer:
    """The example pet shop served by uvicorn in a thread."""

    url: str
    app: Any

    @property
    def shop(self) -> Any:
        return self.app.state.shop

    @property
    def document_url(self) -> str:
        return f"{self.url}/openapi.json"


@pytest.fixture(scope="module")
def _running_petstore() -> Iterator[RunningServer]:
    app = petstore_server.create_app()
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="petstore-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:  # an observable state, polled with a bound
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the example petstore server did not start within 15 s")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield RunningServer(f"http://127.0.0.1:{port}", app)
    finally:
        server.should_exit = True
        thread.join(timeout=15)


@pytest.fixture
def petstore(_running_petstore: RunningServer) -> RunningServer:
    """The running example server, with a fresh shop for each test."""
    _running_petstore.app.state.shop = petstore_server.Shop()
    return _running_petstore
