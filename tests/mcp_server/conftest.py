"""Fixtures of the MCP door's tests: agent files on a scripted model, ``runner mcp`` as a subprocess
(the official client over stdio), ``runner serve`` in process on 127.0.0.1 (the client over HTTP)."""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from runner.runtime import RuntimeSettings
from runner.serve.app import create_app
from runner.serve.catalog import load_catalog
from runner.serve.reload import CatalogHolder
from runner.serve.server import server_config
from runner.tls import tls_context
from tests.serve.conftest import AgentFiles as Agents
from tests.server_thread import ServerThread

ROOT = Path(__file__).resolve().parents[2]
PEERS = ROOT / "tests" / "peers" / "node_modules"

#: The two protocol generations of the official client: the initialize handshake, and 2026-07-28.
MODES = ("legacy", "2026-07-28")

#: A tool that waits until the test lets it go (or is cancelled), leaving marks in a folder.
SLOW_TOOLS = '''
import asyncio
import pathlib

MARKS = pathlib.Path(r"{marks}")


async def slow() -> str:
    """Wait for a long time."""
    (MARKS / "started").write_text("1")
    try:
        for _ in range(3000):
            if (MARKS / "release").exists():
                return "released"
            await asyncio.sleep(0.01)
    except asyncio.CancelledError:
        (MARKS / "cancelled").write_text("1")
        raise
    return "finished"
'''

END_HOOK = """
import pathlib

MARKS = pathlib.Path(r"{marks}")


def ended(event):
    (MARKS / "session_end").write_text(event.session_id)
"""


def echo(body: dict[str, Any]) -> dict[str, Any]:
    """A scripted answer that repeats every user message so far (a resumed conversation shows)."""
    users = [m["content"] for m in body["messages"] if m["role"] == "user"]
    return {"content": "heard: " + " | ".join(str(u) for u in users)}


def tool_then_answer(tool: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A scripted model that calls ``tool`` once per turn, then answers with the tool's result."""

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        last = body["messages"][-1]
        if last["role"] == "tool":
            return {"content": f"the tool said {last['content']}"}
        return {"content": "", "tool_calls": [{"name": tool, "arguments": {}}]}

    return answer


def wait_for(condition: Callable[[], bool], *, timeout: float = 15.0, what: str = "") -> None:
    """Poll ``condition`` until it holds (bounded)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


@pytest.fixture
def agents(tmp_path: Path) -> Agents:
    root = tmp_path / "agents"
    root.mkdir()
    return Agents(root)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def marks(tmp_path: Path) -> Path:
    folder = tmp_path / "marks"
    folder.mkdir()
    return folder


def runner_env(home: Path) -> dict[str, str]:
    """The environment of a ``runner`` subprocess: this worktree first, its own home."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNNER_")}
    env.update(RUNNER_HOME=str(home), PYTHONPATH=str(ROOT), SCRIPTED_API_KEY="sk-test")
    return env


@pytest.fixture
def stdio(home: Path) -> Callable[..., Any]:
    """``stdio(paths)``: the ``StdioServerParameters`` that start ``runner mcp PATHS`` (the client
    starts the process, as a desktop client's config does)."""
    from mcp.client.stdio import StdioServerParameters

    def params(paths: Sequence[Path], *extra: str) -> StdioServerParameters:
        args = ["-m", "runner", "mcp", *extra, *(str(p) for p in paths)]
        return StdioServerParameters(command=sys.executable, args=args, env=runner_env(home), cwd=str(ROOT))

    return params


class Served:
    """``runner serve``'s app on uvicorn in a thread, on a socket bound beforehand (its port known)."""

    def __init__(self, paths: Sequence[Path], home: Path, **options: Any) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        catalog = load_catalog(list(paths))
        self.holder = CatalogHolder(list(paths), catalog)
        options.setdefault("settings", RuntimeSettings(home=home))
        origins = options.pop("allow_own_origin", False)
        if origins:
            options["allowed_origins"] = [self.url]
        self.app = create_app(self.holder, **options)
        config = server_config(self.app, log_level="warning", timeout_graceful_shutdown=1)
        self.thread = ServerThread(config, sockets=[self.sock], name="uvicorn-mcp")  # stops at once
        self.server = self.thread.server

    @property
    def mcp_url(self) -> str:
        return self.url + "/mcp"

    def runs(self) -> int:
        """How many runs the server still tracks (each leaves when its session has closed)."""
        return len(self.app.state.serve.runs)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.thread.stop()  # closes the socket too


@pytest.fixture
def serve(home: Path) -> Iterator[Callable[..., Served]]:
    """``serve(paths, **create_app_options)``: ``runner serve``'s app on 127.0.0.1 until the test ends."""
    started: list[Served] = []

    def start(paths: Sequence[Path], **options: Any) -> Served:
        served = Served(paths, home, **options)
        served.start()
        started.append(served)
        return served

    yield start
    for served in started:
        served.stop()


def http_client(url: str, *, key: str | None = None, mode: str = "auto", **options: Any) -> Any:
    """The official client on streamable HTTP (``Authorization: Bearer KEY`` with ``key``); ``options``
    go to ``Client`` (``message_handler``, ...)."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    headers = {"authorization": f"Bearer {key}"} if key is not None else {}
    http = httpx2.AsyncClient(headers=headers, timeout=60, verify=tls_context())
    transport = streamable_http_client(url, http_client=http)
    return Client(transport, mode=mode, **options)


def check_structured(tool: Any, result: Any) -> dict[str, Any]:
    """The result's structured content, checked against the tool's declared output schema."""
    import jsonschema

    assert not result.is_error, result.content
    structured = result.structured_content
    jsonschema.validate(structured, tool.output_schema)
    assert json.dumps(structured)  # plain JSON data
    return structured


def initialize_request(generation: str) -> dict[str, Any]:
    """A 2025-generation ``initialize`` as a raw client sends it (``id`` 1)."""
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": generation,
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        },
    }
