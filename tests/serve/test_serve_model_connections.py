"""Clients that go away mid-stream leave no connection to the model open (issue 23, item 22).

Streaming clients, half of which hang up in the middle of the answer (some right at its last
words, when the model's answer is closing), mixed with clients that read to the end, on one
agent's shared model client. Afterwards every later request is answered, and once the idle
kept-alive connections have expired the scripted model server sees as many connections as
before the load: one.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from runner.models import openai_compat
from runner.testing import ScriptedServer

pytestmark = pytest.mark.slow

WORDS = [f"w{n} " for n in range(8)]
CLIENTS = 24
ROUNDS = 3


def settled(server: ScriptedServer, expected: int, timeout_s: float = 10.0) -> int:
    """The server's open connections once they are ``expected`` (or after ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    while server.open_connections != expected and time.monotonic() < deadline:
        time.sleep(0.02)  # the server sees a closed connection a moment after the client closed it
    return server.open_connections


def _wait_until(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


async def _client(http: httpx.AsyncClient, number: int) -> str:
    """One streamed request; odd clients hang up after a few content chunks (some at the last)."""
    body = {"model": "talker", "messages": [{"role": "user", "content": "talk"}], "stream": True}
    leave_after = None if number % 2 == 0 else 1 + (number // 2) % len(WORDS)
    seen = 0
    async with http.stream("POST", "/v1/chat/completions", json=body) as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if '"content":"w' in line:
                seen += 1
                if leave_after is not None and seen >= leave_after:
                    return "left"
    return "read"


def test_clients_leaving_mid_stream_leave_no_model_connection_open(
    scripted: Callable[..., ScriptedServer],
    agent_files: Any,
    serve_app: Callable[..., Any],
    recorder: Any,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.setattr(openai_compat, "KEEPALIVE_S", 0.5)  # idle connections expire quickly
    lingers = itertools.cycle([0.0, 0.001, 0.003, 0.006, 0.01])

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        # The end of the body comes a little after [DONE], at spread moments: some answers close
        # just as their client's hang-up reaches the server.
        return {"content": "".join(WORDS), "chunk_delay_s": 0.004, "linger_s": next(lingers)}

    server = scripted(answer, chunks=len(WORDS))
    agent_files.write("talker", server)
    served = serve_app([agent_files.root])
    recorder.allow_partial = True

    async def load() -> list[str]:
        limits = httpx.Limits(max_connections=CLIENTS * 2)
        async with served.async_http(limits=limits) as http:
            outcomes: list[str] = []
            for _ in range(ROUNDS):
                outcomes += await asyncio.gather(*(_client(http, n) for n in range(CLIENTS)))
            return outcomes

    outcomes = asyncio.run(load())
    assert outcomes.count("left") == outcomes.count("read") == CLIENTS * ROUNDS // 2
    _wait_until(lambda: served.runs() == 0, 15, "every run to end")
    time.sleep(0.6)  # past the keep-alive expiry: idle connections go with the next request
    with served.http() as http:
        for _ in range(3):  # every later request is answered, in full
            body = {"model": "talker", "messages": [{"role": "user", "content": "again"}]}
            response = http.post("/v1/chat/completions", json=body)
            assert response.status_code == 200, response.text
            assert response.json()["choices"][0]["message"]["content"] == "".join(WORDS)
    assert settled(server, 1) == 1
