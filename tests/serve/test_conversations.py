"""Conversations a door continues by id: owned by the key that started them, exact ids, idle expiry."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from runner.agentfile import load_agent
from runner.errors import StorageError
from runner.runnable import AgentRunner
from runner.runtime.settings import RuntimeSettings
from runner.serve.conversations import ConversationNotFound, Conversations, owner_tag
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
    owners = (tmp_path / "home" / "serve" / "owners.jsonl").read_text(encoding="utf-8")
    assert session_id in owners and "key-a" not in owners  # only its digest is kept
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


ID_A, ID_B, ID_C = (f"20260101-000000-0123456789a{last}" for last in "abc")


def _alive(home: Path, *ids: str) -> None:
    """Transcripts for ``ids``, just written (``owns`` also checks the idle time)."""
    (home / "sessions").mkdir(parents=True, exist_ok=True)
    for session_id in ids:
        header = {
            "type": "header",
            "format": 1,
            "session_id": session_id,
            "agent": "solo",
            "agent_path": "solo.yaml",
            "agent_sha256": "0" * 64,
            "runner_version": "0",
            "model": "openai/scripted",
            "started_at": "2026-01-01T00:00:00.000Z",
        }
        (home / "sessions" / f"{session_id}.jsonl").write_text(json.dumps(header) + "\n", encoding="utf-8")


def test_claims_are_lines_of_one_log_that_other_books_read_as_it_grows(tmp_path: Path) -> None:
    _alive(tmp_path, ID_A, ID_B)
    one, other = Conversations(tmp_path), Conversations(tmp_path)  # two doors, or two processes
    one.claim(ID_A, "key-a", door="a2a")
    assert other.owns(ID_A, "key-a") and not other.owns(ID_A, "key-b")
    assert not other.owns(ID_B, "key-a")  # not claimed yet: read as a miss, then claimed
    one.claim(ID_B, "key-a", door="mcp")
    assert other.owns(ID_B, "key-a")
    lines = [
        line
        for line in (tmp_path / "serve" / "owners.jsonl").read_text(encoding="utf-8").splitlines()
        if line
    ]
    assert [json.loads(line) for line in lines] == [
        {"session_id": ID_A, "owner": owner_tag("key-a"), "door": "a2a"},
        {"session_id": ID_B, "owner": owner_tag("key-a"), "door": "mcp"},
    ]
    assert Conversations(tmp_path, idle_s=60).owns(ID_B, "key-a")  # a new process reads them all


def test_a_line_cut_short_loses_its_conversation_only(tmp_path: Path) -> None:
    _alive(tmp_path, ID_A, ID_B, ID_C)
    book = Conversations(tmp_path)
    book.claim(ID_A, None, door="a2a")
    with (tmp_path / "serve" / "owners.jsonl").open("ab") as log:
        log.write(b'\n{"session_id": "' + ID_B.encode())  # a full disk, mid-line
    later = Conversations(tmp_path)
    assert not later.owns(ID_B, None)  # the line has not ended: read as a miss, not kept
    book.claim(ID_C, None, door="a2a")
    fresh = Conversations(tmp_path)
    assert fresh.owns(ID_A, None) and fresh.owns(ID_C, None) and not fresh.owns(ID_B, None)
    assert later.owns(ID_C, None) and not later.owns(ID_B, None)


def test_an_owner_file_of_the_earlier_layout_still_counts(tmp_path: Path) -> None:
    _alive(tmp_path, ID_A)
    (tmp_path / "serve" / "owners").mkdir(parents=True)
    record = {"session_id": ID_A, "owner": owner_tag("key-a"), "door": "mcp"}
    (tmp_path / "serve" / "owners" / f"{ID_A}.json").write_text(json.dumps(record), encoding="utf-8")
    book = Conversations(tmp_path)
    assert book.owns(ID_A, "key-a") and not book.owns(ID_A, "key-b") and not book.owns(ID_A, None)


def test_a_claim_that_cannot_be_written_says_where(tmp_path: Path) -> None:
    (tmp_path / "serve").write_text("not a folder", encoding="utf-8")
    with pytest.raises(StorageError, match=r"cannot write .*owners\.jsonl: Not a directory"):
        Conversations(tmp_path).claim(ID_A, None, door="a2a")
