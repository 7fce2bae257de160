"""Runtimes built once and shared; a reload swaps one in while sessions in flight finish on the old."""

from __future__ import annotations

import asyncio
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest

from runner.agentfile import load_agent
from runner.agentfile.config import AgentConfig
from runner.errors import ConfigErrors
from runner.runtime import RuntimeSettings
from runner.session import Session, runtime_host
from runner.testing import ScriptedModel, text, tool_call

TOOLS = """
import asyncio

GATE = asyncio.Event()
OPENED = []


async def wait() -> str:
    \"\"\"Wait until the test lets the call finish.\"\"\"
    await GATE.wait()
    return "waited"


def version() -> int:
    \"\"\"Say which version of this module answers.\"\"\"
    return {version}
"""


class Files:
    """An agent file and its tool module in one folder."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.module = f"host_tools_{uuid.uuid4().hex[:10]}"
        self.path = root / "agent.yaml"

    def write(self, *, version: int = 1, system: str = "Version one.", broken: bool = False) -> AgentConfig:
        (self.root / f"{self.module}.py").write_text(textwrap.dedent(TOOLS).format(version=version))
        extra = "  - python: no_such_module_anywhere\n" if broken else ""
        self.path.write_text(
            f"version: 1\nname: hosted\nmodel: openai/scripted\nprompts:\n  system: {system}\n"
            f"tools:\n  - python: {self.module}\n{extra}"
        )
        if broken:
            return _unchecked(self.path)
        return load_agent(self.path, env={})

    def tools_module(self) -> Any:
        return sys.modules[self.module]


def _unchecked(path: Path) -> AgentConfig:
    """The file's configuration without the import check (a module that fails only when opened)."""
    from runner.agentfile.files import config_from_file, load_file

    return config_from_file(load_file(path), None)


@pytest.fixture
def files(tmp_path: Path) -> Files:
    return Files(tmp_path)


async def test_sessions_share_one_runtime_and_its_tools(files: Files, tmp_path: Path) -> None:
    model = ScriptedModel([text("one"), text("two")])
    host = runtime_host(files.write(), RuntimeSettings(home=tmp_path / "home"), model=model)
    first = await Session.open(host, follow=False)
    second = await Session.open(host, follow=False)
    assert first.runtime is second.runtime
    assert first.runtime.registry.get("version") is second.runtime.registry.get("version")
    assert [(await s.run(["hi"])).output for s in (first, second)] == ["one", "two"]
    await first.close()
    await second.close()
    await host.aclose()
    assert model.closed


async def test_a_reload_lands_while_a_session_runs_it_finishes_on_the_old_runtime(
    files: Files, tmp_path: Path
) -> None:
    def answer(request: Any) -> Any:
        last = request.messages[-1]
        if last["role"] == "tool":
            return text("old done" if last["content"] == "waited" else "new done")
        return tool_call("wait" if last["content"] == "wait for it" else "version")

    model = ScriptedModel([answer] * 4)
    host = runtime_host(files.write(), RuntimeSettings(home=tmp_path / "home"), model=model)
    old = await Session.open(host, follow=False)
    running = asyncio.create_task(old.run(["wait for it"]))
    while not model.requests:
        await asyncio.sleep(0.001)
    await asyncio.sleep(0.01)
    old_runtime = old.runtime
    gate = files.tools_module().GATE  # the event the old call waits on (a reload re-runs the module)
    new_runtime = await host.reload(files.write(version=2, system="Version two."))
    assert new_runtime is not None and new_runtime is not old_runtime and host.current is new_runtime
    assert "prompts" in new_runtime.changes
    fresh = await Session.open(host, follow=False)
    assert fresh.runtime is new_runtime
    result = await fresh.run(["which version?"])
    assert result.output == "new done"
    assert fresh.history[2]["content"] == "2"  # the edited module answered
    assert model.requests[1].messages[0]["content"] == "Version two."
    gate.set()
    old_result = await running
    assert old_result.output == "old done"
    assert model.requests[0].messages[0]["content"] == "Version one."
    await old.close()  # the old runtime is closed now: nobody holds it
    await fresh.close()
    await host.aclose()


async def test_a_runtime_that_cannot_open_on_reload_keeps_the_old_one(files: Files, tmp_path: Path) -> None:
    model = ScriptedModel([text("still here")])
    host = runtime_host(files.write(), RuntimeSettings(home=tmp_path / "home"), model=model)
    first = await Session.open(host, follow=False)
    before = host.current
    with pytest.raises(ConfigErrors) as caught:
        await host.reload(files.write(broken=True))
    assert "tools[1]" in str(caught.value) and "no_such_module_anywhere" in str(caught.value)
    assert host.current is before
    again = await Session.open(host, follow=False)
    assert again.runtime is before
    assert (await again.run(["hi"])).output == "still here"
    for session in (first, again):
        await session.close()
    await host.aclose()


async def test_a_following_session_moves_to_the_new_runtime_at_its_next_turn(
    files: Files, tmp_path: Path
) -> None:
    model = ScriptedModel([text("a"), text("b")])
    host = runtime_host(files.write(), RuntimeSettings(home=tmp_path / "home"), model=model)
    session = await Session.open(host)
    await session.run(["one"])
    changes = await session.reload(files.write(version=3, system="Version three."))
    assert changes == "prompts, tool code changed"  # version() returns 3 now
    await session.run(["two"])
    assert model.requests[1].messages[0]["content"] == "Version three."
    assert [m["content"] for m in model.requests[1].messages[1:]] == ["one", "a", "two"]
    await session.close()
    await host.aclose()
