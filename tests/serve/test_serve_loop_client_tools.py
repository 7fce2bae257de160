"""The loop's side of client tools (``RunOptions.client_tools``), driven in process by a ScriptedModel."""

from __future__ import annotations

import json
import textwrap
import uuid
from pathlib import Path
from typing import Any

from runner.agentfile import load_agent
from runner.agentfile.config import AgentConfig
from runner.runtime import RuntimeSettings
from runner.session import RunOptions
from runner.session.events import LoopEvent, ToolFinished
from runner.testing import ScriptedModel, scripted_session, text, tool_calls

LOOKUP = {
    "type": "function",
    "function": {
        "name": "lookup",
        "description": "Look something up on the client's side.",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
    },
}

TOOLS = '''
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
'''


def write_agent(root: Path, limits: str = "") -> AgentConfig:
    module = f"serve_loop_tools_{uuid.uuid4().hex[:10]}"
    (root / f"{module}.py").write_text(TOOLS, encoding="utf-8")
    body = f"version: 1\nname: mixer\nprompts:\n  system: Mix.\ntools:\n  - python: {module}\n"
    if limits:
        body += textwrap.dedent(limits)
    (root / "mixer.yaml").write_text(body, encoding="utf-8")
    return load_agent(root / "mixer.yaml", env={})


async def test_a_client_call_ends_the_turn_unanswered_after_the_agents_own_calls_ran(tmp_path: Path) -> None:
    spec = write_agent(tmp_path)
    model = ScriptedModel(
        [tool_calls(("add", {"a": 1, "b": 2}), ("lookup", {"q": "x"}), content="Both."), text("Done.")]
    )
    events: list[LoopEvent] = []
    config = RuntimeSettings(home=tmp_path / "home")
    options = RunOptions(client_tools=[LOOKUP])
    async with scripted_session(spec, model, settings=config, sink=events.append, options=options) as session:
        result = await session.run(["go"])
        history = list(session.history)
    assert result.reason == "client_tools"
    assert [(c.name, json.loads(c.arguments)) for c in result.client_calls] == [("lookup", {"q": "x"})]
    assert [m["role"] for m in history] == ["user", "assistant", "tool"]
    assert [c["function"]["name"] for c in history[1]["tool_calls"]] == ["add", "lookup"]
    assert history[2]["content"] == "3"
    assert [e.result.name for e in events if isinstance(e, ToolFinished)] == ["add"]  # never "unknown tool"
    assert [t["function"]["name"] for t in model.requests[0].tools or []] == ["add", "lookup"]

    # The caller runs lookup and sends its result; a new session goes on from the whole history.
    lookup_call = result.client_calls[0]
    answered = [*history, {"role": "tool", "tool_call_id": lookup_call.id, "content": "found it"}]
    async with scripted_session(spec, model, settings=config, sink=events.append, options=options) as session:
        session.conversation.restore(answered)
        assert session.conversation.needs_continuation()
        final = await session.run()
    assert (final.reason, final.output, final.client_calls) == ("done", "Done.", [])
    first, second = model.requests
    assert json.dumps(first.tools) == json.dumps(second.tools)
    assert json.dumps(first.messages[0]) == json.dumps(second.messages[0])
    assert second.messages[-1] == {"role": "tool", "tool_call_id": lookup_call.id, "content": "found it"}
    model.assert_complete()


async def test_a_stop_while_the_own_calls_run_answers_the_client_calls(tmp_path: Path) -> None:
    spec = write_agent(tmp_path, "limits:\n  max_tool_calls: 1\n")
    model = ScriptedModel([tool_calls(("add", {"a": 1, "b": 2}), ("add", {"a": 2, "b": 2}), ("lookup", {}))])
    options = RunOptions(client_tools=[LOOKUP])
    config = RuntimeSettings(home=tmp_path / "home")
    async with scripted_session(
        spec, model, settings=config, sink=lambda e: None, options=options
    ) as session:
        result = await session.run(["go"])
        history = list(session.history)
    assert result.reason == "limit" and result.client_calls == []
    results = {m["tool_call_id"]: m["content"] for m in history if m["role"] == "tool"}
    assert len(results) == 3  # every call answered: the history stays valid
    lookup_id = history[1]["tool_calls"][2]["id"]
    assert results[lookup_id].startswith("Not executed: the session reached limits.max_tool_calls")


async def test_an_agent_tool_wins_over_a_client_tool_of_the_same_name(tmp_path: Path) -> None:
    spec = write_agent(tmp_path)
    clash: dict[str, Any] = {
        "type": "function",
        "function": {"name": "add", "parameters": {"type": "object"}},
    }
    model = ScriptedModel([tool_calls(("add", {"a": 1, "b": 1})), text("2")])
    config = RuntimeSettings(home=tmp_path / "home", write_transcript=False)
    options = RunOptions(client_tools=[clash, LOOKUP])
    async with scripted_session(
        spec, model, settings=config, sink=lambda e: None, options=options
    ) as session:
        result = await session.run(["1+1"])
    assert (result.reason, result.output) == ("done", "2")
    assert [t["function"]["name"] for t in model.requests[0].tools or []] == ["add", "lookup"]
    assert model.requests[0].tools[0]["function"]["description"] == "Add two integers."  # type: ignore[index]
