"""``--watch`` and skills: an edited SKILL.md reloads the agent; a broken one keeps the last good skills."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from runner.agentfile import load_agent
from runner.models.base import Reply, Request
from runner.runtime import RuntimeSettings
from runner.session import Session, runtime_host
from runner.session.events import LoopEvent, Note
from runner.testing import ScriptedModel
from runner.watch import watch_session, watched_files
from tests.skills.conftest import write_agent, write_skill


def _system(request: Request) -> Reply:
    """A model that answers with the system prompt it was sent."""
    return Reply(content=str(request.messages[0]["content"]))


class Live:
    def __init__(self, session: Session, events: list[LoopEvent]) -> None:
        self.session = session
        self.events = events

    async def note(self, word: str, timeout: float = 10.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            found = [e.text for e in self.events if isinstance(e, Note) and word in e.text]
            if found:
                return found[-1]
            assert time.monotonic() < deadline, f"no note with {word!r}"
            await asyncio.sleep(0.01)


@pytest.fixture
async def live(tmp_path: Path) -> AsyncIterator[Live]:
    write_skill(tmp_path / "skills", "hello", description="Version one of the greeting.")
    agent = write_agent(tmp_path)
    events: list[LoopEvent] = []
    host = runtime_host(
        load_agent(agent), RuntimeSettings(home=tmp_path / "home"), model=ScriptedModel([_system] * 10)
    )
    stop = asyncio.Event()
    async with await Session.open(host, sink=events.append) as session:
        watcher = asyncio.create_task(watch_session(session, stop=stop))
        await asyncio.sleep(0.2)  # let the watcher start (as tests/watch does)
        try:
            yield Live(session, events)
        finally:
            stop.set()
            await watcher
    await host.aclose()


def test_each_skill_md_is_watched(tmp_path: Path) -> None:
    skill = write_skill(tmp_path / "skills", "hello")
    assert (skill / "SKILL.md").resolve() in watched_files(load_agent(write_agent(tmp_path)))


async def test_an_edited_description_reaches_the_system_prompt_of_a_new_conversation(
    live: Live, tmp_path: Path
) -> None:
    first = await live.session.run(["hi"])
    assert "- hello: Version one of the greeting." in first.output
    await asyncio.to_thread(write_skill, tmp_path / "skills", "hello", description="Version two.")
    note = await live.note("reloaded")
    assert "SKILL.md" in note and "skills" in note
    await live.session.run(["again"])  # the swap happens at the turn boundary
    system = live.session.runtime.prompts.system("x", {})
    assert system is not None and "- hello: Version two." in system["content"]


async def test_a_broken_edit_keeps_the_last_good_skills(live: Live, tmp_path: Path) -> None:
    await asyncio.to_thread(write_skill, tmp_path / "skills", "hello", front="name: Hello\ndescription: d\n")
    note = await live.note("reload failed")
    assert "SKILL.md:2:1: name: name 'Hello' is not a skill name" in note
    answer = await live.session.run(["still?"])
    assert "- hello: Version one of the greeting." in answer.output
