"""How ``/mcp`` answers a POST (``runner.serve.mcp.answers``): one JSON body when there is nothing to
stream, an SSE stream with the progress when the request carries a progress token; in both protocol
generations, over raw HTTP (to see the media type), and with the bounds the SDK kept."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from runner.serve.mcp.answers import SessionManager
from tests.mcp_server.conftest import Agents, echo, initialize_request, tool_then_answer, wait_for

GENERATIONS = ("2025-11-25", "2026-07-28")
ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


class RawClient:
    """A raw HTTP client of ``/mcp`` in one generation (2025: a session opened with ``initialize``)."""

    def __init__(self, http: httpx.Client, url: str, generation: str) -> None:
        self.http, self.url, self.generation = http, url, generation
        self.headers = {**ACCEPT, "mcp-protocol-version": generation}
        self.ids = iter(range(10, 1000))
        if generation == "2025-11-25":
            init = initialize_request(generation)
            opened = http.post(url, json=init, headers=ACCEPT)
            assert opened.headers["content-type"] == "text/event-stream"  # initialize always streams
            self.headers["mcp-session-id"] = opened.headers["mcp-session-id"]
            http.post(
                url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=self.headers
            )

    def call(self, tool: str, message: str, *, token: str | None = None, **headers: str) -> httpx.Response:
        params: dict[str, Any] = {"name": tool, "arguments": {"message": message}}
        meta: dict[str, Any] = dict(_META) if self.generation == "2026-07-28" else {}
        if token is not None:
            meta["progressToken"] = token
        if meta:
            params["_meta"] = meta
        extra = {"mcp-method": "tools/call", "mcp-name": tool} if self.generation == "2026-07-28" else {}
        body = {"jsonrpc": "2.0", "id": next(self.ids), "method": "tools/call", "params": params}
        return self.http.post(self.url, json=body, headers={**self.headers, **extra, **headers})


def events(response: httpx.Response) -> list[dict[str, Any]]:
    """The JSON-RPC messages of an SSE answer, in order."""
    return [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]


@pytest.fixture
def raw(agents: Agents, scripted_server: Callable[..., Any], serve: Callable[..., Any]) -> Iterator[Any]:
    """``raw(generation, **serve_options)``: a ``RawClient`` of a server with ``helper`` (echoes)
    and ``doer`` (a tool call, then an answer)."""
    agents.write("helper", scripted_server(echo, repeat=True))
    agents.write(
        "doer",
        scripted_server(tool_then_answer("act"), repeat=True),
        tools="def act() -> str:\n    return 'done'\n",
    )
    with httpx.Client(timeout=30) as http:
        yield lambda generation, **options: RawClient(
            http, serve([agents.root], **options).mcp_url, generation
        )


@pytest.mark.parametrize("generation", GENERATIONS)
def test_a_call_without_a_progress_token_is_answered_in_one_json_body(
    raw: Any, generation: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Also past the time after which the SDK's 2026 entry would commit to a stream (shortened)."""
    from mcp.server import _streamable_http_modern

    monkeypatch.setattr(_streamable_http_modern, "_SSE_PING_INTERVAL", 0.0)
    client = raw(generation)
    answer = client.call("helper", "hello")
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "application/json"
    assert answer.json()["result"]["content"][0]["text"] == "heard: hello"


@pytest.mark.parametrize("generation", GENERATIONS)
def test_a_call_with_a_progress_token_still_streams_its_progress(raw: Any, generation: str) -> None:
    """Before and after calls answered in JSON on the same connection (2025: the same MCP session)."""
    client = raw(generation)
    assert client.call("doer", "first").headers["content-type"] == "application/json"
    streamed = client.call("doer", "go", token="t-1")
    assert client.call("doer", "again").headers["content-type"] == "application/json"
    assert streamed.headers["content-type"].startswith("text/event-stream")
    messages = events(streamed)
    progress = [m["params"] for m in messages if m.get("method") == "notifications/progress"]
    assert [p["message"] for p in progress] == ["step 1 of turn 1", "tool act", "step 2 of turn 1"]
    assert {p["progressToken"] for p in progress} == {"t-1"}
    assert messages[-1]["result"]["content"][0]["text"] == "the tool said done"
    second = client.call("doer", "go on", token="t-2")  # a JSON answer did not change the session
    assert [m["params"]["progressToken"] for m in events(second)[:-1]] == ["t-2"] * 3


@pytest.mark.parametrize("generation", GENERATIONS)
def test_a_client_that_does_not_accept_a_stream_is_refused_as_before(raw: Any, generation: str) -> None:
    client = raw(generation)
    answer = client.call("helper", "hello", accept="application/json")
    assert answer.status_code == 406


@pytest.mark.parametrize("generation", GENERATIONS)
def test_a_body_over_the_limit_is_refused_whether_declared_or_not(raw: Any, generation: str) -> None:
    client = raw(generation, max_body_bytes=2000)
    assert client.call("helper", "x" * 3000).status_code == 413  # Content-Length says so

    def chunks() -> Iterator[bytes]:  # no Content-Length: the door counts while it reads
        body = {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "helper"}}
        text = json.dumps({**body, "pad": "x" * 3000}).encode()
        yield from (text[i : i + 500] for i in range(0, len(text), 500))

    chunked = client.http.post(client.url, content=chunks(), headers=client.headers)
    assert chunked.status_code == 413
    assert client.call("helper", "small").json()["result"]["content"][0]["text"] == "heard: small"


@pytest.mark.parametrize("generation", GENERATIONS)
def test_a_body_that_is_not_json_gets_the_sdks_parse_error(raw: Any, generation: str) -> None:
    client = raw(generation)
    answer = client.http.post(client.url, content=b'{"jsonrpc": "2.0", "id": 3', headers=client.headers)
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == -32700


def test_the_manager_refuses_a_json_response_for_every_request() -> None:
    from mcp.server import Server

    with pytest.raises(ValueError, match="JSON answers are chosen per request"):
        SessionManager(app=Server("t"), json_response=True)


def test_a_2026_call_with_an_mcp_param_header_is_answered(raw: Any) -> None:
    """runner's tools declare no ``x-mcp-header`` params: such a header is nothing to check."""
    client = raw("2026-07-28")
    answer = client.call("helper", "hello", **{"mcp-param-message": "other"})
    assert answer.json()["result"]["content"][0]["text"] == "heard: hello"


@pytest.mark.parametrize("generation", GENERATIONS)
def test_a_conversation_that_cannot_be_claimed_stops_its_run(
    agents: Agents, scripted_server: Callable[..., Any], serve: Callable[..., Any], home: Any, generation: str
) -> None:
    """The owners' log is appended to on the event loop as the run starts: when it cannot be, the
    call is an error result (the server's path not in it) and the run is stopped."""
    agents.write("helper", scripted_server(echo, repeat=True))
    reported: list[str] = []
    served = serve([agents.root], report=reported.append)
    (home / "serve" / "owners.jsonl").mkdir(parents=True)  # not a file: every append fails
    with httpx.Client(timeout=30) as http:
        answer = RawClient(http, served.mcp_url, generation).call("helper", "hello")
    result = answer.json()["result"]
    assert result["isError"] is True
    assert result["content"][0]["text"] == "helper could not start: the server cannot record conversations"
    assert any("owners.jsonl" in line for line in reported), reported
    wait_for(lambda: served.runs() == 0, what="the run stopped")
