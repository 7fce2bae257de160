"""The runner's pytest plugin (entry point ``pytest11: runner_testing``): fixtures for agent tests.

Installed with the runner, it adds fixtures a test asks for by name, and nothing runs in a test
that does not ask (no autouse fixture):

- ``scripted_model(script)``: a ``ScriptedModel`` (answers in process, records requests).
- ``scripted_server(script, **options)``: a ``ScriptedServer`` on 127.0.0.1, closed after the test.
- ``run_agent_sync(path, *prompts, script=..., server=..., ...)``: ``runner.testing.run_agent_sync``,
  with transcripts under the test's temporary folder.
- ``run_agent``: the same, async like ``runner.testing.run_agent`` (``await run_agent(...)``); a call
  never awaited fails the test (the fixture was sync before).
- The no-network guard: a test marked ``@pytest.mark.no_network``, or every test of a suite whose
  configuration sets the ini option ``runner_no_network = true`` (the runner's own suite does), or one
  that asks for the ``no_network`` fixture, fails as soon as anything connects (``connect``,
  ``connect_ex``) or sends (``sendto``, ``sendmsg``) to a host other than loopback, from its setup to
  its teardown. The methods are patched on ``socket.socket`` itself, so sockets made before the test
  are guarded too, and everything built on them (``socket.create_connection``, asyncio, httpx).
"""

from __future__ import annotations

import inspect
import ipaddress
import socket
from collections.abc import Callable, Coroutine, Generator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from runner.testing.model import ScriptedModel
from runner.testing.server import ScriptedServer

__all__ = [
    "MARKER",
    "no_network",
    "pytest_addoption",
    "pytest_configure",
    "pytest_runtest_call",
    "pytest_runtest_setup",
    "pytest_runtest_teardown",
    "run_agent",
    "run_agent_sync",
    "scripted_model",
    "scripted_server",
]

#: The marker that turns the no-network guard on for one test (or a module, with ``pytestmark``).
MARKER = "no_network"
_INI = "runner_no_network"
_NETWORK_FAMILIES = (socket.AF_INET, socket.AF_INET6)


# --- the no-network guard ------------------------------------------------------------------------


def _is_local(family: int, address: Any) -> bool:
    """Whether ``address`` (of a socket of ``family``) is on this machine: loopback or not IP at all."""
    if family not in _NETWORK_FAMILIES or not isinstance(address, tuple) or not address:
        return True  # AF_UNIX paths, socketpair and other local families
    host = address[0]
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    host = str(host)
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False  # a host name: refused before any lookup


def _refuse(sock: socket.socket, address: Any) -> None:
    if not _is_local(sock.family, address):
        raise AssertionError(
            f"a test tried to reach {address!r}: only loopback (127.0.0.1, ::1, localhost) and Unix "
            "sockets are allowed (runner's no-network guard)"
        )


class _Guard:
    """The patched ``socket.socket`` methods, installed while at least one holder needs them."""

    def __init__(self) -> None:
        self.holders = 0
        self.saved: dict[str, Any] = {}

    def acquire(self) -> None:
        self.holders += 1
        if self.holders > 1:
            return
        cls = socket.socket
        names = [name for name in ("connect", "connect_ex", "sendto", "sendmsg") if hasattr(cls, name)]
        self.saved = {name: vars(cls).get(name) for name in names}  # None: inherited from _socket
        real = {name: getattr(cls, name) for name in names}

        def connect(sock: socket.socket, address: Any) -> None:
            _refuse(sock, address)
            return real["connect"](sock, address)

        def connect_ex(sock: socket.socket, address: Any) -> int:
            _refuse(sock, address)
            return real["connect_ex"](sock, address)

        def sendto(sock: socket.socket, *args: Any) -> int:
            if len(args) > 1:  # sendto(data, address) or sendto(data, flags, address)
                _refuse(sock, args[-1])
            return real["sendto"](sock, *args)

        def sendmsg(sock: socket.socket, *args: Any) -> int:
            if len(args) > 3:  # sendmsg(buffers, ancdata, flags, address)
                _refuse(sock, args[3])
            return real["sendmsg"](sock, *args)

        for function in (connect, connect_ex, sendto, sendmsg):
            if function.__name__ in real:  # no sendmsg on Windows
                setattr(cls, function.__name__, function)

    def release(self) -> None:
        self.holders -= 1
        if self.holders:
            return
        for name, before in self.saved.items():
            if before is None:
                delattr(socket.socket, name)  # back to the method socket.socket inherits
            else:
                setattr(socket.socket, name, before)


_GUARD = _Guard()


@contextmanager
def _guarded(item: pytest.Item) -> Iterator[None]:
    on = item.get_closest_marker(MARKER) is not None or bool(item.config.getini(_INI))
    if on:
        _GUARD.acquire()
    try:
        yield
    finally:
        if on:
            _GUARD.release()


def pytest_addoption(parser: pytest.Parser) -> None:
    """The ``runner_no_network`` ini option."""
    parser.addini(
        _INI,
        "fail every test that connects to anything but loopback (runner's no-network guard)",
        type="bool",
        default=False,
    )


def pytest_configure(config: pytest.Config) -> None:
    """Register the ``no_network`` marker (so ``--strict-markers`` accepts it)."""
    config.addinivalue_line(
        "markers", f"{MARKER}: fail the test if it connects to anything but loopback (runner's guard)"
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    """The guard, while the fixtures of a guarded test are set up."""
    with _guarded(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    """The guard, while a guarded test runs."""
    with _guarded(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, None, None]:
    """The guard, while the fixtures of a guarded test are torn down."""
    with _guarded(item):
        return (yield)


@pytest.fixture
def no_network() -> Iterator[None]:
    """Fail the test if it opens a connection to something other than loopback (as the marker does)."""
    _GUARD.acquire()
    try:
        yield
    finally:
        _GUARD.release()


# --- fixtures -----------------------------------------------------------------------------------


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


def _in_tmp(tmp_path: Path, kwargs: dict[str, Any]) -> dict[str, Any]:
    from runner.runtime.settings import RuntimeSettings

    kwargs.setdefault("settings", RuntimeSettings(home=tmp_path / ".runner", write_transcript=False))
    return kwargs


@pytest.fixture
def run_agent_sync(tmp_path: Path) -> Callable[..., Any]:
    """``run_agent_sync(path, *prompts, script=..., server=..., ...)``: one scripted run (``ScriptedRun``)."""
    from runner.testing.run import run_agent_sync as run

    def run_sync(agent: Any, *prompts: str, **kwargs: Any) -> Any:
        return run(agent, *prompts, **_in_tmp(tmp_path, kwargs))

    return run_sync


@pytest.fixture
def run_agent(tmp_path: Path) -> Iterator[Callable[..., Coroutine[Any, Any, Any]]]:
    """``await run_agent(path, *prompts, script=..., server=..., ...)``: one scripted run, async."""
    from runner.testing.run import run_agent as run

    calls: list[Coroutine[Any, Any, Any]] = []

    def run_async(agent: Any, *prompts: str, **kwargs: Any) -> Coroutine[Any, Any, Any]:
        call = run(agent, *prompts, **_in_tmp(tmp_path, kwargs))
        calls.append(call)
        return call

    yield run_async
    forgotten = [call for call in calls if inspect.getcoroutinestate(call) == inspect.CORO_CREATED]
    for call in forgotten:
        call.close()
    if forgotten:
        pytest.fail(
            "run_agent(...) was never awaited: the run_agent fixture is async (await run_agent(...) in an "
            "async test); the run_agent_sync fixture runs an agent from a sync test"
        )
