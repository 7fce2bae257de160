"""Hooks (SPEC section 6): the nine events and their fields, python / command / message hooks, chains."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from runner.testing import text, tool_call

TOOLS = """
def add(a: int, b: int) -> int:
    \"\"\"Add two numbers.\"\"\"
    return a + b
"""

HOOKS = """
import asyncio

from runner.runtime.hooks import HookResult

SEEN = []


def record(event):
    SEEN.append(event.to_json())


async def arecord(event):
    await asyncio.sleep(0)
    SEEN.append(event.to_json())


def sync_message(event):
    return "context from a sync hook"


async def async_message(event):
    await asyncio.sleep(0)
    return {"messages": [{"role": "user", "content": "context from an async hook"}]}


def double_arguments(event):
    args = event.tool_call["arguments"]
    return {"arguments": {"a": args["a"] * 10, "b": args["b"] * 10}}


def bad_arguments(event):
    return {"arguments": {"a": "ten"}}


def stop(event):
    return HookResult(stop=True, reason="enough for today")


def deny(event):
    return {"deny": True, "reason": "not with these numbers"}


def replace_output(event):
    return {"output": "replaced: " + event.output}


def queue_review(event):
    return "please review"


def queue_lint(event):
    return {"messages": ["and lint"]}


def session_context(event):
    return "session context"


async def hang(event):
    await asyncio.sleep(30)


GATE = {}


async def slow(event):
    GATE["started"].set()
    await asyncio.sleep(30)
    return "never queued"


def raise_error(event):
    raise RuntimeError("hook crashed")


def output_everywhere(event):
    return {"output": "from the wrong event"}
"""

COMMAND = """
import json
import pathlib
import sys
import time

raw = sys.stdin.read()
payload = json.loads(raw)
with open(sys.argv[2], "a", encoding="utf-8") as log:
    log.write(json.dumps(payload) + "\\n")
mode = sys.argv[1]
if mode == "json":
    print(json.dumps({"messages": ["from a JSON answer"]}))
elif mode == "plain":
    print("plain words")
elif mode == "stop":
    sys.stderr.write("stop right there")
    sys.exit(2)
elif mode == "fail":
    sys.stderr.write("it broke")
    sys.exit(1)
elif mode == "hang":
    time.sleep(30)
elif mode == "garbage":
    sys.stdout.buffer.write(bytes([0, 255]) + b"{not json")
elif mode == "bad-fields":
    print(json.dumps({"bogus": 1}))
elif mode == "output":
    print(json.dumps({"output": "output from a command"}))
