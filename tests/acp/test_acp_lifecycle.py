"""An editor that goes away mid-turn, and a session loaded in a new ``runner acp`` process: the
agent exits cleanly, the transcript is kept, ``session/load`` replays it and ``runner resume``
continues it. A team file's members are the session's modes."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError, text_block
from typer.testing import CliRunner

from runner.cli import main
from runner.testing import ScriptedServer
from tests.acp.editor import editor, scripted_server, write_agent


@pytest.fixture
def server() -> Any:
    with scripted_server() as srv:
        yield srv


@pytest.mark.timeout(180)  # two agent processes and a resume, on a loaded 2-core machine
async def test_stdin_closed_mid_turn_exits_cleanly_and_the_session_loads_and_resumes(
    tmp_path: Path, server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_agent(tmp_path / "agents", server.base_url)
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "notes.txt").write_text("notes of the project", encoding="utf-8")
    async with editor(tmp_path, path) as first:
        session = await first.new_session()
        await first.conn.prompt(session_id=session, prompt=[text_block("read the notes")])
        said = len(first.client.of(session, "agent_message_chunk"))
        turn = asyncio.create_task(first.conn.prompt(session_id=session, prompt=[text_block("slow please")]))
        await first.client.wait_for(lambda: len(first.client.of(session, "agent_message_chunk")) > said)
        assert first.process.stdin is not None
        first.process.stdin.close()  # the editor quits mid-stream
        assert await asyncio.wait_for(first.process.wait(), 15) == 0
        try:
            response = await asyncio.wait_for(turn, 5)
        except (ConnectionError, RequestError):
            pass  # the answer may not make it out: the editor is gone
        else:
            assert response.stop_reason == "cancelled"
        assert "Traceback" not in first.stderr_text()
    assert (tmp_path / "home" / "sessions" / f"{session}.jsonl").is_file()

    async with editor(tmp_path, path) as second:
        await second.conn.load_session(cwd=str(second.project), session_id=session, mcp_servers=[])
        replay = second.client.of(session)
        users = [u.content.text for u in replay if u.session_update == "user_message_chunk"]
        assert users == ["read the notes", "slow please"]
        (call,) = [u for u in replay if u.session_update == "tool_call"]
        (result,) = [u for u in replay if u.session_update == "tool_call_update"]
        assert call.tool_call_id == result.tool_call_id and result.status == "completed"
        assert "notes of the project" in result.content[0].content.text
        response = await second.conn.prompt(session_id=session, prompt=[text_block("hello again")])
        assert response.stop_reason == "end_turn"
        history = [m.get("content") for m in server.requests[-1]["messages"]]
        assert "read the notes" in history and "slow please" in history

    monkeypatch.setenv("RUNNER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TEST_KEY", "sk-test")
    resumed = CliRunner().invoke(main.app, ["resume", session, "-p", "after all"])
    assert resumed.exit_code == 0, resumed.output
    assert "echo: after" in resumed.output
    assert "hello again" in [m.get("content") for m in server.requests[-1]["messages"]]


MODEL = "model: {{id: openai/scripted, api_base: '{base_url}', api_key: '${{TEST_KEY:-sk-test}}'}}"
TEAM = f"""\
version: 1
agents:
  writer:
    description: Writes.
    {MODEL}
    prompts: {{{{system: You are the writer.}}}}
  reviewer:
    description: Reviews.
    {MODEL}
    prompts: {{{{system: You are the reviewer.}}}}
"""


async def test_a_team_files_members_are_the_sessions_modes_and_an_unknown_load_is_refused(
    tmp_path: Path, server: ScriptedServer
) -> None:
    team = tmp_path / "agents" / "team.yaml"
    team.parent.mkdir(parents=True)
    team.write_text(TEAM.format(base_url=server.base_url), encoding="utf-8")
    async with editor(tmp_path, team) as running:
        response = await running.conn.new_session(cwd=str(running.project), mcp_servers=[])
        modes = response.modes
        assert modes is not None and modes.current_mode_id == "writer"
        assert [(m.id, m.description) for m in modes.available_modes] == [
            ("writer", "Writes."),
            ("reviewer", "Reviews."),
        ]
        session = response.session_id
        await running.conn.set_session_mode(session_id=session, mode_id="reviewer")
        await running.conn.prompt(session_id=session, prompt=[text_block("hello")])
        assert server.requests[-1]["messages"][0]["content"] == "You are the reviewer."
        await running.conn.set_session_mode(session_id=session, mode_id="writer")  # mid-conversation
        await running.conn.prompt(session_id=session, prompt=[text_block("and now?")])
        messages = server.requests[-1]["messages"]
        assert messages[0]["content"] == "You are the writer."
        assert [m["content"] for m in messages if m["role"] == "user"] == ["hello", "and now?"]
        with pytest.raises(RequestError) as unknown:
            await running.conn.set_session_mode(session_id=session, mode_id="editor")
        assert "unknown mode 'editor'" in str(unknown.value)
        with pytest.raises(RequestError) as missing:
            await running.conn.load_session(
                cwd=str(running.project), session_id="20990101-none", mcp_servers=[]
            )
        assert "no session '20990101-none'" in str(missing.value)
        running.process.terminate()  # an editor that quits with SIGTERM: the same clean end
        assert await asyncio.wait_for(running.process.wait(), 15) == 0
        assert "Traceback" not in running.stderr_text()
