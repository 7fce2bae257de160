"""Steps (SPEC sections 5 and 7, Execution): structural stop, tool calls in order and in parallel,
bad calls and failing tools turned into results the model reads."""

from __future__ import annotations

import itertools
import json
import time
from typing import Any

import pytest

from runner.models.base import Reply, Request, ToolCall, ToolCallReady, Usage
from runner.session.events import (
    AssistantMessage,
    StepStarted,
    TextChunk,
    ToolFinished,
    ToolStarted,
    TurnEnded,
    UsageUpdate,
)
from runner.testing import ScriptedModel, text, tool_call, tool_calls

TOOLS = """
import asyncio
import time

FINISHED = []


def add(a: int, b: int) -> int:
    \"\"\"Add two numbers.\"\"\"
    return a + b


def ping() -> str:
    \"\"\"Answer pong.\"\"\"
    return "pong"


async def slow(tag: str) -> str:
    \"\"\"Finish late.\"\"\"
    await asyncio.sleep(0.3)
    FINISHED.append(tag)
    return "slow " + tag


async def fast(tag: str) -> str:
    \"\"\"Finish at once.\"\"\"
    FINISHED.append(tag)
    return "fast " + tag


def nap(tag: str, seconds: float = 0.2) -> dict:
    \"\"\"Sleep in a thread.\"\"\"
    start = time.perf_counter()
    time.sleep(seconds)
    return {"tag": tag, "start": start, "end": time.perf_counter()}


async def anap(tag: str, seconds: float = 0.2) -> dict:
    \"\"\"Sleep on the event loop.\"\"\"
    start = time.perf_counter()
    await asyncio.sleep(seconds)
    return {"tag": tag, "start": start, "end": time.perf_counter()}


def stamp(tag: str) -> float:
    \"\"\"When the tool started.\"\"\"
    return time.perf_counter()


def boom() -> str:
    \"\"\"Fail.\"\"\"
    raise ValueError("the disk is on fire")


async def hang() -> str:
    \"\"\"Never finish.\"\"\"
    await asyncio.sleep(30)
    return "late"


def huge() -> str:
    \"\"\"Too much output.\"\"\"
    return "0123456789" * 500


def weird():
    \"\"\"Return something JSON cannot carry.\"\"\"
    return object()
"""


def raw_call(name: str, arguments: str, call_id: str = "call_raw") -> Reply:
    """A reply with one tool call whose arguments are sent exactly as given."""
    return Reply(content=None, tool_calls=(ToolCall(call_id, name, arguments),), finish_reason="tool_calls")


def result_of(run: Any, call_id: str) -> str:
    [message] = [m for m in run.history if m.get("tool_call_id") == call_id]
    return str(message["content"])


async def test_text_reply_without_tool_calls_ends_the_turn(agent, drive):
    spec = agent(tools=TOOLS)
    run = await drive(spec, [text("Hello there.")], "hi")
    assert run.result.reason == "done"
    assert run.result.output == "Hello there."
    assert run.result.steps == 1
    assert len(run.requests) == 1
    assert run.history[-1] == {"role": "assistant", "content": "Hello there."}


async def test_tool_results_are_fed_back_until_the_model_stops(agent, drive, assert_valid_history):
    spec = agent(tools=TOOLS)
    script = [tool_call("add", a=1, b=2), tool_call("add", a=3, b=4), text("3 and 7")]
    run = await drive(spec, script, "add things")
    assert run.result.reason == "done"
    assert run.result.steps == 3
    assert [m["content"] for m in run.tool_results()] == ["3", "7"]
    assert run.requests[1].messages[-1]["content"] == "3"
    assert run.requests[2].messages[-1]["content"] == "7"
    assert_valid_history(run.history)


async def test_results_follow_call_order_when_the_second_call_finishes_first(agent, drive):
    spec = agent(tools=TOOLS)
    reply = tool_calls(("slow", {"tag": "one"}), ("fast", {"tag": "two"}))
    run = await drive(spec, [reply, text("done")], "go")
    assert agent.module().FINISHED == ["two", "one"]
    assistant = next(m for m in run.history if m.get("tool_calls"))
    ids = [call["id"] for call in assistant["tool_calls"]]
    results = run.tool_results()
    assert [m["tool_call_id"] for m in results] == ids
    assert [m["content"] for m in results] == ["slow one", "fast two"]


