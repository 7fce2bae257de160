"""Limits and budgets (SPEC sections 5 and 9): repeats, steps, tokens, cost, time, calls, turns, queue."""

from __future__ import annotations

from runner.models.base import Request, Usage
from runner.session.events import Note
from runner.testing import text, tool_call, tool_calls

TOOLS = """
import asyncio


def add(a: int, b: int) -> int:
    \"\"\"Add two numbers.\"\"\"
    return a + b


async def hang() -> str:
    \"\"\"Never finish.\"\"\"
    await asyncio.sleep(30)
    return "late"
"""

QUEUE_HOOKS = """
STEPS = []


def three(event):
    return {"messages": ["first", "second", "third"]}


def count_step(event):
    STEPS.append(event.step)
"""


def counting_calls(request: Request) -> object:
    """A step that calls ``add`` with new arguments every time (never a repeat)."""
    return tool_call("add", a=len(request.messages), b=1)


async def test_repeat_gets_a_note_then_the_next_repeat_stops_the_turn(agent, drive, assert_valid_history):
    spec = agent("limits:\n  max_repeat: 2\n", tools=TOOLS)
    script = [tool_call("add", a=1, b=1) for _ in range(3)]
    run = await drive(spec, script, "loop")
    results = [m["content"] for m in run.tool_results()]
    assert results[0] == "2"
    assert results[1].startswith("2\n\n[runner] You have called add 2 times with the same arguments")
    assert "Change course" in results[1]
    assert "Not executed" in results[2] and "the turn stops" in results[2]
    assert run.result.reason == "repeat"
    assert run.result.limit is not None and run.result.limit.limit == "max_repeat"
    assert len(run.requests) == 3
    assert_valid_history(run.history)
    assert run.history[-1]["role"] == "user" and "max_repeat" in run.history[-1]["content"]


async def test_identical_calls_within_one_reply_count_once(agent, drive):
    spec = agent("limits:\n  max_repeat: 2\n", tools=TOOLS)
    four = tool_calls(*[("add", {"a": 1, "b": 1})] * 4)  # four roll_die() at once: not a loop
    run = await drive(spec, [four, text("done")], "roll")
    assert run.result.reason == "done"
    assert [m["content"] for m in run.tool_results()] == ["2"] * 4


async def test_repeat_counts_restart_with_each_turn(agent, drive):
    spec = agent("limits:\n  max_repeat: 2\n", tools=TOOLS)
    script = [tool_call("add", a=1, b=1), text("one"), tool_call("add", a=1, b=1), text("two")]
    run = await drive(spec, script, "first", "second")
    assert [r.reason for r in run.results] == ["done", "done"]
    assert all("[runner]" not in m["content"] for m in run.tool_results())


async def test_max_steps_ends_the_turn_with_a_note_and_every_call_answered(
    agent, drive, assert_valid_history
):
    spec = agent("limits:\n  max_steps: 3\n", tools=TOOLS)
    run = await drive(spec, [counting_calls] * 10, "never stop")
    assert run.result.reason == "max_steps"
    assert run.result.steps == 3
    assert len(run.requests) == 3
    assert run.result.limit is not None and run.result.limit.limit == "max_steps"
    assert run.history[-1] == {
        "role": "user",
        "content": "[runner] The turn was stopped: it reached limits.max_steps (3 steps).",
    }
    assert len(run.tool_results()) == 3
    assert_valid_history(run.history)
    assert any(e["event"] == "limit" for e in run.transcript_events())


async def test_step_pre_hooks_fire_only_for_steps_that_run(agent, drive):
    body = "limits:\n  max_steps: 2\nhooks:\n  step_pre:\n    - python: $HOOKS:count_step\n"
    spec = agent(body, tools=TOOLS, hooks=QUEUE_HOOKS)
    run = await drive(spec, [counting_calls] * 5, "never stop")
    assert run.result.reason == "max_steps"
    assert agent.module("hooks").STEPS == [1, 2]


async def test_max_tokens_stops_before_the_step_that_would_exceed_it(agent, drive, assert_valid_history):
    spec = agent("limits:\n  max_tokens: 100\n", tools=TOOLS)
    usage = Usage(prompt_tokens=50, completion_tokens=10, total_tokens=60)
    script = [tool_calls(("add", {"a": i, "b": 1}), usage=usage) for i in range(5)]
    run = await drive(spec, script, "spend")
    assert run.result.reason == "limit"
    assert run.result.limit is not None and run.result.limit.limit == "max_tokens"
    assert len(run.requests) == 2
    assert run.session.budget.usage.total_tokens == 120
    assert "120 tokens" in run.history[-1]["content"]
    assert_valid_history(run.history)
    [event] = run.transcript_events("limit")
    assert event["data"]["reason"] == "limit"


