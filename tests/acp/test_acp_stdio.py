"""``runner acp`` driven by the official ACP SDK's client side, as an editor drives it: one agent
process for the whole module (each test opens its own sessions in it).

Prompt turns with streaming, reasoning, tools and the ``todo`` plan; permission requests answered
allow, reject, allow-always and never; cancel mid-stream and before the first token; bad input
(unknown sessions, content the agent cannot take); the editor's MCP servers; stdout carrying the
protocol only.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from acp import RequestError, image_block, text_block
from acp.schema import McpServerStdio

from runner.testing import ScriptedServer
from tests.acp.editor import ASKED_LATE, Editor, editor, protocol_lines, scripted_server, write_agent

# One agent process for the module: its tests share an event loop and one xdist worker.
pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.xdist_group("acp-stdio")]

FAKE_MCP = Path(__file__).resolve().parents[1] / "tools_mcp" / "fake_mcp_server.py"


@pytest.fixture(scope="module")
def server() -> Any:
    with scripted_server() as srv:
        yield srv


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def agent(tmp_path_factory: pytest.TempPathFactory, server: ScriptedServer) -> AsyncIterator[Editor]:
    root = tmp_path_factory.mktemp("acp")
    path = write_agent(root / "agents", server.base_url, tool_timeout_s=2)
    async with editor(root, path) as running:
        yield running


def said(updates: list[Any]) -> str:
    return "".join(update.content.text for update in updates)


async def test_initialize_answers_protocol_1_and_what_the_agent_takes(agent: Editor) -> None:
    answer = agent.initialized
    assert answer.protocol_version == 1 and answer.agent_info.name == "runner"
    capabilities = answer.agent_capabilities
    assert capabilities.load_session is True
    prompts, servers = capabilities.prompt_capabilities, capabilities.mcp_capabilities
    assert (prompts.image, prompts.audio, prompts.embedded_context) == (False, False, True)
    assert (servers.http, servers.sse) == (True, True)
    again = await agent.conn.initialize(protocol_version=2)  # a newer client: the version we speak
    assert again.protocol_version == 1


async def test_a_prompt_streams_reasoning_and_text_and_ends_the_turn(agent: Editor) -> None:
    session = await agent.new_session()
    response = await agent.conn.prompt(session_id=session, prompt=[text_block("hello there")])
    assert response.stop_reason == "end_turn"
    assert said(agent.client.of(session, "agent_thought_chunk")) == "The user greets me."
    chunks = agent.client.of(session, "agent_message_chunk")
    assert said(chunks) == "Hello from the agent." and len(chunks) > 1  # streamed, not whole


async def test_a_tool_runs_in_the_editors_folder_with_a_tool_call_and_its_updates(agent: Editor) -> None:
    (agent.project / "notes.txt").write_text("notes of the project", encoding="utf-8")
    session = await agent.new_session()
    response = await agent.conn.prompt(session_id=session, prompt=[text_block("read the notes")])
    assert response.stop_reason == "end_turn"
    (start,) = agent.client.of(session, "tool_call")
    assert (start.kind, start.raw_input) == ("read", {"path": "notes.txt"})
    updates = [
        u for u in agent.client.of(session, "tool_call_update") if u.tool_call_id == start.tool_call_id
    ]
    # The call starts while the reply still streams (eager start): tool_call in_progress, then done.
    assert [start.status, *(u.status for u in updates)] == ["in_progress", "completed"]
    assert "notes of the project" in updates[-1].content[0].content.text
    assert said(agent.client.of(session, "agent_message_chunk")).startswith("done: ")


async def test_a_permission_request_answered_allow_runs_the_call(agent: Editor) -> None:
    session = await agent.new_session()
    agent.client.answers = ["allow"]
    response = await agent.conn.prompt(session_id=session, prompt=[text_block("run it")])
    assert response.stop_reason == "end_turn"
    asked = agent.client.asked[-1]
    assert asked.raw_input == {"command": "echo ran-it"}
    (start,) = agent.client.of(session, "tool_call")
    assert start.tool_call_id == asked.tool_call_id and start.kind == "execute"
    final = agent.client.of(session, "tool_call_update")[-1]
    assert final.status == "completed" and "ran-it" in final.content[0].content.text


async def test_a_permission_request_answered_reject_runs_nothing_and_ends_the_turn(
    agent: Editor, server: ScriptedServer
) -> None:
    session = await agent.new_session()
    agent.client.answers = ["reject"]
    before = len(server.requests)
    response = await agent.conn.prompt(session_id=session, prompt=[text_block("run it")])
    assert response.stop_reason == "end_turn"
    final = agent.client.of(session, "tool_call_update")[-1]
    assert final.status == "failed" and "declined" in final.content[0].content.text
    assert all(u.status != "completed" for u in agent.client.of(session, "tool_call_update"))
    assert len(server.requests) == before + 1  # the refusal ended the turn: no step after it


async def test_allow_always_holds_for_the_rest_of_the_session_only(agent: Editor) -> None:
    session = await agent.new_session()
    agent.client.answers = ["always"]
    asked = len(agent.client.asked)
    for _ in range(2):
        response = await agent.conn.prompt(session_id=session, prompt=[text_block("run it")])
        assert response.stop_reason == "end_turn"
    assert len(agent.client.asked) == asked + 1
    assert [u.status for u in agent.client.of(session, "tool_call_update")].count("completed") == 2
    other = await agent.new_session()
    agent.client.answers = ["reject"]
    await agent.conn.prompt(session_id=other, prompt=[text_block("run it")])
    assert len(agent.client.asked) == asked + 2  # another session asks again


async def test_a_permission_request_never_answered_is_a_no_after_the_tool_timeout(agent: Editor) -> None:
    session = await agent.new_session()
    agent.client.answers = ["never"]
    started = asyncio.get_running_loop().time()
    response = await agent.conn.prompt(session_id=session, prompt=[text_block("run it")])
    waited = asyncio.get_running_loop().time() - started
    assert response.stop_reason == "end_turn"
    assert 2 <= waited < 15  # limits.tool_timeout_s: 2 bounds the wait
    statuses = [u.status for u in agent.client.of(session, "tool_call_update")]
    assert "completed" not in statuses and statuses[-1] == "failed"


async def test_the_todo_list_is_sent_as_a_plan(agent: Editor) -> None:
    session = await agent.new_session()
    await agent.conn.prompt(session_id=session, prompt=[text_block("plan the work")])
    (plan,) = agent.client.of(session, "plan")
    assert [(e.content, e.status) for e in plan.entries] == [("write the tests", "pending")]
    (start,) = agent.client.of(session, "tool_call")
    assert start.kind == "think"


async def test_cancel_mid_stream_ends_the_turn_cancelled_at_once(agent: Editor) -> None:
    session = await agent.new_session()
    turn = asyncio.create_task(agent.conn.prompt(session_id=session, prompt=[text_block("slow please")]))
    await agent.client.wait_for(lambda: bool(agent.client.of(session, "agent_message_chunk")))
    await agent.conn.cancel(session_id=session)
    response = await asyncio.wait_for(turn, 5)
    assert response.stop_reason == "cancelled"
    assert len(agent.client.of(session, "agent_message_chunk")) < 8  # the stream was cut


async def test_cancel_before_the_first_token_ends_the_turn_cancelled(agent: Editor) -> None:
    session = await agent.new_session()
    ASKED_LATE.clear()
    turn = asyncio.create_task(agent.conn.prompt(session_id=session, prompt=[text_block("late answer")]))
    assert await asyncio.to_thread(ASKED_LATE.wait, 10)  # the model is asked and has sent nothing yet
    await agent.conn.cancel(session_id=session)
    response = await asyncio.wait_for(turn, 5)  # the model would answer after 30 s
    assert response.stop_reason == "cancelled"
    assert agent.client.of(session, "agent_message_chunk") == []
    again = await agent.conn.prompt(session_id=session, prompt=[text_block("hello again")])
    assert again.stop_reason == "end_turn"  # the session goes on


async def test_a_cancel_sent_with_the_prompt_stops_it_before_any_step(agent: Editor) -> None:
    session = await agent.new_session()
    turn = asyncio.create_task(agent.conn.prompt(session_id=session, prompt=[text_block("late again")]))
    await asyncio.sleep(0)  # the prompt is on the wire; the cancel follows it at once
    await agent.conn.cancel(session_id=session)
    response = await asyncio.wait_for(turn, 10)
    assert response.stop_reason == "cancelled"


async def test_stop_reasons_follow_the_models_finish_reason(agent: Editor) -> None:
    session = await agent.new_session()
    long = await agent.conn.prompt(session_id=session, prompt=[text_block("long answer")])
    filtered = await agent.conn.prompt(session_id=session, prompt=[text_block("filtered answer")])
    assert (long.stop_reason, filtered.stop_reason) == ("max_tokens", "refusal")


async def test_a_failed_run_is_a_json_rpc_error_saying_why_and_the_session_goes_on(agent: Editor) -> None:
    session = await agent.new_session()
    with pytest.raises(RequestError) as caught:
        await agent.conn.prompt(session_id=session, prompt=[text_block("broken model")])
    assert caught.value.code == -32603 and "the model is down" in str(caught.value)
    response = await agent.conn.prompt(session_id=session, prompt=[text_block("hello")])
    assert response.stop_reason == "end_turn"


async def test_a_prompt_for_an_unknown_session_is_an_error_naming_it(agent: Editor) -> None:
    with pytest.raises(RequestError) as caught:
        await agent.conn.prompt(session_id="no-such-session", prompt=[text_block("hello")])
    assert caught.value.code == -32602
    assert "unknown session 'no-such-session'" in str(caught.value)


async def test_content_the_agent_cannot_take_is_a_clear_error_and_the_session_goes_on(agent: Editor) -> None:
    session = await agent.new_session()
    with pytest.raises(RequestError) as caught:
        await agent.conn.prompt(
            session_id=session, prompt=[text_block("look"), image_block("AAAA", "image/png")]
        )
    assert caught.value.code == -32602
    assert "prompt[1]" in str(caught.value) and "image" in str(caught.value)
    response = await agent.conn.prompt(session_id=session, prompt=[text_block("hello")])
    assert response.stop_reason == "end_turn"


async def test_the_editors_mcp_servers_are_tools_of_that_session(
    agent: Editor, server: ScriptedServer
) -> None:
    fake = McpServerStdio(name="fake", command=sys.executable, args=[str(FAKE_MCP)], env=[])
    response = await agent.conn.new_session(cwd=str(agent.project), mcp_servers=[fake])
    session = response.session_id
    await agent.conn.prompt(session_id=session, prompt=[text_block("tools?")])
    names = {tool["function"]["name"] for tool in server.requests[-1]["tools"]}
    assert "echo" in names and "files_read" in names
    plain = await agent.new_session()
    await agent.conn.prompt(session_id=plain, prompt=[text_block("tools?")])
    assert "echo" not in {tool["function"]["name"] for tool in server.requests[-1]["tools"]}


async def test_a_session_in_a_folder_that_is_not_absolute_is_refused(agent: Editor) -> None:
    with pytest.raises(RequestError) as caught:
        await agent.conn.new_session(cwd="relative/folder", mcp_servers=[])
    assert "not an absolute path" in str(caught.value)


async def test_stdout_carries_the_protocol_only(agent: Editor) -> None:
    session = await agent.new_session()
    response = await agent.conn.prompt(session_id=session, prompt=[text_block("noisy tool")])
    assert response.stop_reason == "end_turn"
    assert agent.client.of(session, "tool_call_update")[-1].status == "completed"
    messages = protocol_lines(agent.lines)
    assert any(m.get("method") == "session/update" for m in messages)
    stderr = agent.stderr_text()
    assert "written-to-fd-1" in stderr and "printed-to-stdout" in stderr
