"""Slow and greedy clients: headers that never end, bodies that never end, too many connections.

Raw sockets on 127.0.0.1 play the client. The limits are set low (``serve_app(server=...)``,
``body_timeout_s``); every wait is bounded, and what is asserted is what the server did (closed
the connection, answered 408 or 503), never how fast.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from runner.serve import server as server_module

#: How long a test waits for the server to act on a limit of a fraction of a second.
PATIENCE_S = 15.0


@pytest.fixture(autouse=True, params=["httptools", "h11"])
def protocol(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every limit holds on both of uvicorn's HTTP protocols (httptools when installed, else h11)."""
    if request.param == "h11":
        monkeypatch.setattr(server_module, "_httptools_protocol", lambda: None)
    return str(request.param)


@pytest.fixture
def model(scripted: Callable[..., Any]) -> Any:
    return scripted([{"content": "hello"}], repeat=True)


def port_of(served: Any) -> int:
    return int(served.url.rsplit(":", 1)[1])


@contextmanager
def connection(served: Any) -> Iterator[socket.socket]:
    sock = socket.create_connection(("127.0.0.1", port_of(served)), timeout=PATIENCE_S)
    try:
        yield sock
    finally:
        sock.close()


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (a socket timeout fails the test)."""
    data = bytearray()
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return bytes(data)
        except TimeoutError:
            pytest.fail(f"the server kept the connection open for {PATIENCE_S} s; got {bytes(data)[:200]!r}")
        if not chunk:
            return bytes(data)
        data += chunk


def status_of(response: bytes) -> int:
    return int(response.split(b" ", 2)[1])


def body_of(response: bytes) -> Any:
    return json.loads(response.split(b"\r\n\r\n", 1)[1])


def test_a_connection_that_never_finishes_its_headers_is_closed(
    model: Any, agent_files: Any, serve_app: Callable[..., Any]
) -> None:
    agent_files.write("hello", model)
    served = serve_app([agent_files.root], server={"header_timeout_s": 0.5})
    with connection(served) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Ty")
        assert read_until_closed(sock) == b""
    with connection(served) as idle:  # a connection that sends nothing at all
        assert read_until_closed(idle) == b""
    with served.http() as http:
        assert http.get("/health").status_code == 200


def test_headers_sent_a_byte_at_a_time_do_not_keep_the_connection(
    model: Any, agent_files: Any, serve_app: Callable[..., Any]
) -> None:
    agent_files.write("hello", model)
    served = serve_app([agent_files.root], server={"header_timeout_s": 0.5})
    request = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n" + b"X-Pad: " + b"a" * 200
    with connection(served) as sock:
        deadline = time.monotonic() + PATIENCE_S
        closed = False
        for byte in request:
            try:
                sock.sendall(bytes([byte]))
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            time.sleep(0.05)  # a trickle: each byte would reset an idle timer
            assert time.monotonic() < deadline
        if not closed:  # every byte went into the socket buffer: the server must still hang up
            assert read_until_closed(sock) == b""
    # the slowest legitimate client still gets its answer: the whole request at once
    with connection(served) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        assert status_of(read_until_closed(sock)) == 200


def test_the_next_request_on_a_kept_alive_connection_has_its_own_deadline(
    model: Any, agent_files: Any, serve_app: Callable[..., Any]
) -> None:
    agent_files.write("hello", model)
    served = serve_app([agent_files.root], server={"header_timeout_s": 0.5})
    with connection(served) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        first = sock.recv(65536)
        assert status_of(first) == 200
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.")
        assert read_until_closed(sock) == b""


@pytest.mark.parametrize("keys", [[], ["k1"]], ids=["loopback", "with-keys"])
def test_a_body_that_never_finishes_is_408_and_closed(
    model: Any, agent_files: Any, serve_app: Callable[..., Any], keys: list[str]
) -> None:
    agent_files.write("hello", model)
    served = serve_app([agent_files.root], api_keys=keys, body_timeout_s=0.5)
    head = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Authorization: Bearer k1\r\nContent-Length: 100000\r\n\r\n"
    )
    with connection(served) as sock:
        sock.sendall(head + b'{"model": "hello", "messages": [')
        response = read_until_closed(sock)
    assert status_of(response) == 408, response[:300]
    error = body_of(response)["error"]
    assert error["code"] == "request_timeout" and "RUNNER_SERVE_BODY_TIMEOUT_S" in error["message"]
    assert model.requests == []


def test_a_chunked_body_that_trickles_forever_is_408(
    model: Any, agent_files: Any, serve_app: Callable[..., Any]
) -> None:
    agent_files.write("hello", model)
    served = serve_app([agent_files.root], body_timeout_s=0.5)
    head = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n"
    )
    with connection(served) as sock:
        sock.sendall(head)
        deadline = time.monotonic() + PATIENCE_S
        sock.settimeout(0.05)
        response = b""
        while not response:
            assert time.monotonic() < deadline, "the trickle was never cut"
            try:
                sock.sendall(b"1\r\n \r\n")  # one byte of body every 50 ms: the read timer never idles
            except (BrokenPipeError, ConnectionResetError):
                break
            try:
                response = sock.recv(65536)
            except TimeoutError:
                continue
        sock.settimeout(PATIENCE_S)
        if response:
            response += read_until_closed(sock)
    assert status_of(response) == 408


def test_connections_over_the_cap_are_answered_503_and_closed(
    model: Any, agent_files: Any, serve_app: Callable[..., Any]
) -> None:
    agent_files.write("hello", model)
    served = serve_app([agent_files.root], server={"max_connections": 3, "header_timeout_s": 60})
    state = served.server.server_state
    holders = [socket.create_connection(("127.0.0.1", port_of(served)), timeout=PATIENCE_S) for _ in range(3)]
    try:
        deadline = time.monotonic() + PATIENCE_S
        while len(state.connections) < 3:  # the server has taken them all
            assert time.monotonic() < deadline
            time.sleep(0.01)
        request = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        with connection(served) as extra:
            extra.sendall(request)
            refused = read_until_closed(extra)
        assert status_of(refused) == 503
        assert body_of(refused)["error"]["code"] == "too_many_connections"
        holders.pop().close()
        while len(state.connections) >= 3:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        with connection(served) as again:
            again.sendall(request.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n"))
            assert status_of(read_until_closed(again)) == 200
    finally:
        for sock in holders:
            sock.close()