async def test_max_cost_usd_stops_the_turn(agent, drive):
    spec = agent("limits:\n  max_cost_usd: 0.03\n", tools=TOOLS)
    usage = Usage(prompt_tokens=5, completion_tokens=5, total_tokens=10, cost_usd=0.02)
    script = [tool_calls(("add", {"a": i, "b": 1}), usage=usage) for i in range(5)]
    run = await drive(spec, script, "spend")
    assert run.result.reason == "limit"
    assert run.result.limit is not None and run.result.limit.limit == "max_cost_usd"
    assert len(run.requests) == 2


async def test_session_timeout_stops_a_slow_tool_and_answers_its_call(agent, drive, assert_valid_history):
    spec = agent("limits:\n  timeout_s: 0.3\n", tools=TOOLS)
    run = await drive(spec, [tool_call("hang"), text("never")], "wait")
    assert run.result.reason == "limit"
    assert run.result.limit is not None and run.result.limit.limit == "timeout_s"
    [result] = run.tool_results()
    assert result["content"].startswith("Not executed: the session ran 0.3 s")
    assert len(run.requests) == 1
    assert_valid_history(run.history)


async def test_max_tool_calls_refuses_the_call_over_the_bound(agent, drive, assert_valid_history):
    spec = agent("limits:\n  max_tool_calls: 3\n", tools=TOOLS)
    script = [
        tool_calls(("add", {"a": 1, "b": 1}), ("add", {"a": 2, "b": 1})),
        tool_calls(("add", {"a": 3, "b": 1}), ("add", {"a": 4, "b": 1})),
        text("never asked"),
    ]
    run = await drive(spec, script, "count")
    contents = [m["content"] for m in run.tool_results()]
    assert contents[:3] == ["2", "3", "4"]
    assert contents[3].startswith("Not executed: the session reached limits.max_tool_calls (3)")
    assert run.result.reason == "limit"
    assert run.result.limit is not None and run.result.limit.limit == "max_tool_calls"
    assert len(run.requests) == 2
    assert_valid_history(run.history)


async def test_max_turns_refuses_the_turn_over_the_bound_without_a_model_call(agent, drive):
    spec = agent("limits:\n  max_turns: 2\n", tools=TOOLS)
    run = await drive(spec, [text("one"), text("two")], "a", "b", "c")
    assert [r.reason for r in run.results] == ["done", "done", "limit"]
    assert run.results[2].limit is not None and run.results[2].limit.limit == "max_turns"
    assert len(run.requests) == 2
    assert not any(m.get("content") == "c" for m in run.history)


async def test_queued_hook_messages_over_max_queue_are_dropped_with_a_note(agent, drive):
    spec = agent(
        "limits:\n  max_queue: 1\n  max_turns: 2\nhooks:\n  turn_post:\n    - python: $HOOKS:three\n",
        tools=TOOLS,
        hooks=QUEUE_HOOKS,
    )
    run = await drive(spec, [text("ok"), text("again")], "go")
    # The one message the queue had room for ran as the next turn; nothing is left behind.
    assert [m["content"] for m in run.history if m["role"] == "user"] == ["go", "first"]
    assert list(run.session.queue) == []
    drops = [n for n in run.notes() if "queue is full" in n.text]
    assert len(drops) == 2
    assert all(n.level == "warning" for n in drops)
    events = run.transcript_events("queue_drop")
    assert [e["data"]["reason"] for e in events] == ["max_queue", "max_queue"] + ["max_turns"] * 3
    assert run.result.exit_code() == 3


async def test_queued_hook_messages_over_max_turns_are_dropped_with_a_note(agent, drive):
    spec = agent(
        "limits:\n  max_turns: 2\nhooks:\n  loop_continue:\n    - python: $HOOKS:three\n",
        tools=TOOLS,
        hooks=QUEUE_HOOKS,
    )
    run = await drive(spec, [text("ok"), text("again")], "go")
    assert [m["content"] for m in run.history if m["role"] == "user"] == ["go", "first"]
    assert list(run.session.queue) == []
    drops = [n for n in run.notes() if isinstance(n, Note) and "max_turns" in n.text]
    assert len(drops) == 5
    assert all(n.level == "warning" for n in drops)
    events = run.transcript_events("queue_drop")
    assert [e["data"]["reason"] for e in events] == ["max_turns"] * 5
    assert run.result.exit_code() == 3