"""


@pytest.fixture
def command(tmp_path: Path):
    """A command hook line running a small Python script in MODE; its stdin log is returned too."""
    (tmp_path / "cmdhook.py").write_text(COMMAND, encoding="utf-8")
    log = tmp_path / "hook-log.jsonl"

    def make(mode: str) -> str:
        return f'"{sys.executable} cmdhook.py {mode} {log.name}"'

    make.log = log  # type: ignore[attr-defined]
    return make


def read_log(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def hooks_yaml(**chains: list[str]) -> str:
    lines = ["hooks:"]
    for event, hooks in chains.items():
        lines.append(f"  {event}:")
        lines.extend(f"    - {hook}" for hook in hooks)
    return "\n".join(lines) + "\n"


ALL_EVENTS = (
    "session_start",
    "turn_pre",
    "step_pre",
    "generation_post",
    "tool_pre",
    "tool_post",
    "turn_post",
    "loop_continue",
    "session_end",
)


# ----------------------------------------------------------------------------- events and fields


async def test_all_nine_events_fire_in_order_with_their_fields(agent, drive):
    body = hooks_yaml(**{event: ["python: $HOOKS:record"] for event in ALL_EVENTS})
    spec = agent(body, tools=TOOLS, hooks=HOOKS)
    run = await drive(spec, [tool_call("add", a=1, b=2), text("3")], "add")
    seen = agent.module("hooks").SEEN
    assert [e["event"] for e in seen] == [
        "session_start",
        "turn_pre",
        "step_pre",
        "generation_post",
        "tool_pre",
        "tool_post",
        "step_pre",
        "generation_post",
        "turn_post",
        "loop_continue",
        "session_end",
    ]
    for event in seen:
        json.dumps(event)
        assert event["agent"] == "tester"
        assert event["session_id"] == run.session.session_id
        assert event["turn"] == (0 if event["event"] == "session_start" else 1)
    assert [e["step"] for e in seen if e["event"] in ("step_pre", "generation_post")] == [1, 1, 2, 2]
    start, turn_pre, _, generation, tool_pre, tool_post = seen[:6]
    assert start["messages"] == []
    assert turn_pre["messages"] == [{"role": "user", "content": "add"}]
    assert generation["message"]["tool_calls"][0]["function"]["name"] == "add"
    assert generation["messages"] == [{"role": "user", "content": "add"}]
    call_id = generation["message"]["tool_calls"][0]["id"]
    assert tool_pre["tool_call"] == {"id": call_id, "name": "add", "arguments": {"a": 1, "b": 2}}
    assert "output" not in tool_pre
    assert tool_post["tool_call"]["id"] == call_id
    assert tool_post["output"] == "3"
    assert tool_post["is_error"] is False
    turn_post = seen[8]
    assert turn_post["messages"] == run.history
    assert "message" not in turn_post and "tool_call" not in turn_post


# ----------------------------------------------------------------------------- python hooks


async def test_sync_and_async_python_hooks_add_messages_in_chain_order(agent, drive):
    body = hooks_yaml(turn_pre=["python: $HOOKS:sync_message", "python: $HOOKS:async_message"])
    spec = agent(body, tools=TOOLS, hooks=HOOKS)
    run = await drive(spec, [text("ok")], "hi")
    assert run.requests[0].messages == [
        {"role": "user", "content": "hi"},
        {"role": "user", "content": "context from a sync hook"},
        {"role": "user", "content": "context from an async hook"},
    ]


async def test_session_start_messages_go_to_the_history(agent, drive):
    spec = agent(hooks_yaml(session_start=["python: $HOOKS:session_context"]), tools=TOOLS, hooks=HOOKS)
    run = await drive(spec, [text("ok")], "hi")
    assert run.requests[0].messages[:2] == [
        {"role": "user", "content": "session context"},
        {"role": "user", "content": "hi"},
    ]


async def test_session_start_stop_ends_the_session_before_any_model_call(agent, drive):
    spec = agent(hooks_yaml(session_start=["python: $HOOKS:stop"]), tools=TOOLS, hooks=HOOKS)
    run = await drive(spec, [text("never")], "hi")
    assert run.result.reason == "hook"
    assert run.requests == []
    assert any("enough for today" in n.text for n in run.notes())


async def test_step_pre_messages_are_added_before_each_request(agent, drive):
    spec = agent(hooks_yaml(step_pre=["python: $HOOKS:queue_review"]), tools=TOOLS, hooks=HOOKS)
    run = await drive(spec, [tool_call("add", a=1, b=1), text("2")], "hi")
    assert run.requests[0].messages[-1] == {"role": "user", "content": "please review"}
    assert run.requests[1].messages[-1] == {"role": "user", "content": "please review"}
    assert run.requests[1].messages[-2]["role"] == "tool"


async def test_a_later_tool_pre_hook_sees_arguments_replaced_by_an_earlier_one(agent, drive):
    body = hooks_yaml(tool_pre=["python: $HOOKS:double_arguments", "python: $HOOKS:arecord"])
    spec = agent(body, tools=TOOLS, hooks=HOOKS)
    run = await drive(spec, [tool_call("add", a=1, b=2), text("30")], "add")
    [seen] = agent.module("hooks").SEEN
    assert seen["tool_call"]["arguments"] == {"a": 10, "b": 20}
    assert run.tool_results()[0]["content"] == "30"


async def test_tool_pre_replaced_arguments_are_validated_again(agent, drive, assert_valid_history):
    spec = agent(hooks_yaml(tool_pre=["python: $HOOKS:bad_arguments"]), tools=TOOLS, hooks=HOOKS)
    run = await drive(spec, [tool_call("add", a=1, b=2), text("hmm")], "add")
    content = run.tool_results()[0]["content"]
    assert content.startswith("Invalid arguments for tool 'add'")
    assert run.result.reason == "done"
    assert_valid_history(run.history)


async def test_tool_pre_replaced_arguments_are_checked_against_permissions_again(agent, drive):
    """A hook cannot smuggle a call past ``permissions``: the rules judge the arguments that run."""
    body = hooks_yaml(tool_pre=["python: $HOOKS:double_arguments"])
    body += "permissions:\n  allow: ['add(a=1)']\n  deny: ['add(a=10)']\n"
    spec = agent(body, tools=TOOLS, hooks=HOOKS)
    run = await drive(spec, [tool_call("add", a=1, b=2), text("denied")], "add")
    result = run.tool_results()[0]
    assert result["content"] == "Denied by the permissions rule 'add(a=10)'."


async def test_tool_pre_deny_returns_the_reason_as_the_result_and_ends_the_chain(agent, drive):
    body = hooks_yaml(tool_pre=["python: $HOOKS:deny", "python: $HOOKS:record"])
    spec = agent(body, tools=TOOLS, hooks=HOOKS)
    run = await drive(spec, [tool_call("add", a=1, b=2), text("ok, I won't")], "add")
    assert run.tool_results()[0]["content"] == "Denied by a hook: not with these numbers"
    assert agent.module("hooks").SEEN == []
    assert run.result.reason == "done"
    assert len(run.requests) == 2


async def test_stop_ends_the_chain_and_the_turn(agent, drive):
    body = hooks_yaml(turn_pre=["python: $HOOKS:stop", "python: $HOOKS:record"])
    spec = agent(body, tools=TOOLS, hooks=HOOKS)
    run = await drive(spec, [text("never")], "hi")
    assert agent.module("hooks").SEEN == []
    assert run.result.reason == "hook"
    assert run.requests == []
    assert "enough for today" in run.history[-1]["content"]


async def test_tool_post_output_replaced_is_what_the_model_and_later_hooks_see(agent, drive):
    body = hooks_yaml(tool_post=["python: $HOOKS:replace_output", "python: $HOOKS:record"])
    spec = agent(body, tools=TOOLS, hooks=HOOKS)
    run = await drive(spec, [tool_call("add", a=1, b=2), text("ok")], "add")
    assert run.tool_results()[0]["content"] == "replaced: 3"
    assert agent.module("hooks").SEEN[0]["output"] == "replaced: 3"
    assert run.requests[1].messages[-1]["content"] == "replaced: 3"


async def test_generation_post_stop_keeps_the_message_and_answers_its_calls(
    agent, drive, assert_valid_history
):
    spec = agent(hooks_yaml(generation_post=["python: $HOOKS:stop"]), tools=TOOLS, hooks=HOOKS)
    run = await drive(spec, [tool_call("add", a=1, b=2)], "add")
    assert run.result.reason == "hook"
    [result] = run.tool_results()
    assert result["content"].startswith("Not executed")
    assert_valid_history(run.history)


async def test_turn_post_and_loop_continue_messages_are_queued_as_next_inputs(agent, drive):
    body = hooks_yaml(turn_post=["python: $HOOKS:queue_review"], loop_continue=["python: $HOOKS:queue_lint"])
    spec = agent("limits:\n  max_turns: 3\n" + body, tools=TOOLS, hooks=HOOKS)
    run = await drive(spec, [text("first"), text("reviewed"), text("linted")], "hi")
    # Session.run runs what the hooks queue, in order, as the next turns (SPEC 5).
    assert run.requests[1].messages[-1] == {"role": "user", "content": "please review"}
    assert run.requests[2].messages[-1] == {"role": "user", "content": "and lint"}
    assert not any(m.get("content") == "please review" for m in run.requests[0].messages)
    assert [r.output for r in run.results] == ["first", "reviewed", "linted"]
    # what a hook queues is said (on stderr in the CLI)
    said = [n.text for n in run.notes()]
    assert "turn_post hook queued: please review" in said and "loop_continue hook queued: and lint" in said
    # Later turns queue again past max_turns: dropped with a warning, never silently.
    assert [e["data"]["reason"] for e in run.transcript_events("queue_drop")] == ["max_turns"] * 4
    assert run.result.exit_code() == 3


async def test_a_python_hook_that_hangs_past_its_timeout_is_reported_and_the_loop_goes_on(agent, drive):
    spec = agent(
        "hooks:\n  turn_pre:\n    - python: $HOOKS:hang\n      timeout_s: 0.2\n", tools=TOOLS, hooks=HOOKS
    )
    run = await drive(spec, [text("ok")], "hi")
    assert run.result.reason == "done"
    assert any("timed out after 0.2 s" in n.text for n in run.notes())
    [event] = run.transcript_events("hook")
    assert event["data"]["hook_event"] == "turn_pre"


async def test_a_python_hook_that_raises_is_reported_and_the_loop_goes_on(agent, drive):
    spec = agent(hooks_yaml(tool_post=["python: $HOOKS:raise_error"]), tools=TOOLS, hooks=HOOKS)
    run = await drive(spec, [tool_call("add", a=1, b=2), text("3")], "add")
    assert run.result.reason == "done"
    assert run.tool_results()[0]["content"] == "3"
    assert any("hook crashed" in n.text and n.level == "warning" for n in run.notes())


# ----------------------------------------------------------------------------- command hooks


async def test_command_hook_reads_the_event_as_json_and_answers_a_hook_result(agent, drive, command):
    spec = agent(hooks_yaml(turn_pre=[f"command: {command('json')}"]), tools=TOOLS)
    run = await drive(spec, [text("ok")], "hi")
    [payload] = read_log(command.log)
    assert payload["event"] == "turn_pre"
    assert payload["session_id"] == run.session.session_id
    assert payload["agent"] == "tester"
    assert payload["turn"] == 1
    assert payload["messages"] == [{"role": "user", "content": "hi"}]
    assert run.requests[0].messages[-1] == {"role": "user", "content": "from a JSON answer"}


async def test_command_hook_plain_stdout_becomes_a_message(agent, drive, command):
    spec = agent(hooks_yaml(turn_pre=[f"command: {command('plain')}"]), tools=TOOLS)
    run = await drive(spec, [text("ok")], "hi")
    assert run.requests[0].messages[-1] == {"role": "user", "content": "plain words"}


async def test_command_hook_exit_2_stops_the_turn_with_stderr_as_reason(agent, drive, command):
    spec = agent(hooks_yaml(turn_pre=[f"command: {command('stop')}"]), tools=TOOLS)
    run = await drive(spec, [text("never")], "hi")
    assert run.result.reason == "hook"
    assert run.requests == []
    assert "stop right there" in run.history[-1]["content"]


async def test_command_hook_exit_2_at_tool_pre_denies_the_call_with_stderr(agent, drive, command):
    spec = agent(hooks_yaml(tool_pre=[f"command: {command('stop')}"]), tools=TOOLS)
    run = await drive(spec, [tool_call("add", a=1, b=2), text("fine")], "add")
    [payload] = read_log(command.log)
    assert payload["tool_call"]["arguments"] == {"a": 1, "b": 2}
    assert run.tool_results()[0]["content"] == "Denied by a hook: stop right there"
    assert run.result.reason == "done"
    assert len(run.requests) == 2


async def test_command_hook_other_exit_is_reported_and_the_loop_goes_on(agent, drive, command):
    spec = agent(hooks_yaml(turn_pre=[f"command: {command('fail')}"]), tools=TOOLS)
    run = await drive(spec, [text("ok")], "hi")
    assert run.result.reason == "done"
    assert any("exited with 1" in n.text and "it broke" in n.text for n in run.notes())
    [event] = run.transcript_events("hook")
    assert event["data"]["required"] is False


async def test_required_command_hook_failure_stops_the_turn(agent, drive, command):
    spec = agent(
        f"hooks:\n  turn_pre:\n    - command: {command('fail')}\n      required: true\n", tools=TOOLS
    )
    run = await drive(spec, [text("never")], "hi")
    assert run.result.reason == "hook"
    assert run.requests == []
    assert any(n.level == "error" for n in run.notes())


async def test_required_tool_pre_hook_failure_denies_the_call_and_stops_the_turn(
    agent, drive, command, assert_valid_history
):
    spec = agent(
        f"hooks:\n  tool_pre:\n    - command: {command('fail')}\n      required: true\n", tools=TOOLS
    )
    run = await drive(spec, [tool_call("add", a=1, b=2), text("never")], "add")
    assert run.result.reason == "hook"
    assert run.tool_results()[0]["content"].startswith("Denied by a hook: a required hook failed")
    assert len(run.requests) == 1
    assert_valid_history(run.history)


async def test_command_hook_that_hangs_past_timeout_is_killed_and_reported(agent, drive, command):
    spec = agent(
        f"hooks:\n  turn_pre:\n    - command: {command('hang')}\n      timeout_s: 0.5\n", tools=TOOLS
    )
    run = await drive(spec, [text("ok")], "hi")
    assert run.result.reason == "done"
    assert any("timed out after 0.5 s" in n.text for n in run.notes())


async def test_command_hook_printing_garbage_never_breaks_the_loop(agent, drive, command):
    spec = agent(hooks_yaml(tool_post=[f"command: {command('garbage')}"]), tools=TOOLS)
    run = await drive(spec, [tool_call("add", a=1, b=2), text("3")], "add")
    assert run.result.reason == "done"
    assert run.tool_results()[0]["content"] == "3"


async def test_command_hook_answering_unknown_fields_is_reported(agent, drive, command):
    spec = agent(hooks_yaml(turn_pre=[f"command: {command('bad-fields')}"]), tools=TOOLS)
    run = await drive(spec, [text("ok")], "hi")
    assert run.result.reason == "done"
    assert any("invalid HookResult" in n.text and "bogus" in n.text for n in run.notes())


async def test_command_hook_can_replace_a_tool_output(agent, drive, command):
    spec = agent(hooks_yaml(tool_post=[f"command: {command('output')}"]), tools=TOOLS)
    run = await drive(spec, [tool_call("add", a=1, b=2), text("ok")], "add")
    [payload] = read_log(command.log)
    assert payload["output"] == "3" and payload["is_error"] is False
    assert run.tool_results()[0]["content"] == "output from a command"


# ----------------------------------------------------------------------------- message hooks


async def test_message_hook_renders_jinja_with_the_role_it_names(agent, drive):
    body = (
        "hooks:\n  turn_pre:\n"
        '    - message: "Remember: {{ input | upper }}"\n      role: system\n'
        '    - message: "Plain reminder"\n'
    )
    spec = agent(body, tools=TOOLS)
    run = await drive(spec, [text("ok")], "be brief")
    assert run.requests[0].messages == [
        {"role": "user", "content": "be brief"},
        {"role": "system", "content": "Remember: BE BRIEF"},
        {"role": "user", "content": "Plain reminder"},
    ]


async def test_ctrl_c_stops_a_slow_turn_pre_hook_and_the_turn(agent, drive, assert_valid_history):
    spec = agent(
        "hooks:\n  turn_pre:\n    - python: $HOOKS:slow\n      timeout_s: 60\n", tools=TOOLS, hooks=HOOKS
    )
    outcome = {}

    async def interrupt_hook(session):
        agent.module("hooks").GATE["started"] = asyncio.Event()
        turn = asyncio.create_task(session.run(["hi"]))
        await agent.module("hooks").GATE["started"].wait()
        session.interrupt()
        outcome["result"] = await asyncio.wait_for(turn, 5)

    run = await drive(spec, [text("never")], during=interrupt_hook)
    assert outcome["result"].reason == "interrupted"
    assert run.requests == []
    assert run.history[-1]["content"].endswith("interrupted by the user.")


async def test_ctrl_c_stops_a_slow_turn_post_hook_and_queues_nothing(agent, drive):
    spec = agent(
        "hooks:\n  turn_post:\n    - python: $HOOKS:slow\n      timeout_s: 60\n", tools=TOOLS, hooks=HOOKS
    )
    outcome = {}

    async def interrupt_hook(session):
        agent.module("hooks").GATE["started"] = asyncio.Event()
        turn = asyncio.create_task(session.run(["hi"]))
        await agent.module("hooks").GATE["started"].wait()
        session.interrupt()
        outcome["result"] = await asyncio.wait_for(turn, 5)
        outcome["queue"] = list(session.queue)

    await drive(spec, [text("answer")], during=interrupt_hook)
    # the answer stands; the run ends as interrupted (exit 130), nothing queued runs
    assert outcome["result"].reason == "interrupted" and outcome["result"].output == "answer"
    assert outcome["queue"] == []


async def test_fields_an_event_cannot_use_are_reported_once_not_dropped_silently(agent, drive):
    body = hooks_yaml(
        tool_pre=["python: $HOOKS:sync_message"],
        turn_post=["python: $HOOKS:output_everywhere"],
    )
    spec = agent(body, tools=TOOLS, hooks=HOOKS)
    script = [tool_call("add", a=1, b=2), tool_call("add", a=3, b=4), text("done")]
    run = await drive(spec, script, "add twice")
    warnings = [n.text for n in run.notes() if n.level == "warning"]
    hooks_module = agent.modules["hooks"]
    assert warnings == [
        f"tool_pre hook '{hooks_module}:sync_message' returned messages, which tool_pre hooks cannot use, "
        "so it was ignored (messages only at session_start, turn_pre, step_pre, turn_post, loop_continue)",
        f"turn_post hook '{hooks_module}:output_everywhere' returned output, which turn_post hooks cannot "
        "use, so it was ignored (output only at tool_post)",
    ]  # two tool_pre calls, one warning
    assert [e["data"]["ignored"] for e in run.transcript_events("hook")] == [["messages"], ["output"]]
    assert [m["content"] for m in run.tool_results()] == ["3", "7"]
    assert not any(m.get("content") == "context from a sync hook" for m in run.history)


async def test_a_command_hooks_plain_output_outside_message_events_is_just_output(agent, drive, command):
    spec = agent(hooks_yaml(tool_post=[f"command: {command('plain')}"]), tools=TOOLS)
    run = await drive(spec, [tool_call("add", a=1, b=2), text("3")], "add")
    assert not [n for n in run.notes() if n.level != "info"]
    assert not run.transcript_events("hook")


async def test_a_command_hooks_json_messages_outside_message_events_are_reported(agent, drive, command):
    spec = agent(hooks_yaml(tool_post=[f"command: {command('json')}"]), tools=TOOLS)
    run = await drive(spec, [tool_call("add", a=1, b=2), text("3")], "add")
    [warning] = [n.text for n in run.notes() if n.level == "warning"]
    assert warning.startswith("tool_post hook ") and "returned messages" in warning


async def test_a_turn_post_stop_ends_the_run_and_drops_what_was_queued(agent, drive):
    spec = agent(hooks_yaml(turn_post=["python: $HOOKS:stop"]), tools=TOOLS, hooks=HOOKS)
    outcome = {}

    async def both(session):
        outcome["result"] = await session.run(["first", "second"])

    run = await drive(spec, [text("one")], during=both)
    # HOOK_EVENT_RULES: stop at turn_post ends the run of queued inputs; nothing waits silently
    assert [t.output for t in outcome["result"].turns] == ["one"]
    assert len(run.requests) == 1
    assert list(run.session.queue) == []
    drops = run.transcript_events("queue_drop")
    assert [(d["data"]["reason"], d["data"]["count"]) for d in drops] == [("hook", 1)]
    assert any("stopped the run" in n.text and n.level == "warning" for n in run.notes())


async def test_a_stop_at_session_end_is_reported_as_ignored(agent, drive):
    spec = agent(hooks_yaml(session_end=["python: $HOOKS:stop"]), tools=TOOLS, hooks=HOOKS)
    run = await drive(spec, [text("ok")], "hi")
    [event] = run.transcript_events("hook")
    assert event["data"]["hook_event"] == "session_end" and event["data"]["ignored"] == ["stop"]
    assert any("session_end hooks cannot use" in n.text for n in run.notes())
