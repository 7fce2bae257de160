"""Conversations a door continues by id: owned by the key that started them, exact ids, idle expiry."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from runner.agentfile import load_agent
from runner.runnable import AgentRunner
from runner.runtime.settings import RuntimeSettings
from runner.serve.conversations import ConversationNotFound, Conversations
from runner.session import Session
from runner.testing import ScriptedModel, text

AGENT = "version: 1\nname: solo\nmodel: openai/any\nprompts: {system: Answer.}\n"


async def _started(tmp_path: Path, model: ScriptedModel) -> tuple[AgentRunner, str]:
    (tmp_path / "solo.yaml").write_text(AGENT, encoding="utf-8")
    settings = RuntimeSettings(home=tmp_path / "home")
    runner = AgentRunner(load_agent(tmp_path / "solo.yaml"), settings, model=model)
    outcome = await runner.run(["my name is Ada"])
    assert outcome.status == "ok" and outcome.session_id
    return runner, outcome.session_id


async def test_a_claimed_conversation_continues_with_its_key_only(tmp_path: Path) -> None:
    model = ScriptedModel([text("hello Ada"), text("you are Ada")])
    runner, session_id = await _started(tmp_path, model)
    book = Conversations(tmp_path / "home")
    book.claim(session_id, "key-a", door="mcp")
    transcript = book.open(session_id, "key-a")
    async with Session(await runner.open(), resume=transcript) as session:
        result = await session.run(["what is my name?"])
    assert result.outcome.answer == "you are Ada"
    assert session.session_id == session_id
    sent = [m["content"] for m in model.requests[-1].messages if m["role"] == "user"]
    assert sent == ["my name is Ada", "what is my name?"]
    owner = (tmp_path / "home" / "serve" / "owners" / f"{session_id}.json").read_text(encoding="utf-8")
    assert "key-a" not in owner  # only its digest is kept
    await runner.aclose()


async def test_every_miss_reads_the_same(tmp_path: Path) -> None:
    runner, session_id = await _started(tmp_path, ScriptedModel([text("hi")]))
    await runner.aclose()
    book = Conversations(tmp_path / "home")
    with pytest.raises(ConversationNotFound):
        book.open(session_id, None)  # never claimed by a door
    book.claim(session_id, "key-a", door="a2a")
    errors = []
    for session, key in [
        (session_id, "key-b"),  # another key's
        (session_id, None),  # no key at all
        (session_id[:-2], "key-a"),  # a prefix is not an id
        ("20990101-000000-000000000000", "key-a"),  # unknown
        ("../../etc/passwd", "key-a"),  # not an id
    ]:
        with pytest.raises(ConversationNotFound) as caught:
            book.open(session, key)
        errors.append(str(caught.value).replace(session[:80], "ID"))
    assert set(errors) == {"no conversation 'ID'"}


async def test_an_idle_conversation_expires(tmp_path: Path) -> None:
    runner, session_id = await _started(tmp_path, ScriptedModel([text("hi")]))
    await runner.aclose()
    now = [0.0]
    book = Conversations(tmp_path / "home", idle_s=60, clock=lambda: now[0])
    book.claim(session_id, None, door="mcp")
    transcript = tmp_path / "home" / "sessions" / f"{session_id}.jsonl"
    written = transcript.stat().st_mtime
    now[0] = written + 59
    assert book.open(session_id, None).session_id == session_id
    now[0] = written + 61
    with pytest.raises(ConversationNotFound):
        book.open(session_id, None)
    os.utime(transcript, (now[0], now[0]))  # written again: alive again
    assert book.owns(session_id, None)


async def test_turns_of_one_conversation_take_turns(tmp_path: Path) -> None:
    book = Conversations(tmp_path)
    order: list[str] = []

    async def turn(name: str) -> None:
        async with book.lock("20260101-000000-0123456789ab"):
            order.append(f"{name} in")
            await asyncio.sleep(0)
            order.append(f"{name} out")

    await asyncio.gather(turn("a"), turn("b"))
    assert order == ["a in", "a out", "b in", "b out"]
