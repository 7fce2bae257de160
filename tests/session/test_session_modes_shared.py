"""Hooks, permissions, limits and transcripts behave the same in the three function-calling modes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runner.testing import text, tool_calls
from tests.session.conftest import Agents, Driver, Run

MODES = ["native", "inline", "prompt"]

TOOLS = '''
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def fail(reason: str) -> str:
    """Always fails."""
    raise ValueError(reason)
'''

HOOKS = """
def deny_big(event):
    if event.tool_call["arguments"].get("a", 0) > 100:
        return {"deny": True, "reason": "numbers over 100 are not allowed"}


def shout(event):
    return {"output": event.output + "!!!"}
"""


def script_for(mode: str, calls: list[tuple[str, dict[str, Any]]], final: str) -> list[Any]:
    """The same tool use, written the way each mode's model would write it."""
    if mode == "native":
        return [tool_calls(*calls), text(final)]
    if mode == "inline":
        blocks = "".join(
            f"<tool_call>{json.dumps({'name': n, 'arguments': a})}</tool_call>" for n, a in calls
        )
        return [text(blocks), text(final)]
    selection = {"tool_calls": [{"name": n, "parameters": a} for n, a in calls]}
    return [text(json.dumps(selection)), text(final)]


def seen_results(run: Run) -> str:
    """What the model was told about the tool calls, whatever the mode."""
    last = run.requests[-1].messages
    return "\n".join(str(m.get("content")) for m in last if m["role"] in ("tool", "user"))


def body(mode: str, extra: str = "") -> str:
    return f"model: openai/scripted\nfunction_calling: {mode}\n{extra}"


@pytest.mark.parametrize("mode", MODES)
async def test_a_failing_tool_is_an_error_the_model_reads(agent: Agents, drive: Driver, mode: str) -> None:
    spec = agent(body(mode), tools=TOOLS)
    run = await drive(spec, script_for(mode, [("fail", {"reason": "disk on fire"})], "sorry"), "go")
    assert run.result.output == "sorry"
    assert "disk on fire" in seen_results(run)


@pytest.mark.parametrize("mode", MODES)
async def test_a_permission_deny_is_returned_as_the_result(agent: Agents, drive: Driver, mode: str) -> None:
    spec = agent(body(mode, "permissions:\n  deny: ['add(a=13)']\n"), tools=TOOLS)
    run = await drive(
        spec, script_for(mode, [("add", {"a": 13, "b": 1}), ("add", {"a": 1, "b": 1})], "ok"), "go"
    )
    results = seen_results(run)
    assert "Denied by the permissions rule 'add(a=13)'" in results
    assert "2" in results  # the other call ran


@pytest.mark.parametrize("mode", MODES)
async def test_tool_pre_and_tool_post_hooks_apply(agent: Agents, drive: Driver, mode: str) -> None:
    extra = "hooks:\n  tool_pre:\n    - python: $HOOKS:deny_big\n  tool_post:\n    - python: $HOOKS:shout\n"
    spec = agent(body(mode, extra), tools=TOOLS, hooks=HOOKS)
    run = await drive(
        spec, script_for(mode, [("add", {"a": 500, "b": 1}), ("add", {"a": 2, "b": 3})], "ok"), "go"
    )
    results = seen_results(run)
    assert "numbers over 100 are not allowed" in results
    assert "5!!!" in results


@pytest.mark.parametrize("mode", MODES)
async def test_max_tool_calls_stops_and_every_call_is_answered(
    agent: Agents, drive: Driver, mode: str
) -> None:
    spec = agent(body(mode, "limits:\n  max_tool_calls: 1\n"), tools=TOOLS)
    run = await drive(
        spec, script_for(mode, [("add", {"a": 1, "b": 1}), ("add", {"a": 2, "b": 2})], "x"), "go"
    )
    assert run.result.reason == "limit" and run.result.limit is not None
    assert run.result.limit.limit == "max_tool_calls"
    limit_events = [e for e in run.transcript().events() if e["event"] == "limit"]
    assert limit_events and "max_tool_calls" in limit_events[0]["data"]["note"]


@pytest.mark.parametrize("mode", MODES)
async def test_the_transcript_records_the_turn(agent: Agents, drive: Driver, mode: str) -> None:
    spec = agent(body(mode), tools=TOOLS)
    run = await drive(spec, script_for(mode, [("add", {"a": 4, "b": 5})], "nine"), "4+5?")
    transcript = run.transcript()
    assert transcript.header["agent"] == "tester"
    roles = [m["role"] for m in transcript.messages()]
    assert roles[0] == "user" or "user" in roles
    assert transcript.messages()[-1] == {"role": "assistant", "content": "nine"}
    assert "9" in json.dumps(transcript.messages())
