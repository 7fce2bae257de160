"""Permissions and confirmation (SPEC section 7, Execution): deny / ask / allow, ``confirm``, --yes."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from runner.session import RunOptions
from runner.session.gate import ConfirmAnswer
from runner.testing import text, tool_call, tool_calls
from runner.tools.base import Tool

TOOLS = """
def shell(command: str) -> str:
    \"\"\"Run a command.\"\"\"
    return "ran " + command
"""

CONFIRMED_SOURCE = "tools:\n  - python: $TOOLS\n    confirm: true\n"


class Confirmer:
    """An interactive user who answers from a list and remembers what was asked."""

    def __init__(self, *answers: ConfirmAnswer) -> None:
        self.answers = list(answers)
        self.asked: list[tuple[str, dict[str, Any]]] = []

    async def __call__(self, tool: Tool, arguments: dict[str, Any]) -> ConfirmAnswer:
        self.asked.append((tool.name, arguments))
        await asyncio.sleep(0.01)  # a person takes a moment; other calls run meanwhile
        return self.answers.pop(0)


async def test_deny_pattern_with_an_argument_glob_returns_the_reason(agent, drive):
    spec = agent('permissions:\n  deny: ["shell(command=rm *)"]\n', tools=TOOLS)
    script = [tool_call("shell", command="rm -rf /"), tool_call("shell", command="ls"), text("ok")]
    run = await drive(spec, script, "clean up")
    denied, allowed = (m["content"] for m in run.tool_results())
    assert denied == "Denied by the permissions rule 'shell(command=rm *)'."
    assert allowed == "ran ls"
    assert run.result.reason == "done"


async def test_ask_without_a_user_or_yes_refuses_and_says_to_use_yes(agent, drive):
    spec = agent("permissions:\n  ask: [shell]\n", tools=TOOLS)
    run = await drive(spec, [tool_call("shell", command="ls"), text("ok")], "list")
    content = run.tool_results()[0]["content"]
    assert content.startswith("Refused: shell needs the user's confirmation")
    assert "--yes" in content
    assert run.result.reason == "done"


async def test_ask_with_assume_yes_runs_the_tool(agent, drive):
    spec = agent("permissions:\n  ask: [shell]\n", tools=TOOLS)
    options = RunOptions(assume_yes=True)
    run = await drive(spec, [tool_call("shell", command="ls"), text("ok")], "list", options=options)
    assert run.tool_results()[0]["content"] == "ran ls"


async def test_confirm_source_is_refused_when_not_interactive(agent, drive):
    spec = agent(CONFIRMED_SOURCE, tools=TOOLS)
    run = await drive(spec, [tool_call("shell", command="ls"), text("ok")], "list")
    assert "--yes" in run.tool_results()[0]["content"]


async def test_allow_rule_runs_a_confirm_tool_without_asking(agent, drive):
    spec = agent(CONFIRMED_SOURCE + "permissions:\n  allow: [shell]\n", tools=TOOLS)
    confirm = Confirmer()
    options = RunOptions(confirm=confirm)
    run = await drive(spec, [tool_call("shell", command="ls"), text("ok")], "list", options=options)
    assert run.tool_results()[0]["content"] == "ran ls"
    assert confirm.asked == []


async def test_user_answering_no_ends_the_turn_as_declined_with_the_call_answered(
    agent, drive, assert_valid_history
):
    spec = agent(CONFIRMED_SOURCE, tools=TOOLS)
    confirm = Confirmer("no")
    options = RunOptions(confirm=confirm)
    run = await drive(spec, [tool_call("shell", command="ls"), text("never")], "list", options=options)
    assert confirm.asked == [("shell", {"command": "ls"})]
    assert run.result.reason == "declined"
    assert run.tool_results()[0]["content"] == "The user declined this tool call."
    assert len(run.requests) == 1
    assert_valid_history(run.history)


async def test_user_answering_yes_is_asked_again_next_time(agent, drive):
    spec = agent(CONFIRMED_SOURCE, tools=TOOLS)
    confirm = Confirmer("yes", "yes")
    options = RunOptions(confirm=confirm)
    script = [tool_call("shell", command="ls"), tool_call("shell", command="pwd"), text("ok")]
    run = await drive(spec, script, "look around", options=options)
    assert len(confirm.asked) == 2
    assert [m["content"] for m in run.tool_results()] == ["ran ls", "ran pwd"]


async def test_user_answering_always_is_not_asked_again(agent, drive):
    spec = agent(CONFIRMED_SOURCE, tools=TOOLS)
    confirm = Confirmer("always")
    options = RunOptions(confirm=confirm)
    script = [tool_call("shell", command="ls"), tool_call("shell", command="pwd"), text("ok")]
    run = await drive(spec, script, "look around", options=options)
    assert confirm.asked == [("shell", {"command": "ls"})]
    assert [m["content"] for m in run.tool_results()] == ["ran ls", "ran pwd"]
    assert run.result.reason == "done"


async def test_no_to_one_call_of_a_message_skips_the_others_without_asking_again(
    agent, drive, assert_valid_history
):
    spec = agent(CONFIRMED_SOURCE, tools=TOOLS)
    confirm = Confirmer("no", "yes")
    options = RunOptions(confirm=confirm)
    reply = tool_calls(("shell", {"command": "ls"}), ("shell", {"command": "pwd"}))
    run = await drive(spec, [reply, text("never")], "look around", options=options)
    assert confirm.asked == [("shell", {"command": "ls"})]
    first, second = (m["content"] for m in run.tool_results())
    assert first == "The user declined this tool call."
    assert second.startswith("Not executed") and "declined" in second
    assert run.result.reason == "declined"
    assert_valid_history(run.history)


async def test_always_to_one_call_of_a_message_covers_the_others(agent, drive):
    spec = agent(CONFIRMED_SOURCE, tools=TOOLS)
    confirm = Confirmer("always", "always")
    options = RunOptions(confirm=confirm)
    reply = tool_calls(("shell", {"command": "ls"}), ("shell", {"command": "pwd"}))
    run = await drive(spec, [reply, text("ok")], "look around", options=options)
    assert len(confirm.asked) == 1
    assert [m["content"] for m in run.tool_results()] == ["ran ls", "ran pwd"]


async def test_a_confirm_prompt_that_fails_still_leaves_every_call_answered(
    agent, drive, assert_valid_history
):
    spec = agent(CONFIRMED_SOURCE, tools=TOOLS)

    async def broken_prompt(tool: Tool, arguments: dict[str, Any]) -> ConfirmAnswer:
        raise EOFError("stdin is closed")

    outcome = {}

    async def ask(session):
        with pytest.raises(EOFError):
            await session.run(["list"])
        outcome["history"] = list(session.history)

    run = await drive(
        spec, [tool_call("shell", command="ls")], options=RunOptions(confirm=broken_prompt), during=ask
    )
    assert [m["role"] for m in outcome["history"]] == ["user", "assistant", "tool"]
    assert outcome["history"][-1]["content"].startswith("Not executed")
    assert_valid_history(outcome["history"])
    assert [e["data"]["error"] for e in run.transcript_events("error")] == ["EOFError"]


async def test_an_allowed_command_glob_does_not_run_what_else_the_line_chains(agent, drive, tmp_path):
    """End to end with the real shell toolset: the chained command needs confirmation, and gets none."""
    body = (
        "tools:\n  - builtin: shell\n"
        'permissions:\n  allow: ["shell(command=echo *)"]\n  deny: ["shell(command=rm *)"]\n'
    )
    spec = agent(body)
    (tmp_path / "keep.txt").write_text("precious", encoding="utf-8")
    script = [
        tool_call("shell", command="echo one && echo two"),
        tool_call("shell", command="echo hi; touch pwned.txt"),
        tool_call("shell", command="echo bye\nrm keep.txt"),
        text("done"),
    ]
    run = await drive(spec, script, "go")
    ran, chained, denied = (m["content"] for m in run.tool_results())
    assert "one" in ran and "two" in ran
    assert chained.startswith("Refused: shell needs the user's confirmation")
    assert denied == "Denied by the permissions rule 'shell(command=rm *)'."
    assert not (tmp_path / "pwned.txt").exists()
    assert (tmp_path / "keep.txt").read_text(encoding="utf-8") == "precious"
