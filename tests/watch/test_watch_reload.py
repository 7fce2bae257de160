"""Hot reload through the session API and real file writes: the conversation survives every edit."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from runner.agentfile import load_agent
from runner.models.base import Reply, Request
from runner.runtime import RuntimeSettings
from runner.session import Session, runtime_host
from runner.session.events import LoopEvent, Note
from runner.store.transcript import read_transcript
from runner.testing import ScriptedModel
from runner.watch import watch_session, watched_files

TOOLS_V1 = '''
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
'''

TOOLS_V2 = (
    TOOLS_V1
    + '''

def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b
'''
)


def agent_text(system: str, *, extra: str = "") -> str:
    return (
        "version: 1\nname: live\nmodel: openai/scripted\n"
        f'prompts:\n  system: {{file: prompts/system.md}}\n  user: "{{{{ input }}}}"\n'
        f"tools:\n  - python: live_tools\n{extra}"
    ) + f"# {system}\n"


def describe(request: Request) -> Reply:
    """A model that says which system prompt and tools it was given."""
    names = sorted(t["function"]["name"] for t in request.tools or [])
    return Reply(content=json.dumps({"system": request.messages[0]["content"], "tools": names}))


class Harness:
    """A session with a watcher, and helpers to wait for what the watcher reports."""

    def __init__(self, session: Session, events: list[LoopEvent]) -> None:
        self.session = session
        self.events = events

    def notes(self, word: str) -> list[str]:
        return [e.text for e in self.events if isinstance(e, Note) and word in e.text]

    async def wait_note(self, word: str, count: int, timeout: float = 10.0) -> str:
        deadline = time.monotonic() + timeout
        while len(self.notes(word)) < count:
            assert time.monotonic() < deadline, f"no note with {word!r}; notes: {self.notes('')}"
            await asyncio.sleep(0.01)
        return self.notes(word)[count - 1]

    async def ask(self, text: str) -> dict[str, Any]:
        result = await self.session.run([text])
        value: dict[str, Any] = json.loads(result.output)
        return value


@pytest.fixture
async def live(tmp_path: Path) -> AsyncIterator[tuple[Harness, Path]]:
    folder = tmp_path / "agent"
    (folder / "prompts").mkdir(parents=True)
    (folder / "prompts" / "system.md").write_text("You are version one.")
    (folder / "live_tools.py").write_text(TOOLS_V1)
    path = folder / "agent.yaml"
    path.write_text(agent_text("v1"))
    events: list[LoopEvent] = []
    model = ScriptedModel([describe] * 20)
    stop = asyncio.Event()
    host = runtime_host(load_agent(path), RuntimeSettings(home=tmp_path / "home"), model=model)
    async with await Session.open(host, sink=events.append) as session:
        watcher = asyncio.create_task(watch_session(session, stop=stop))
        await asyncio.sleep(
            0.2
        )  # let the watcher start (it needs no event: edits before this just count as one)
        try:
            yield Harness(session, events), path
        finally:
            stop.set()
            await watcher
    await host.aclose()


async def test_watched_files_cover_file_template_and_tool_module(tmp_path: Path) -> None:
    folder = tmp_path / "a"
    (folder / "prompts").mkdir(parents=True)
    (folder / "prompts" / "system.md").write_text("x")
    (folder / "live_tools.py").write_text(TOOLS_V1)
    (folder / "agent.yaml").write_text(agent_text("v1"))
    files = watched_files(load_agent(folder / "agent.yaml"))
    assert files == {
        (folder / "agent.yaml").resolve(),
        (folder / "prompts" / "system.md").resolve(),
        (folder / "live_tools.py").resolve(),
    }


async def write(path: Path, text: str) -> None:
    await asyncio.to_thread(path.write_text, text)


async def test_edit_prompt_add_tool_break_and_fix_keep_the_conversation(live: tuple[Harness, Path]) -> None:
    harness, path = live
    first = await harness.ask("hello")
    assert first == {"system": "You are version one.", "tools": ["add"]}

    await write(path.parent / "prompts" / "system.md", "You are version two.")
    note = await harness.wait_note("reloaded", 1)
    assert "prompts" in note
    assert (await harness.ask("again"))["system"] == "You are version two."

    await write(path.parent / "live_tools.py", TOOLS_V2)
    note = await harness.wait_note("reloaded", 2)
    assert "tools +1 -0" in note
    assert (await harness.ask("tools?"))["tools"] == ["add", "multiply"]

    await write(path, "version: 1\nname: live\nmodel: [unclosed\n")
    error = await harness.wait_note("reload failed", 1)
    assert "agent.yaml:4:1: YAML syntax error" in error and "keeping the last good config" in error
    assert (await harness.ask("still there?"))["tools"] == ["add", "multiply"]

    await write(path, agent_text("v3", extra="limits:\n  max_steps: 4\n"))
    note = await harness.wait_note("reloaded", 3)
    assert "limits" in note
    assert harness.session.limits.max_steps == 25  # swapped at the next turn boundary, not before
    await harness.ask("limits?")
    assert harness.session.limits.max_steps == 4

    users = [m["content"] for m in harness.session.history if m["role"] == "user"]
    assert users == ["hello", "again", "tools?", "still there?", "limits?"]
    transcript = read_transcript(harness.session.conversation.transcript.path)  # type: ignore[union-attr]
    kinds = [e["event"] for e in transcript.events() if e["event"].startswith("reload")]
    assert kinds == ["reload", "reload", "reload_failed", "reload"]


async def test_rapid_saves_are_one_reload(live: tuple[Harness, Path]) -> None:
    harness, path = live
    target = path.parent / "prompts" / "system.md"
    for i in range(5):
        target.write_text(f"You are draft {i}.")
    await harness.wait_note("reloaded", 1)
    await asyncio.sleep(0.5)  # a second reload would have arrived by now
    assert len(harness.notes("reloaded")) == 1
    assert (await harness.ask("which?"))["system"] == "You are draft 4."


async def test_broken_tool_module_keeps_the_old_tools(live: tuple[Harness, Path]) -> None:
    harness, path = live
    await write(path.parent / "live_tools.py", "def add(a: int, b: int) -> int\n    return a + b\n")
    error = await harness.wait_note("reload failed", 1)
    assert "live_tools" in error and "syntax error" in error
    assert (await harness.ask("tools?"))["tools"] == ["add"]
    tool = harness.session.runtime.registry.get("add")
    assert tool is not None


async def test_deleted_agent_file_keeps_the_session(live: tuple[Harness, Path]) -> None:
    harness, path = live
    text = path.read_text()
    await asyncio.to_thread(path.unlink)
    error = await harness.wait_note("reload failed", 1)
    assert "file not found" in error or "no such file" in error.lower()
    assert (await harness.ask("alive?"))["tools"] == ["add"]
    await write(path, text.replace("# v1", "# back"))
    await harness.wait_note("reloaded", 1)


async def test_a_change_to_tool_code_alone_says_tool_code_changed(live: tuple[Harness, Path]) -> None:
    harness, path = live
    await harness.ask("hello")
    await write(path.parent / "live_tools.py", TOOLS_V1.replace("return a + b", "return b + a"))
    note = await harness.wait_note("reloaded", 1)
    assert "tool code changed" in note and "no change" not in note
