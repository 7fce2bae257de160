"""Agents as tools: a nested session per call, usage charged to the parent, state restored."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runner.agentfile import load_agent
from runner.models.base import Reply, Request, Usage
from runner.runtime import RuntimeSettings
from runner.session.events import Note
from runner.testing import ScriptedModel, scripted_session, tool_call

TEAM = """\
version: 1
agents:
  lead:
    model: openai/scripted
    tools:
      - agent: "#helper"
  helper:
    model: openai/scripted
    description: Knows the secret word.
    tools:
      - python: team_tools
    limits:
      max_steps: 3
"""

TOOLS = '''
import os


def secret_word() -> str:
    """The secret word (and a tool that moves the current directory, to test it is restored)."""
    os.chdir("/")
    return "swordfish"
'''


def write_team(folder: Path) -> Path:
    (folder / "team_tools.py").write_text(TOOLS)
    path = folder / "team.yaml"
    path.write_text(TEAM)
    return path


async def test_agent_tool_runs_a_nested_session_and_charges_the_parent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_team(tmp_path)
    lead = load_agent(path, agent="lead")
    script = [
        tool_call("helper", input="What is the secret word?"),
        Reply(content="It is swordfish.", usage=Usage(10, 5, 15)),
    ]
    helper_script = [tool_call("secret_word"), Reply(content="swordfish", usage=Usage(7, 3, 10))]
    helper_model = ScriptedModel(helper_script)

    monkeypatch.setattr("runner.models.factory.make_model", lambda spec, **kw: helper_model)
    cwd = os.getcwd()
    events: list[object] = []
    settings = RuntimeSettings(home=tmp_path / "home")
    async with scripted_session(
        lead, ScriptedModel(script), settings=settings, sink=events.append
    ) as session:
        spec_tool = session.runtime.registry.get("helper")
        assert spec_tool is not None and spec_tool.description == "Knows the secret word."
        assert spec_tool.parameters["required"] == ["input"]
        result = await session.run(["Ask the helper."])
    assert result.output == "It is swordfish."
    tool_message = next(m for m in session.history if m["role"] == "tool")
    assert tool_message["content"] == "swordfish"
    assert helper_model.requests[0].messages[-1]["content"] == "What is the secret word?"
    assert session.budget.usage.total_tokens >= 25  # the helper's 10 tokens count too
    assert os.getcwd() == cwd  # the helper's tool moved it; the runner put it back
    assert any(isinstance(e, Note) and "[helper] → secret_word {}" in e.text for e in events)
    assert any(isinstance(e, Note) and "[helper] ← secret_word " in e.text for e in events)  # with its result
    transcripts = sorted((tmp_path / "home" / "sessions").glob("*.jsonl"))
    assert len(transcripts) == 2  # the nested session keeps its own transcript


async def test_agents_calling_each_other_stop_at_the_depth_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "loop.yaml").write_text(
        "version: 1\nagents:\n  ping:\n    model: openai/scripted\n    tools:\n      - agent: '#pong'\n"
        "  pong:\n    model: openai/scripted\n    tools:\n      - agent: '#ping'\n"
    )
    spec = load_agent(tmp_path / "loop.yaml", agent="ping")

    def call_other(request: Request) -> Reply:
        names = [t["function"]["name"] for t in request.tools or []]
        already = any(m["role"] == "tool" for m in request.messages)
        if already:
            return Reply(content="gave up")
        return tool_call(names[0], input="again")

    shared = ScriptedModel([call_other] * 40)
    monkeypatch.setattr("runner.models.factory.make_model", lambda spec, **kw: shared)
    async with scripted_session(spec, shared, settings=RuntimeSettings(home=tmp_path / "home")) as session:
        result = await session.run(["go"])
    assert result.output == "gave up"
    deepest = [
        r for r in shared.requests if any("nested more than" in str(m.get("content")) for m in r.messages)
    ]
    assert deepest, "the depth limit was never reported to a model"


def test_unknown_team_member_is_a_config_error(tmp_path: Path) -> None:
    from runner.agentfile.files import check_file

    (tmp_path / "t.yaml").write_text(
        "version: 1\nagents:\n  a:\n    model: x/y\n    tools:\n      - agent: '#helpr'\n"
        "  helper:\n    model: x/y\n"
    )
    errors = check_file(tmp_path / "t.yaml")
    assert any("no agent named 'helpr'" in e.message and "#helper" in e.message for e in errors)
