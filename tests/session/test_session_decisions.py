"""Decisions as values: when several reasons end one step, one documented precedence picks the reason."""

from __future__ import annotations

from runner.errors import LimitReached
from runner.session.decisions import PRECEDENCE, EndTurn, decide
from runner.testing import text, tool_calls

TOOLS = """
import asyncio


async def slow(n: int) -> int:
    \"\"\"Answer after a while (so the other calls of the step are gated first).\"\"\"
    await asyncio.sleep(0.05)
    return n
"""

HOOKS = """
def stop_after(event):
    if event.tool_call["arguments"]["n"] == 1:
        return {"stop": True, "reason": "one is enough"}
"""


def test_the_strongest_reason_wins_whatever_the_order() -> None:
    limit = EndTurn.for_limit(
        LimitReached("the session reached limits.max_tool_calls (1)", limit="max_tool_calls")
    )
    hook = EndTurn("hook", "one is enough")
    declined = EndTurn("declined", "the user declined slow")
    assert decide([hook, None, limit]) is limit
    assert decide([limit, hook]) is limit
    assert decide([declined, hook]) is declined
    assert decide([None, None]) is None
    assert PRECEDENCE[0] == "interrupted" and PRECEDENCE[-1] == "done"


async def test_a_limit_and_a_tool_post_stop_in_one_step_end_with_the_limit(
    agent, drive, assert_valid_history
):
    """Parallel calls: the first's tool_post hook stops, the second is over max_tool_calls."""
    spec = agent(
        "limits:\n  max_tool_calls: 1\nhooks:\n  tool_post:\n    - python: $HOOKS:stop_after\n",
        tools=TOOLS,
        hooks=HOOKS,
    )
    script = [tool_calls(("slow", {"n": 1}), ("slow", {"n": 2}), ("slow", {"n": 3})), text("never")]
    run = await drive(spec, script, "go")
    assert run.result.reason == "limit"  # a limit (exit 3) beats a hook's stop (exit 0)
    assert run.result.limit is not None and run.result.limit.limit == "max_tool_calls"
    assert run.result.exit_code() == 3
    contents = [m["content"] for m in run.tool_results()]
    assert contents[0] == "1"
    assert all(
        c.startswith("Not executed: the session reached limits.max_tool_calls (1)") for c in contents[1:]
    )
    assert_valid_history(run.history)  # every call answered
    assert len(run.requests) == 1
    [event] = run.transcript_events("limit")
    assert event["data"]["note"] == "the session reached limits.max_tool_calls (1)"


async def test_a_tool_post_stop_alone_ends_the_turn_with_exit_0(agent, drive, assert_valid_history):
    spec = agent("hooks:\n  tool_post:\n    - python: $HOOKS:stop_after\n", tools=TOOLS, hooks=HOOKS)
    script = [tool_calls(("slow", {"n": 1}), ("slow", {"n": 2})), text("never")]
    run = await drive(spec, script, "go")
    assert run.result.reason == "hook" and run.result.exit_code() == 0
    assert [m["content"] for m in run.tool_results()] == [
        "1",
        "2",
    ]  # both ran: the stop ends the turn after them
    assert_valid_history(run.history)