@pytest.mark.parametrize("tool", ["nap", "anap"], ids=["sync", "async"])
async def test_tool_calls_of_one_message_run_in_parallel(agent, drive, tool):
    spec = agent(tools=TOOLS)
    reply = tool_calls(*[(tool, {"tag": str(i)}) for i in range(4)])
    run = await drive(spec, [reply, text("done")], "go")
    spans = [json.loads(m["content"]) for m in run.tool_results()]
    assert [s["tag"] for s in spans] == ["0", "1", "2", "3"]
    assert max(s["start"] for s in spans) < min(s["end"] for s in spans), "the four tools did not overlap"


async def test_sync_and_async_tools_run_together_in_one_step(agent, drive):
    spec = agent(tools=TOOLS)
    calls = [("nap", {"tag": f"s{i}"}) for i in range(4)] + [("anap", {"tag": f"a{i}"}) for i in range(4)]
    run = await drive(spec, [tool_calls(*calls), text("done")], "go")
    spans = [json.loads(m["content"]) for m in run.tool_results()]
    assert len(spans) == 8
    assert max(s["start"] for s in spans) < min(s["end"] for s in spans), "the eight tools did not overlap"


async def test_max_parallel_one_runs_the_calls_one_after_another(agent, drive):
    spec = agent("limits:\n  max_parallel: 1\n", tools=TOOLS)
    reply = tool_calls(*[("nap", {"tag": str(i), "seconds": 0.05}) for i in range(4)])
    run = await drive(spec, [reply, text("done")], "go")
    spans = sorted((json.loads(m["content"]) for m in run.tool_results()), key=lambda s: s["start"])
    for earlier, later in itertools.pairwise(spans):
        assert later["start"] >= earlier["end"], f"{later['tag']} started before {earlier['tag']} ended"


async def test_unknown_tool_gets_an_error_result_listing_the_tools(agent, drive, assert_valid_history):
    spec = agent(tools=TOOLS)
    run = await drive(spec, [raw_call("nope", "{}"), text("sorry")], "go")
    content = result_of(run, "call_raw")
    assert "Unknown tool 'nope'" in content
    assert "add" in content and "ping" in content
    assert run.requests[1].messages[-1]["content"] == content
    assert run.result.reason == "done"
    assert_valid_history(run.history)


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ('{"a": 1, b: 2}', "not valid JSON"),
        ('{"a": 1, "b"', "not valid JSON"),
        ("[1, 2]", "expected a JSON object"),
        ('"a=1"', "expected a JSON object"),
        ('{"a": "one", "b": 2}', "do not match the tool's parameters"),
        ('{"a": 1}', "'b' is a required property"),
    ],
    ids=["malformed-json", "partial-json", "array", "string", "wrong-type", "missing-required"],
)
async def test_bad_arguments_become_an_error_result_and_the_loop_goes_on(
    agent, drive, assert_valid_history, arguments, expected
):
    spec = agent(tools=TOOLS)
    run = await drive(spec, [raw_call("add", arguments), text("let me fix that")], "go")
    content = result_of(run, "call_raw")
    assert expected in content
    assert content.startswith("Invalid arguments for tool 'add'")
    assert run.requests[1].messages[-1] == {"role": "tool", "tool_call_id": "call_raw", "content": content}
    assert run.result.reason == "done"
    assert run.result.output == "let me fix that"
    assert_valid_history(run.history)


async def test_empty_arguments_mean_an_empty_object(agent, drive):
    spec = agent(tools=TOOLS)
    run = await drive(spec, [raw_call("ping", ""), text("ok")], "go")
    assert result_of(run, "call_raw") == "pong"
    assistant = next(m for m in run.history if m.get("tool_calls"))
    assert assistant["tool_calls"][0]["function"]["arguments"] == "{}"


async def test_a_tool_that_raises_becomes_an_error_result(agent, drive):
    spec = agent(tools=TOOLS)
    run = await drive(spec, [tool_call("boom"), text("it failed")], "go")
    assert result_of(run, run.history[1]["tool_calls"][0]["id"]) == "ValueError: the disk is on fire"
    assert run.result.reason == "done"
    record = next(r for r in run.records() if r.get("role") == "tool")
    assert record["is_error"] is True


