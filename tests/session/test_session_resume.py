"""Interrupts, model errors and crash recovery (SPEC sections 5 and 15): the history stays valid and a
new session resumes from the transcript."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import runner
from runner.errors import ModelError
from runner.models.base import Completed, Reply, Request, StreamEvent, TextDelta, ToolCall, ToolCallReady
from runner.store.transcript import list_transcripts, read_transcript, sessions_dir
from runner.testing import ScriptedModel, text, tool_call, tool_calls

TOOLS = """
import asyncio

GATE = {}


def add(a: int, b: int) -> int:
    \"\"\"Add two numbers.\"\"\"
    return a + b


async def fast() -> str:
    \"\"\"Finish at once.\"\"\"
    GATE["fast_done"].set()
    return "fast result"


async def stuck() -> str:
    \"\"\"Start, then never finish.\"\"\"
    GATE["stuck_started"].set()
    try:
        await asyncio.sleep(30)
    except asyncio.CancelledError:
        if "stuck_cancelled" in GATE:
            GATE["stuck_cancelled"].set()
        raise
    return "never"
"""


class SlowModel:
    """Streams a little text, then hangs until cancelled."""

    name = "slow"
    supports_tools: bool | None = True

    def __init__(self) -> None:
        self.generating = asyncio.Event()
        self.requests: list[Request] = []

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        self.requests.append(request)
        yield TextDelta("partial ")
        self.generating.set()
        await asyncio.sleep(30)
        yield Completed(text("never"))

    async def complete(self, request: Request) -> Reply:
        raise AssertionError("this model only streams")

    async def aclose(self) -> None:
        pass


class CallsThenHangs:
    """Streams text and two complete tool calls (their tools start at once), then hangs."""

    name = "hangs"
    supports_tools: bool | None = True

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.calls = (ToolCall("c_fast", "fast", "{}"), ToolCall("c_stuck", "stuck", "{}"))

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        self.requests.append(request)
        yield TextDelta("Working on it.")
        for index, call in enumerate(self.calls):
            yield ToolCallReady(index, call)
        await asyncio.sleep(30)
        yield Completed(Reply(content="Working on it.", tool_calls=self.calls))

    async def complete(self, request: Request) -> Reply:
        raise AssertionError("this model only streams")

    async def aclose(self) -> None:
        pass


class CallsThenFails(CallsThenHangs):
    """Streams one complete tool call, then the connection breaks."""

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        self.requests.append(request)
        yield ToolCallReady(0, self.calls[1])
        await asyncio.sleep(0)
        raise ModelError("the connection broke mid-stream")


# ----------------------------------------------------------------------------- interrupts


async def _settle(rounds: int = 10) -> None:
    for _ in range(rounds):
        await asyncio.sleep(0)


async def test_interrupt_while_a_tool_runs_answers_every_call(agent, drive, assert_valid_history):
    spec = agent(tools=TOOLS)
    outcome = {}

    async def interrupt_mid_tool(session):
        gate = agent.module().GATE
        gate["fast_done"], gate["stuck_started"] = asyncio.Event(), asyncio.Event()
        turn = asyncio.create_task(session.run(["go"]))
        await gate["fast_done"].wait()
        await gate["stuck_started"].wait()
        await _settle()  # the fast call's result reaches its step (each call runs in a task of its own)
        session.interrupt()
        outcome["result"] = await turn
        outcome["history"] = list(session.history)
        outcome["next"] = await session.run(["again"])

    run = await drive(
        spec, [tool_calls(("fast", {}), ("stuck", {})), text("hello again")], during=interrupt_mid_tool
    )
    assert outcome["result"].reason == "interrupted"
    history = outcome["history"]
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "tool", "user"]
    assert history[2]["content"] == "fast result"
    assert history[3]["content"] == "Interrupted by the user."
    assert history[4]["content"] == "[runner] The turn was stopped: interrupted by the user."
    assert_valid_history(history)
    assert [e["event"] for e in run.transcript_events()].count("interrupt") == 1
    assert outcome["next"].reason == "done"
    assert_valid_history(run.requests[1].messages)


async def test_interrupt_while_generating_appends_no_assistant_message(agent, drive, assert_valid_history):
    spec = agent(tools=TOOLS)
    model = SlowModel()
    outcome = {}

    async def interrupt_mid_generation(session):
        turn = asyncio.create_task(session.run(["go"]))
        await model.generating.wait()
        session.interrupt()
        outcome["result"] = await turn

    run = await drive(spec, model=model, during=interrupt_mid_generation)
    assert outcome["result"].reason == "interrupted"
    assert [m["role"] for m in run.history] == ["user", "user"]
    assert run.history[1]["content"].endswith("interrupted by the user.")
    assert not any(r.get("role") == "assistant" for r in run.records())
    assert_valid_history(run.history)


async def test_a_turn_cancelled_from_outside_leaves_every_call_answered(agent, drive, assert_valid_history):
    spec = agent(tools=TOOLS)
    outcome = {}

    async def cancel_mid_tool(session):
        gate = agent.module().GATE
        gate["stuck_started"] = asyncio.Event()
        turn = asyncio.create_task(session.run(["go"]))
        await gate["stuck_started"].wait()
        turn.cancel()
        with pytest.raises(asyncio.CancelledError):
            await turn
        outcome["history"] = list(session.history)

    await drive(spec, [tool_call("stuck")], during=cancel_mid_tool)
    assert [m["role"] for m in outcome["history"]] == ["user", "assistant", "tool"]
    assert_valid_history(outcome["history"])


async def test_a_turn_cancelled_under_a_session_timeout_cancels_its_tools(agent, drive):
    spec = agent("limits:\n  timeout_s: 60\n", tools=TOOLS)

    async def cancel_mid_tool(session):
        gate = agent.module().GATE
        gate["stuck_started"], gate["stuck_cancelled"] = asyncio.Event(), asyncio.Event()
        turn = asyncio.create_task(session.run(["go"]))
        await gate["stuck_started"].wait()
        turn.cancel()
        with pytest.raises(asyncio.CancelledError):
            await turn
        await asyncio.wait_for(gate["stuck_cancelled"].wait(), 5)

    run = await drive(spec, [tool_call("stuck")], during=cancel_mid_tool)
    assert [m["role"] for m in run.history] == ["user", "assistant", "tool"]


async def test_interrupt_while_generating_records_the_calls_whose_tools_already_started(
    agent, drive, assert_valid_history
):
    spec = agent(tools=TOOLS)
    model = CallsThenHangs()
    outcome = {}

    async def interrupt_mid_generation(session):
        gate = agent.module().GATE
        gate["fast_done"], gate["stuck_started"] = asyncio.Event(), asyncio.Event()
        turn = asyncio.create_task(session.run(["go"]))
        await gate["fast_done"].wait()
        await gate["stuck_started"].wait()
        await _settle()  # the fast call's result reaches its step (each call runs in a task of its own)
        session.interrupt()
        outcome["result"] = await turn

    run = await drive(spec, model=model, during=interrupt_mid_generation)
    assert outcome["result"].reason == "interrupted"
    assert [m["role"] for m in run.history] == ["user", "assistant", "tool", "tool", "user"]
    assert run.history[1]["content"] == "Working on it."
    assert [c["id"] for c in run.history[1]["tool_calls"]] == ["c_fast", "c_stuck"]
    assert [m["content"] for m in run.history[2:4]] == ["fast result", "Interrupted by the user."]
    assert_valid_history(run.history)
    assert run.transcript().messages() == run.history


async def test_a_model_error_after_a_tool_started_still_answers_its_call(agent, drive, assert_valid_history):
    spec = agent(tools=TOOLS)
    outcome = {}

    async def fail_mid_stream(session):
        agent.module().GATE["stuck_started"] = asyncio.Event()
        with pytest.raises(ModelError):
            await session.run(["go"])
        outcome["history"] = list(session.history)

    run = await drive(spec, model=CallsThenFails(), during=fail_mid_stream)
    assert [m["role"] for m in outcome["history"]] == ["user", "assistant", "tool"]
    assert outcome["history"][2]["content"] == "Not executed: the connection broke mid-stream"
    assert_valid_history(outcome["history"])
    assert run.transcript().history() == outcome["history"]


async def test_kill_9_while_an_eagerly_started_tool_runs_keeps_its_call(
    agent, drive, home, assert_valid_history
):
    spec = agent(tools=TOOLS)
    saved = {}

    async def kill_mid_tool(session):
        gate = agent.module().GATE
        gate["fast_done"], gate["stuck_started"] = asyncio.Event(), asyncio.Event()
        turn = asyncio.create_task(session.run(["go"]))
        await gate["stuck_started"].wait()
        path = sessions_dir(home) / f"{session.session_id}.jsonl"
        saved["path"], saved["text"] = path, path.read_text(encoding="utf-8")  # what kill -9 leaves
        session.interrupt()
        await turn

    await drive(spec, model=CallsThenHangs(), during=kill_mid_tool)
    saved["path"].write_text(saved["text"], encoding="utf-8")
    crashed = read_transcript(saved["path"])
    history = crashed.history()
    assert history[-1]["role"] == "assistant"
    assert [c["id"] for c in history[-1]["tool_calls"]] == ["c_fast", "c_stuck"]

    outcome = {}

    async def continue_(session):
        outcome["needs"] = session.conversation.needs_continuation()
        await session.run()

    resumed = await drive(spec, [text("they did not finish")], resume=crashed, during=continue_)
    assert outcome["needs"] is True
    sent = resumed.requests[0].messages
    assert [m.get("tool_call_id") for m in sent[-2:]] == ["c_fast", "c_stuck"]
    assert all("the runner stopped before this call finished" in m["content"] for m in sent[-2:])
    assert_valid_history(sent)


async def test_interrupt_without_a_running_step_does_nothing(agent, drive):
    spec = agent(tools=TOOLS)

    outputs = []

    async def interrupt_then_run(session):
        session.interrupt()
        outputs.append((await session.run(["go"])).output)

    await drive(spec, [text("fine")], during=interrupt_then_run)
    assert outputs == ["fine"]


# ----------------------------------------------------------------------------- model errors


async def test_model_error_ends_the_turn_and_a_new_session_continues_from_the_transcript(
    agent, drive, home, assert_valid_history
):
    spec = agent("prompts:\n  system: Add.\n", tools=TOOLS)
    script = [tool_call("add", a=1, b=2), ModelError("the provider is down")]
    model = ScriptedModel(script)
    with pytest.raises(ModelError, match="the provider is down"):
        await drive(spec, model=model, during=lambda session: session.run(["add"]))
    failed_request = model.requests[-1].messages
    [path] = list_transcripts(home)
    saved = read_transcript(path)
    [error] = [e for e in saved.events() if e["event"] == "error"]
    assert error["data"] == {"error": "ModelError", "message": "the provider is down"}
    assert [m["role"] for m in saved.messages()] == ["system", "user", "assistant", "tool"]

    outcome = {}

    async def continue_(session):
        outcome["needs"] = session.conversation.needs_continuation()
        outcome["result"] = await session.run()

    resumed = await drive(spec, [text("3")], resume=saved, during=continue_)
    assert outcome["needs"] is True
    assert outcome["result"].reason == "done" and outcome["result"].output == "3"
    [request] = resumed.requests
    assert request.messages == failed_request  # the same request, sent again
    assert request.messages[-1]["content"] == "3"
    assert resumed.transcript_path == path
    messages = read_transcript(path).messages()
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert_valid_history(messages)


async def test_model_error_on_the_first_step_leaves_the_user_message_to_continue(agent, drive, home):
    spec = agent(tools=TOOLS)
    with pytest.raises(ModelError):
        await drive(spec, [ModelError("down")], "hello")
    saved = read_transcript(list_transcripts(home)[0])
    outcome = {}

    async def continue_(session):
        outcome["needs"] = session.conversation.needs_continuation()
        await session.run()

    resumed = await drive(spec, [text("hi!")], resume=saved, during=continue_)
    assert outcome["needs"] is True
    assert resumed.requests[0].messages == [{"role": "user", "content": "hello"}]


async def test_a_finished_session_needs_no_continuation(agent, drive, home):
    spec = agent(tools=TOOLS)
    run = await drive(spec, [text("done")], "hello")
    outcome = {}

    async def check(session):
        outcome["needs"] = session.conversation.needs_continuation()

    await drive(spec, [], resume=run.transcript(), during=check)
    assert outcome["needs"] is False


# ----------------------------------------------------------------------------- crash recovery


def write_transcript(path: Path, records: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


async def test_resume_after_a_crash_mid_execution_answers_the_unfinished_call(
    agent, drive, home, assert_valid_history
):
    spec = agent(tools=TOOLS)
    path = sessions_dir(home) / "crashed.jsonl"
    now = "2026-01-01T00:00:00.000+00:00"
    calls = [
        {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'}},
        {"id": "c2", "type": "function", "function": {"name": "add", "arguments": '{"a": 3, "b": 4}'}},
    ]
    write_transcript(
        path,
        [
            {
                "type": "header",
                "format": 1,
                "session_id": "crashed",
                "agent": "tester",
                "agent_path": str(spec.path),
                "agent_sha256": hashlib.sha256(spec.path.read_bytes()).hexdigest(),
                "runner_version": runner.__version__,
                "model": "scripted",
                "started_at": now,
            },
            {"type": "message", "time": now, "role": "user", "content": "add both"},
            {"type": "message", "time": now, "role": "assistant", "content": None, "tool_calls": calls},
            {"type": "message", "time": now, "role": "tool", "tool_call_id": "c1", "content": "3"},
        ],
    )
    outcome = {}

    async def continue_(session):
        outcome["needs"] = session.conversation.needs_continuation()
        outcome["result"] = await session.run()

    run = await drive(spec, [text("3, and 7 was lost")], resume=read_transcript(path), during=continue_)
    assert outcome["needs"] is True
    assert outcome["result"].reason == "done"
    [request] = run.requests
    assert request.messages[-1] == {
        "role": "tool",
        "tool_call_id": "c2",
        "content": "Not executed: the runner stopped before this call finished.",
    }
    assert_valid_history(request.messages)
    messages = read_transcript(path).messages()
    assert [m.get("tool_call_id") for m in messages if m["role"] == "tool"] == ["c1", "c2"]
    assert_valid_history(messages)


async def test_a_torn_last_line_is_ignored_on_resume(agent, drive, home):
    spec = agent(tools=TOOLS)
    run = await drive(spec, [text("first answer")], "hello")
    with run.transcript_path.open("a", encoding="utf-8") as file:
        file.write('{"type": "message", "role": "assis')
    saved = read_transcript(run.transcript_path)
    assert [m["role"] for m in saved.messages()] == ["user", "assistant"]


async def test_resume_keeps_the_recorded_system_prompt_first_and_once(agent, drive, assert_valid_history):
    body = "prompts:\n  system: You are helpful.\nhooks:\n  session_start:\n    - message: Session context.\n"
    spec = agent(body, tools=TOOLS)
    first = await drive(spec, [text("one")], "first")
    assert first.requests[0].messages[0] == {"role": "system", "content": "You are helpful."}
    resumed = await drive(spec, [text("two")], "second", resume=first.transcript())
    messages = resumed.requests[0].messages
    assert messages[0] == {"role": "system", "content": "You are helpful."}
    assert sum(m["role"] == "system" for m in messages) == 1
    assert [m["content"] for m in messages[1:]] == ["Session context.", "first", "one", "second"]


async def test_resume_uses_the_system_prompt_rendered_last(agent, drive):
    spec = agent("prompts:\n  system: 'Units: {{ units }}.'\nvars:\n  units: metric\n", tools=TOOLS)

    async def switch(session):
        session.set_variables({"units": "imperial"})
        await session.run(["again"])

    first = await drive(spec, [text("one"), text("two")], "first", during=switch)
    assert first.requests[1].messages[0]["content"] == "Units: imperial."
    resumed = await drive(spec, [text("three")], "third", resume=first.transcript())
    messages = resumed.requests[0].messages
    assert messages[0] == {"role": "system", "content": "Units: imperial."}
    assert sum(m["role"] == "system" for m in messages) == 1


async def test_a_resumed_session_counts_its_earlier_turns(agent, drive):
    spec = agent("limits:\n  max_turns: 2\n", tools=TOOLS)
    first = await drive(spec, [text("one")], "first")
    resumed = await drive(spec, [text("two")], "second", "third", resume=first.transcript())
    assert [r.reason for r in resumed.results] == ["done", "limit"]
    assert isinstance(resumed.model, ScriptedModel) and len(resumed.requests) == 1


async def test_resume_counts_turns_not_hook_messages(agent, drive):
    body = "limits:\n  max_turns: 3\nhooks:\n  turn_pre:\n    - message: Keep it short.\n"
    spec = agent(body, tools=TOOLS)
    first = await drive(spec, [text("one")], "first")
    resumed = await drive(spec, [text("two"), text("three")], "second", "third", resume=first.transcript())
    assert [r.reason for r in resumed.results] == ["done", "done"]
