"""The runner's pytest plugin (entry point ``pytest11: runner_testing``): fixtures for agent tests.

Installed with the runner, it gives every test suite:

- ``scripted_model(script)``: a ``ScriptedModel`` (answers in process, records requests).
- ``scripted_server(script, **options)``: a ``ScriptedServer`` on 127.0.0.1, closed after the test.
- ``run_agent(path, *prompts, script=..., server=..., ...)``: ``runner.testing.run_agent_sync``,
  with transcripts under the test's temporary folder.
- ``no_network``: fails the test if anything connects to a host other than loopback. With the ini
  option ``runner_no_network = true`` it applies to every test of the suite (the runner's own suite
  sets it), so an agent test can never reach a real provider by accident.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from runner.testing.model import ScriptedModel
from runner.testing.server import ScriptedServer

__all__ = ["no_network", "pytest_addoption", "run_agent", "scripted_model", "scripted_server"]

_real_connect = socket.socket.connect


def _is_local(address: Any) -> bool:
    if not isinstance(address, tuple):  # AF_UNIX paths
        return True
    host = str(address[0])
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


def _guarded_connect(self: socket.socket, address: Any) -> Any:
    if not _is_local(address):
        raise AssertionError(f"a test tried to reach {address!r}: only 127.0.0.1 is allowed")
    return _real_connect(self, address)


def pytest_addoption(parser: pytest.Parser) -> None:
    """The ``runner_no_network`` ini option."""
    parser.addini(
        "runner_no_network",
        "fail every test that connects to anything but loopback (runner's no-network guard)",
        type="bool",
        default=False,
    )


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fail the test if it opens a connection to something other than loopback."""
    monkeypatch.setattr(socket.socket, "connect", _guarded_connect)
    yield


@pytest.fixture(autouse=True)
def _runner_no_network(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    if request.config.getini("runner_no_network"):
        monkeypatch.setattr(socket.socket, "connect", _guarded_connect)
    yield


@pytest.fixture
def scripted_model() -> Callable[..., ScriptedModel]:
    """``scripted_model(script, **options)``: a new ``ScriptedModel``."""
    return ScriptedModel


@pytest.fixture
def scripted_server() -> Iterator[Callable[..., ScriptedServer]]:
    """``scripted_server(script, **options)``: a ``ScriptedServer`` on loopback, closed after the test."""
    started: list[ScriptedServer] = []

    def start(script: Any, **options: Any) -> ScriptedServer:
        server = ScriptedServer(script, **options)
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()


@pytest.fixture
def run_agent(tmp_path: Path) -> Callable[..., Any]:
    """``run_agent(path, *prompts, script=..., server=..., ...)``: one scripted run (``ScriptedRun``)."""
    from runner.runtime.settings import RuntimeSettings
    from runner.testing.run import run_agent_sync

    def run(agent: Any, *prompts: str, **kwargs: Any) -> Any:
        kwargs.setdefault("settings", RuntimeSettings(home=tmp_path / ".runner", write_transcript=False))
        return run_agent_sync(agent, *prompts, **kwargs)

    return run
