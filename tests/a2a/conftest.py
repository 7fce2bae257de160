"""Fixtures of the A2A tests: agents on a scripted model, ``runner serve`` on uvicorn (127.0.0.1, a
free port), and the ``a2a-sdk`` client made from the card the server gives."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from runner.runtime import RuntimeSettings
from runner.serve.app import create_app
from runner.serve.catalog import load_catalog
from runner.serve.reload import CatalogHolder
from runner.serve.server import server_config
from runner.testing import ScriptedServer
from runner.tls import tls_context
from tests.serve.conftest import AgentFiles as Agents
from tests.server_thread import ServerThread


class Served:
    """An ASGI app on uvicorn in a background thread (``tests/server_thread.py``: it stops at once)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        config = server_config(
            app, host="127.0.0.1", port=0, log_level="warning", timeout_graceful_shutdown=1
        )
        self.thread = ServerThread(config, name="uvicorn-a2a")
        self.server = self.thread.server
        self.url = ""

    def start(self) -> Served:
        self.url = self.thread.start()
        return self

    def stop(self) -> None:
        self.thread.stop()

    def agent_url(self, name: str) -> str:
        return f"{self.url}/a2a/{name}"


@pytest.fixture
def agents(tmp_path: Path) -> Agents:
    root = tmp_path / "agents"
    root.mkdir()
    return Agents(root, description="the {name} agent, for tests")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def serve(home: Path) -> Iterator[Callable[..., Served]]:
    """``serve(paths, **create_app_options)``: ``runner serve``'s app on uvicorn until the test ends."""
    started: list[Served] = []

    def start(paths: Sequence[Path], **options: Any) -> Served:
        holder = CatalogHolder(list(paths), load_catalog(list(paths)))
        options.setdefault("settings", RuntimeSettings(home=home))
        served = Served(create_app(holder, **options)).start()
        started.append(served)
        return served

    yield start
    for served in started:
        served.stop()


@pytest.fixture
def scripted(scripted_server: Callable[..., ScriptedServer]) -> Callable[..., ScriptedServer]:
    return scripted_server


async def sdk_client(
    url: str,
    *,
    bindings: Sequence[str] = ("JSONRPC",),
    version: str = "1.0",
    streaming: bool = True,
    key: str | None = None,
) -> Any:
    """The ``a2a-sdk`` client of the agent at ``url``, on the card's interface of ``bindings`` and
    protocol ``version`` (the card is fetched from the server and narrowed to that interface)."""
    from a2a.client import A2ACardResolver, ClientConfig, ClientFactory

    headers = {"authorization": f"Bearer {key}"} if key else {}
    http = httpx.AsyncClient(timeout=30, headers=headers, verify=tls_context())
    card = await A2ACardResolver(http, url).get_agent_card()
    keep = [
        i
        for i in card.supported_interfaces
        if i.protocol_binding in bindings and i.protocol_version == version
    ]
    assert keep, f"the card has no {bindings} interface at {version}: {card.supported_interfaces}"
    del card.supported_interfaces[:]
    card.supported_interfaces.extend(keep)
    config = ClientConfig(streaming=streaming, httpx_client=http, supported_protocol_bindings=list(bindings))
    return ClientFactory(config).create(card)
