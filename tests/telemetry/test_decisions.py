"""What decided a tool call, on its ``execute_tool`` span: permission rules and ``tool_pre`` hooks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from runner.testing import run_agent, text, tool_call
from tests.telemetry.helpers import Traces, write_agent

TOOLS = '''
def lookup(city: str) -> str:
    """Weather of a city."""
    return f"sunny in {city}"


def wipe() -> str:
    """Deletes everything."""
    return "wiped"


def look(event):
    """A tool_pre hook that only looks: the call goes ahead."""
    return None


def refuse_rome(event):
    if event.tool_call["arguments"].get("city") == "Rome":
        return {"deny": True, "reason": "no Rome today"}
    return None
'''

PERMISSIONS = """
tools:
  - python: $TOOLS
permissions:
  allow: ["lookup(city=Paris)"]
  deny: ["lookup(city=Rome)"]
  ask: ["wipe"]
"""


def _events(span: ReadableSpan, name: str) -> list[dict[str, Any]]:
    return [dict(e.attributes or {}) for e in span.events if e.name == name]


def _tool_spans(traces: Traces, name: str) -> list[ReadableSpan]:
    return sorted(traces.named(f"execute_tool {name}"), key=lambda s: s.start_time or 0)


async def test_permission_decisions_are_events_on_the_tool_span(tmp_path: Path, traces: Traces) -> None:
    path = write_agent(tmp_path, PERMISSIONS, TOOLS)
    script = [
        tool_call("lookup", city="Paris"),
        tool_call("lookup", city="Rome"),
        tool_call("lookup", city="Oslo"),
        tool_call("wipe"),
        text("Done."),
    ]
    run = await run_agent(path, "Go.", script=script, yes=True)
    assert run.tool_results[1] == "Denied by the permissions rule 'lookup(city=Rome)'."
    paris, rome, oslo = _tool_spans(traces, "lookup")
    (wipe,) = _tool_spans(traces, "wipe")
    assert _events(paris, "runner.permission") == [
        {
            "gen_ai.tool.name": "lookup",
            "runner.permission.decision": "allow",
            "runner.permission.rule": "lookup(city=Paris)",
        }
    ]
    assert _events(rome, "runner.permission") == [
        {
            "gen_ai.tool.name": "lookup",
            "runner.permission.decision": "deny",
            "runner.permission.rule": "lookup(city=Rome)",
        }
    ]
    assert _events(oslo, "runner.permission") == []  # no rule matched, nothing to confirm: no decision
    assert _events(wipe, "runner.permission") == [
        {
            "gen_ai.tool.name": "wipe",
            "runner.permission.decision": "ask",
            "runner.permission.rule": "wipe",
            "runner.permission.answer": "allow",  # --yes
        }
    ]


async def test_an_ask_nobody_can_answer_is_recorded_as_denied(tmp_path: Path, traces: Traces) -> None:
    path = write_agent(tmp_path, PERMISSIONS, TOOLS)
    run = await run_agent(path, "Go.", script=[tool_call("wipe"), text("Not allowed.")])
    assert "needs the user's confirmation" in run.tool_results[0]
    (wipe,) = _tool_spans(traces, "wipe")
    (event,) = _events(wipe, "runner.permission")
    assert (event["runner.permission.decision"], event["runner.permission.answer"]) == ("ask", "deny")


async def test_tool_pre_hook_allow_and_deny_are_events_on_the_tool_span(
    tmp_path: Path, traces: Traces
) -> None:
    body = """
    tools:
      - python: $TOOLS
    hooks:
      tool_pre:
        - python: $TOOLS:look
        - python: $TOOLS:refuse_rome
    """
    path = write_agent(tmp_path, body, TOOLS)
    script = [tool_call("lookup", city="Paris"), tool_call("lookup", city="Rome"), text("Done.")]
    run = await run_agent(path, "Go.", script=script)
    assert run.tool_results == ["sunny in Paris", "Denied by a hook: no Rome today"]
    paris, rome = _tool_spans(traces, "lookup")
    assert _events(paris, "runner.hook") == [
        {"runner.hook.event": "tool_pre", "runner.hook.decision": "allow"}
    ]
    assert _events(rome, "runner.hook") == [
        {
            "runner.hook.event": "tool_pre",
            "runner.hook.decision": "deny",
            "runner.hook.reason": "no Rome today",
        }
    ]
    assert _events(paris, "runner.permission") == []  # no rules: the hooks decided alone
    agent = traces.one("invoke_agent tester")
    assert _events(agent, "runner.hook") == []  # the tool's decisions are on the tool's span


async def test_other_hooks_that_decide_nothing_add_no_event(tmp_path: Path, traces: Traces) -> None:
    body = """
    tools:
      - python: $TOOLS
    hooks:
      turn_pre:
        - python: $TOOLS:look
      tool_post:
        - python: $TOOLS:look
    """
    path = write_agent(tmp_path, body, TOOLS)
    await run_agent(path, "Go.", script=[tool_call("lookup", city="Paris"), text("Done.")])
    assert all(e.name != "runner.hook" for s in traces.spans for e in s.events)