async def test_a_tool_that_hangs_past_tool_timeout_s_is_abandoned(agent, drive):
    spec = agent("limits:\n  tool_timeout_s: 0.2\n", tools=TOOLS)
    run = await drive(spec, [tool_call("hang"), text("too slow")], "go")
    content = run.tool_results()[0]["content"]
    assert "timed out after 0.2 s" in content
    assert run.result.reason == "done"


async def test_huge_output_is_cut_with_a_note(agent, drive):
    spec = agent("limits:\n  tool_output_chars: 1000\n", tools=TOOLS)
    run = await drive(spec, [tool_call("huge"), text("ok")], "go")
    content = run.tool_results()[0]["content"]
    assert content.startswith("0123456789" * 100 + "\n")
    assert "4000 more characters" in content
    assert len(content) < 1200


async def test_a_non_json_serializable_return_value_becomes_an_error_result(agent, drive):
    spec = agent(tools=TOOLS)
    run = await drive(spec, [tool_call("weird"), text("ok")], "go")
    content = run.tool_results()[0]["content"]
    assert "cannot be sent as JSON" in content
    assert run.result.reason == "done"


async def test_a_non_streaming_model_runs_the_same_loop(agent, drive, assert_valid_history):
    spec = agent("model:\n  id: scripted/x\n  stream: false\n", tools=TOOLS)
    run = await drive(spec, [tool_call("add", a=2, b=2), text("4")], "go")
    assert all(request.stream is False for request in run.requests)
    assert run.tool_results()[0]["content"] == "4"
    assert run.result.output == "4"
    assert_valid_history(run.history)


async def test_a_tool_starts_while_the_rest_of_the_reply_still_streams(agent, drive):
    spec = agent(tools=TOOLS)
    asked: list[float] = []

    def reply(request: Request) -> Reply:
        asked.append(time.perf_counter())
        return tool_calls(("stamp", {"tag": "first"}), ("stamp", {"tag": "second"}))

    model = _StampedModel([reply, text("done")], chunk_delay_s=0.25)
    run = await drive(spec, model=model, during=lambda session: session.run(["go"]))
    first, second = (float(m["content"]) for m in run.tool_results())
    # in order of events, not against a bound: the second call's arguments arrive 0.25 s after the first's
    second_ready = next(at for at, e in model.sent if isinstance(e, ToolCallReady) and e.index == 1)
    assert asked[0] < first < second_ready, "the first tool waited for the whole stream"
    assert second > second_ready, "the second tool started before its arguments were complete"


class _StampedModel(ScriptedModel):
    """A scripted model noting when it handed out each stream event."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sent: list[tuple[float, Any]] = []

    async def stream(self, request: Request) -> Any:
        async for event in super().stream(request):
            self.sent.append((time.perf_counter(), event))
            yield event


async def test_the_loop_reports_steps_tools_usage_and_the_end_to_its_sink(agent, drive):
    spec = agent(tools=TOOLS)
    usage = Usage(prompt_tokens=10, completion_tokens=5, total_tokens=15)
    script = [tool_calls(("add", {"a": 1, "b": 2}), usage=usage), text("The sum is 3.", usage=usage)]
    run = await drive(spec, script, "add")
    kinds = [type(e) for e in run.events]
    assert [(e.turn, e.step) for e in run.events if isinstance(e, StepStarted)] == [(1, 1), (1, 2)]
    [started] = [e for e in run.events if isinstance(e, ToolStarted)]
    assert (started.name, started.arguments) == ("add", {"a": 1, "b": 2})
    [finished] = [e for e in run.events if isinstance(e, ToolFinished)]
    assert finished.result.content == "3" and not finished.result.is_error
    assert kinds.index(ToolStarted) < kinds.index(ToolFinished)
    assert "".join(e.text for e in run.events if isinstance(e, TextChunk)) == "The sum is 3."
    assert len([e for e in run.events if isinstance(e, AssistantMessage)]) == 2
    updates = [e for e in run.events if isinstance(e, UsageUpdate)]
    assert [u.session.total_tokens for u in updates] == [15, 30]
    assert run.events[-1] == TurnEnded("The sum is 3.", "done")
