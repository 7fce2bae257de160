"""``/mcp`` on ``runner serve`` (in process, 127.0.0.1) driven by the official ``mcp`` client over
streamable HTTP, in both protocol generations: keys, conversations, progress, cancel, a vanished
client, many calls at once."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from tests.mcp_server.conftest import (
    END_HOOK,
    MODES,
    SLOW_TOOLS,
    Agents,
    check_structured,
    echo,
    http_client,
    initialize_request,
    tool_then_answer,
    wait_for,
)

#: A tool that counts the calls running at once and waits until ``want`` of them overlap (bounded).
OVERLAP_TOOLS = '''
import asyncio
import pathlib

MARKS = pathlib.Path(r"{marks}")
RUNNING = [0]
PEAK = [0]


async def hold() -> str:
    """Wait until {want} calls run at once (or 20 s pass)."""
    RUNNING[0] += 1
    PEAK[0] = max(PEAK[0], RUNNING[0])
    (MARKS / "peak").write_text(str(PEAK[0]))
    try:
        for _ in range(2000):
            if PEAK[0] >= {want}:
                return "together"
            await asyncio.sleep(0.01)
        return "alone"
    finally:
        RUNNING[0] -= 1
'''


@pytest.mark.parametrize("mode", MODES)
async def test_a_call_over_http_answers_and_continues(
    mode: str, agents: Agents, scripted_server: Callable[..., Any], serve: Callable[..., Any]
) -> None:
    agents.write("helper", scripted_server(echo, repeat=True), "description: Helps.")
    served = serve([agents.root])
    async with http_client(served.mcp_url, mode=mode) as client:
        assert client.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
        (tool,) = (await client.list_tools()).tools
        assert tool.name == "helper" and tool.description == "Helps."
        first = check_structured(tool, await client.call_tool("helper", {"message": "I am Ada"}))
        second = await client.call_tool("helper", {"message": "who?", "session_id": first["session_id"]})
    assert check_structured(tool, second)["response"] == "heard: I am Ada | who?"


async def test_a_session_id_continues_in_the_other_generation_too(
    agents: Agents, scripted_server: Callable[..., Any], serve: Callable[..., Any]
) -> None:
    """A conversation is a session, not an MCP connection: a new client (either generation) continues it."""
    agents.write("helper", scripted_server(echo, repeat=True))
    served = serve([agents.root])
    async with http_client(served.mcp_url, mode="legacy") as client:
        first = await client.call_tool("helper", {"message": "one"})
    async with http_client(served.mcp_url, mode="2026-07-28") as client:
        later = await client.call_tool(
            "helper", {"message": "two", "session_id": first.structured_content["session_id"]}
        )
    assert later.content[0].text == "heard: one | two"


async def test_a_conversation_idle_past_the_limit_is_not_continued(
    agents: Agents, scripted_server: Callable[..., Any], serve: Callable[..., Any], home: Path
) -> None:
    """RUNNER_SERVE_CONVERSATION_IDLE_S (a day by default), as on the A2A door."""
    agents.write("helper", scripted_server(echo, repeat=True))
    served = serve([agents.root])
    async with http_client(served.mcp_url) as client:
        first = await client.call_tool("helper", {"message": "one"})
        session_id = first.structured_content["session_id"]
        transcript = home / "sessions" / f"{session_id}.jsonl"
        day_and_a_bit = time.time() - 24 * 3600 - 60
        os.utime(transcript, (day_and_a_bit, day_and_a_bit))
        later = await client.call_tool("helper", {"message": "two", "session_id": session_id})
    assert later.is_error and "no conversation" in later.content[0].text


async def test_keys_guard_the_door_and_own_the_conversations(
    agents: Agents, scripted_server: Callable[..., Any], serve: Callable[..., Any]
) -> None:
    agents.write("helper", scripted_server(echo, repeat=True))
    served = serve([agents.root], api_keys=["key-a", "key-b"])
    with httpx.Client(timeout=10) as http:
        refused = http.post(served.mcp_url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        wrong = http.post(served.mcp_url, json={}, headers={"authorization": "Bearer nope"})
    assert refused.status_code == wrong.status_code == 401
    assert refused.headers["www-authenticate"] == "Bearer"
    async with http_client(served.mcp_url, key="key-a") as client:
        first = await client.call_tool("helper", {"message": "secret plan"})
    session_id = first.structured_content["session_id"]
    for mode in MODES:
        async with http_client(served.mcp_url, key="key-b", mode=mode) as other:
            stolen = await other.call_tool(
                "helper", {"message": "what was the plan?", "session_id": session_id}
            )
            unknown = await other.call_tool(
                "helper", {"message": "x", "session_id": "20990101-000000-000000000000"}
            )
        assert stolen.is_error and "no conversation" in stolen.content[0].text
        assert "secret" not in stolen.content[0].text
        assert stolen.content[0].text.replace(session_id, "ID") == unknown.content[0].text.replace(
            "20990101-000000-000000000000", "ID"
        )  # another key's conversation reads as one that does not exist
    async with http_client(served.mcp_url, key="key-a", mode="2026-07-28") as client:
        mine = await client.call_tool("helper", {"message": "and now?", "session_id": session_id})
    assert mine.content[0].text == "heard: secret plan | and now?"


async def test_another_keys_mcp_session_is_not_found(
    agents: Agents, scripted_server: Callable[..., Any], serve: Callable[..., Any]
) -> None:
    """With keys, an ``Mcp-Session-Id`` (2025 generation) is bound to the key that opened it."""
    agents.write("helper", scripted_server(echo, repeat=True))
    served = serve([agents.root], api_keys=["key-a", "key-b"])
    accept = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    with httpx.Client(timeout=10) as http:
        opened = http.post(served.mcp_url, json=init, headers={**accept, "authorization": "Bearer key-a"})
        session = opened.headers["mcp-session-id"]
        headers = {**accept, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
        other = http.post(served.mcp_url, json=listing, headers={**headers, "authorization": "Bearer key-b"})
        own = http.post(served.mcp_url, json=listing, headers={**headers, "authorization": "Bearer key-a"})
    assert opened.status_code == 200
    assert other.status_code == 404
    assert own.status_code == 200 and "helper" in own.text


async def test_a_foreign_origin_and_host_are_refused(
    agents: Agents, scripted_server: Callable[..., Any], serve: Callable[..., Any]
) -> None:
    agents.write("helper", scripted_server(echo, repeat=True))
    served = serve([agents.root])
    with httpx.Client(timeout=10) as http:
        page = http.post(served.mcp_url, json={}, headers={"origin": "http://evil.example"})
        rebound = http.post(served.mcp_url, json={}, headers={"host": "evil.example"})
    assert page.status_code == rebound.status_code == 403


@pytest.mark.parametrize("mode", MODES)
async def test_progress_notifications_for_each_step_and_tool_call(
    mode: str, agents: Agents, scripted_server: Callable[..., Any], serve: Callable[..., Any]
) -> None:
    agents.write(
        "doer",
        scripted_server(tool_then_answer("act"), repeat=True),
        tools="def act() -> str:\n    return 'done'\n",
    )
    served = serve([agents.root])
    seen: list[tuple[float, str | None]] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        seen.append((done, message))

    async with http_client(served.mcp_url, mode=mode) as client:
        result = await client.call_tool("doer", {"message": "go"}, progress_callback=progress)
        quiet = await client.call_tool("doer", {"message": "go"})  # no token: no notifications
    assert result.content[0].text == quiet.content[0].text == "the tool said done"
    assert [message for _, message in seen] == ["step 1 of turn 1", "tool act", "step 2 of turn 1"]
    assert [done for done, _ in seen] == [1, 2, 3]  # it only grows


@pytest.mark.parametrize("mode", MODES)
async def test_cancelling_a_call_stops_the_run_and_releases_its_tools(
    mode: str, agents: Agents, scripted_server: Callable[..., Any], serve: Callable[..., Any], marks: Path
) -> None:
    """The client gives up on the call (``notifications/cancelled`` in 2025; the stream closed in
    2026): the tool sees its cancellation, the session ends, the server tracks no run."""
    agents.write(
        "sleeper",
        scripted_server(tool_then_answer("slow"), repeat=True),
        tools=SLOW_TOOLS.format(marks=marks),
        hooks=END_HOOK.format(marks=marks),
    )
    served = serve([agents.root])
    async with http_client(served.mcp_url, mode=mode) as client:
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: client.call_tool("sleeper", {"message": "wait"}))
            await anyio.to_thread.run_sync(
                lambda: wait_for(lambda: (marks / "started").exists(), what="the tool")
            )
            group.cancel_scope.cancel()
        await anyio.to_thread.run_sync(
            lambda: wait_for(lambda: (marks / "cancelled").exists(), what="the cancel")
        )
        await anyio.to_thread.run_sync(
            lambda: wait_for(lambda: (marks / "session_end").exists(), what="the end")
        )
        await anyio.to_thread.run_sync(lambda: wait_for(lambda: served.runs() == 0, what="no runs left"))
        (marks / "release").write_text("1")
        after = await client.call_tool("sleeper", {"message": "again"})
    assert after.content[0].text == "the tool said released"


async def test_a_cancel_for_a_finished_call_changes_nothing(
    agents: Agents, scripted_server: Callable[..., Any], serve: Callable[..., Any]
) -> None:
    import mcp_types as types

    agents.write("helper", scripted_server(echo, repeat=True))
    served = serve([agents.root])
    async with http_client(served.mcp_url, mode="legacy") as client:
        first = await client.call_tool("helper", {"message": "one"})
        for request_id in (1, 2, 3, 99):  # the ids the finished requests had, and one never sent
            await client.session.send_notification(
                types.CancelledNotification(params=types.CancelledNotificationParams(request_id=request_id))
            )
        later = await client.call_tool(
            "helper", {"message": "two", "session_id": first.structured_content["session_id"]}
        )
    assert later.content[0].text == "heard: one | two"


@pytest.mark.parametrize("generation", ["2025-11-25", "2026-07-28"])
async def test_a_client_that_vanishes_mid_run_stops_it(
    generation: str,
    agents: Agents,
    scripted_server: Callable[..., Any],
    serve: Callable[..., Any],
    marks: Path,
) -> None:
    """A raw client posts a call and drops its connection: the run stops and its tools are released."""
    agents.write(
        "sleeper",
        scripted_server(tool_then_answer("slow"), repeat=True),
        tools=SLOW_TOOLS.format(marks=marks),
        hooks=END_HOOK.format(marks=marks),
    )
    served = serve([agents.root])
    accept = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    call: dict[str, Any] = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "sleeper", "arguments": {"message": "wait"}},
    }
    async with httpx.AsyncClient(timeout=30) as http:
        headers = {**accept, "mcp-protocol-version": generation}
        if generation == "2026-07-28":
            call["params"]["_meta"] = {
                "io.modelcontextprotocol/protocolVersion": generation,
                "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": {},
            }
            headers.update({"mcp-method": "tools/call", "mcp-name": "sleeper"})
        else:
            init = initialize_request(generation)
            opened = await http.post(served.mcp_url, json=init, headers=accept)
            headers["mcp-session-id"] = opened.headers["mcp-session-id"]
            await http.post(
                served.mcp_url,
                json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                headers=headers,
            )
        # (a 2026 answer without a progress token has no headers before its end: no response to wait for)
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: http.post(served.mcp_url, json=call, headers=headers))
            await anyio.to_thread.run_sync(
                lambda: wait_for(lambda: (marks / "started").exists(), what="the tool")
            )
            group.cancel_scope.cancel()  # the request is dropped: its connection closes mid-answer
    await anyio.to_thread.run_sync(
        lambda: wait_for(lambda: (marks / "cancelled").exists(), what="the cancel")
    )
    await anyio.to_thread.run_sync(lambda: wait_for(lambda: (marks / "session_end").exists(), what="the end"))
    await anyio.to_thread.run_sync(lambda: wait_for(lambda: served.runs() == 0, what="no runs left"))


async def test_fifty_concurrent_calls_on_one_server(
    agents: Agents, scripted_server: Callable[..., Any], serve: Callable[..., Any], marks: Path
) -> None:
    """Fifty calls at once on one server all run together (counted by the tool), each in its own
    conversation, and each gets its own answer."""
    want = 50

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        last = body["messages"][-1]
        if last["role"] == "tool":
            user = next(m["content"] for m in body["messages"] if m["role"] == "user")
            return {"content": f"{user}: {last['content']}"}
        return {"content": "", "tool_calls": [{"name": "hold", "arguments": {}}]}

    agents.write(
        "holder", scripted_server(answer, repeat=True), tools=OVERLAP_TOOLS.format(marks=marks, want=want)
    )
    served = serve([agents.root])
    results: dict[int, Any] = {}

    async def one(client: Any, number: int) -> None:
        results[number] = await client.call_tool("holder", {"message": f"call {number}"})

    async with (
        http_client(served.mcp_url, mode="2026-07-28") as modern,
        http_client(served.mcp_url, mode="legacy") as legacy,
        anyio.create_task_group() as group,
    ):
        for number in range(want):
            group.start_soon(one, modern if number % 2 else legacy, number)
    assert int((marks / "peak").read_text()) == want
    assert sorted(results) == list(range(want))
    for number, result in results.items():
        assert not result.is_error, result.content
        assert result.content[0].text == f"call {number}: together"
    assert len({r.structured_content["session_id"] for r in results.values()}) == want
    await anyio.to_thread.run_sync(lambda: wait_for(lambda: served.runs() == 0, what="no runs left"))


async def test_the_health_of_other_routes_is_unchanged(
    agents: Agents, scripted_server: Callable[..., Any], serve: Callable[..., Any]
) -> None:
    """The door adds /mcp beside the OpenAI routes; they answer as before."""
    agents.write("helper", scripted_server(echo, repeat=True))
    served = serve([agents.root])
    with httpx.Client(base_url=served.url, timeout=10) as http:
        models = http.get("/v1/models").json()
        chat = http.post(
            "/v1/chat/completions", json={"model": "helper", "messages": [{"role": "user", "content": "hi"}]}
        )
    assert [m["id"] for m in models["data"]] == ["helper"]
    assert json.loads(chat.text)["choices"][0]["message"]["content"] == "heard: hi"


async def test_two_calls_on_one_conversation_run_one_after_the_other(
    agents: Agents, scripted_server: Callable[..., Any], serve: Callable[..., Any]
) -> None:
    """Calls that continue one session_id at once take turns: each sees what the other said."""
    agents.write("helper", scripted_server(echo, repeat=True))
    served = serve([agents.root])
    async with http_client(served.mcp_url) as client:
        first = await client.call_tool("helper", {"message": "a"})
        session_id = first.structured_content["session_id"]
        answers: list[str] = []

        async def turn(text: str) -> None:
            result = await client.call_tool("helper", {"message": text, "session_id": session_id})
            answers.append(result.content[0].text)

        async with anyio.create_task_group() as group:
            group.start_soon(turn, "b")
            group.start_soon(turn, "c")
    assert sorted(answers, key=len) in (
        ["heard: a | b", "heard: a | b | c"],
        ["heard: a | c", "heard: a | c | b"],
    )
