"""The three function-calling modes through the real loop: native, inline blocks, prompt selector."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runner.models.base import Reply
from runner.modes import choose_mode
from runner.session import RunOptions
from runner.session.events import ReasoningChunk, TextChunk, ToolStarted
from runner.testing import ScriptedModel, text, tool_call
from tests.session.conftest import Agents, Driver

TOOLS = '''
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def fail(reason: str) -> str:
    """Always fails."""
    raise ValueError(reason)
'''

XML_CALL = '<tool_call>{"name": "add", "arguments": {"a": 2, "b": 3}}</tool_call>'


def mode_body(mode: str, extra: str = "") -> str:
    return f"model: openai/scripted\nfunction_calling: {mode}\nprompts:\n  system: You add.\n{extra}"


async def test_inline_xml_blocks_run_and_results_come_back_as_one_user_message(
    agent: Agents, drive: Driver
) -> None:
    spec = agent(mode_body("inline"), tools=TOOLS)
    run = await drive(spec, [text(f"Let me add.\n{XML_CALL}"), text("2 + 3 = 5")], "2+3?")
    assert run.result.output == "2 + 3 = 5" and run.result.reason == "done"
    first = run.requests[0]
    assert first.tools is None  # the tools are described in the system prompt instead
    assert "<tool_call>" in first.messages[0]["content"] and '"name": "add"' in first.messages[0]["content"]
    second = run.requests[1].messages
    assert second[-2] == {"role": "assistant", "content": f"Let me add.\n{XML_CALL}"}
    assert second[-1]["role"] == "user"
    assert second[-1]["content"] == '<tool_response name="add">\n5\n</tool_response>'
    assert not any(m["role"] == "tool" for m in second)


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("fmt", ["xml", "markdown"])
async def test_inline_tool_blocks_are_not_shown_as_answer_text(
    agent: Agents, drive: Driver, stream: bool, fmt: str
) -> None:
    extra = "tool_format: markdown\n" if fmt == "markdown" else ""
    spec = agent(mode_body("inline", extra), tools=TOOLS)
    block = XML_CALL if fmt == "xml" else '```add\n{"a": 2, "b": 3}\n```'
    options = RunOptions(stream=stream)
    run = await drive(spec, [text(f"Let me add.\n{block}\n"), text("2 + 3 = 5")], "2+3?", options=options)
    shown = "".join(e.text for e in run.events if isinstance(e, TextChunk))
    assert shown.replace("\n", "") == "Let me add.2 + 3 = 5"
    assert [e.name for e in run.events if isinstance(e, ToolStarted)] == ["add"]  # shown as progress


async def test_inline_markdown_blocks(agent: Agents, drive: Driver) -> None:
    spec = agent(mode_body("inline", "tool_format: markdown\n"), tools=TOOLS)
    reply = 'Adding.\n```add\n{"a": 20, "b": 22}\n```\n'
    run = await drive(spec, [text(reply), text("42")], "20+22?")
    assert run.result.output == "42"
    assert "```add" in run.requests[0].messages[0]["content"]
    assert "\n42\n</tool_response>" in run.requests[1].messages[-1]["content"]


async def test_inline_block_starts_while_the_reply_streams(agent: Agents, drive: Driver) -> None:
    spec = agent(mode_body("inline"), tools=TOOLS)
    tail = " and some more words afterwards" * 5
    model = ScriptedModel([text(XML_CALL + tail), text("done")], chunk_delay_s=0.01)
    run = await drive(spec, None, "go", model=model)
    kinds = ["TextChunk" if isinstance(e, TextChunk) else type(e).__name__ for e in run.events]
    started = kinds.index("ToolStarted")
    last_text = max(
        i for i, k in enumerate(kinds) if k == "TextChunk" and i < kinds.index("AssistantMessage")
    )
    assert started < last_text  # the tool began before the rest of the reply arrived


async def test_inline_unreadable_block_is_explained_to_the_model(agent: Agents, drive: Driver) -> None:
    spec = agent(mode_body("inline"), tools=TOOLS)
    broken = '<tool_call>{"arguments": {"a": 1}}</tool_call>'
    run = await drive(spec, [text(broken), text(XML_CALL), text("5")], "go")
    assert run.result.output == "5"
    error_message = run.requests[1].messages[-1]["content"]
    assert 'error="true"' in error_message and "name" in error_message
    assert len(run.requests) == 3


async def test_inline_tool_error_and_permission_deny_reach_the_model(agent: Agents, drive: Driver) -> None:
    spec = agent(mode_body("inline", "permissions:\n  deny: ['add(a=666)']\n"), tools=TOOLS)
    calls = (
        '<tool_call>{"name": "fail", "arguments": {"reason": "boom"}}</tool_call>'
        '<tool_call>{"name": "add", "arguments": {"a": 666, "b": 1}}</tool_call>'
    )
    run = await drive(spec, [text(calls), text("sorry")], "go")
    results = run.requests[1].messages[-1]["content"]
    assert results.count('error="true"') == 2
    assert "boom" in results and "add(a=666)" in results


async def test_think_blocks_are_shown_kept_and_never_sent_back(agent: Agents, drive: Driver) -> None:
    spec = agent(mode_body("native"), tools=TOOLS)
    run = await drive(
        spec, [text("<think>the user wants a greeting</think>Hello!"), text("again")], "hi", "more"
    )
    assert run.results[0].output == "Hello!"
    reasoning = "".join(e.text for e in run.events if isinstance(e, ReasoningChunk))
    assert "the user wants a greeting" in reasoning
    assert "<think>" not in "".join(e.text for e in run.events if isinstance(e, TextChunk))
    sent = run.requests[1].messages
    assert {"role": "assistant", "content": "Hello!"} in sent and "think" not in json.dumps(sent)
    recorded = next(r for r in run.records() if r.get("role") == "assistant")
    assert recorded["reasoning"] == "the user wants a greeting"


async def test_prompt_mode_selects_runs_and_answers_without_tools(agent: Agents, drive: Driver) -> None:
    spec = agent(mode_body("prompt"), tools=TOOLS)
    selector_answer = (
        'Sure!\n```json\n{"tool_calls": [{"name": "add", "parameters": {"a": 1, "b": 2, "c": 9}},'
        ' {"name": "nope", "parameters": {}}]}\n```'
    )
    run = await drive(spec, [text(selector_answer), text("1 + 2 = 3")], "1+2?")
    assert run.result.output == "1 + 2 = 3"
    selector, main = run.requests
    assert selector.tools is None and '"add"' in selector.messages[0]["content"]
    assert "1+2?" in selector.messages[-1]["content"]
    assert main.tools is None
    context = main.messages[-1]["content"]
    assert '<tool_result name="add">' in context and "<output>\n3\n</output>" in context
    assert "nope" in context  # the unknown tool is reported to the model too
    event = run.transcript_events("selector")[0]["data"]
    assert event["unknown"] == ["nope"] and event["dropped"] == {"add": ["c"]}
    assert [e.name for e in run.events if isinstance(e, ToolStarted)] == ["add"]


async def test_prompt_mode_rounds_iterate_until_no_calls(agent: Agents, drive: Driver) -> None:
    spec = agent(mode_body("prompt", "selector:\n  rounds: 3\n"), tools=TOOLS)
    script = [
        text('{"tool_calls": [{"name": "add", "parameters": {"a": 1, "b": 1}}]}'),
        text('{"name": "add", "parameters": {"a": 2, "b": 2}}'),
        text('{"tool_calls": []}'),
        text("2 and 4"),
    ]
    run = await drive(spec, script, "go")
    assert run.result.output == "2 and 4"
    assert "<output>\n2\n</output>" in run.requests[1].messages[-1]["content"]  # round 2 saw round 1
    assert run.requests[3].messages[-1]["content"].count("<tool_result") == 2


async def test_prompt_mode_prose_only_selector_means_no_tools(agent: Agents, drive: Driver) -> None:
    spec = agent(mode_body("prompt"), tools=TOOLS)
    run = await drive(spec, [text("I don't think any tool is needed."), text("Hello")], "hi")
    assert run.result.output == "Hello"
    assert [m["role"] for m in run.requests[1].messages] == ["system", "user", "user"]
    assert (
        "no JSON" in run.requests[1].messages[-1]["content"]
        or "JSON" in run.requests[1].messages[-1]["content"]
    )


async def test_selector_usage_counts_in_the_budget(agent: Agents, drive: Driver) -> None:
    spec = agent(mode_body("prompt"), tools=TOOLS)
    from runner.models.base import Usage

    selector = Reply(content='{"tool_calls": []}', usage=Usage(100, 10, 110))
    run = await drive(spec, [selector, text("x", usage=Usage(5, 5, 10))], "hi")
    assert run.session.budget.usage.total_tokens == 120


class _Capable(ScriptedModel):
    def __init__(self, supports: bool | None) -> None:
        super().__init__([])
        self._supports = supports

    @property
    def supports_tools(self) -> bool | None:
        return self._supports


@pytest.mark.parametrize(("supports", "kind"), [(True, "native"), (None, "native"), (False, "inline")])
def test_auto_picks_native_when_the_model_calls_tools(
    agent: Agents, supports: bool | None, kind: str
) -> None:
    spec = agent(mode_body("auto"), tools=TOOLS)
    mode = choose_mode(spec, _Capable(supports), [])
    assert mode.kind == kind and mode.why.startswith("auto:")


@pytest.mark.parametrize("mode", ["native", "inline", "prompt"])
async def test_max_steps_and_transcripts_behave_the_same_in_every_mode(
    agent: Agents, drive: Driver, mode: str
) -> None:
    spec = agent(mode_body(mode, "limits:\n  max_steps: 1\n"), tools=TOOLS)
    if mode == "native":
        script: list[Any] = [tool_call("add", a=1, b=1)]
    elif mode == "inline":
        script = [text(XML_CALL)]
    else:
        script = [text('{"tool_calls": []}'), text("answer")]
    run = await drive(spec, script, "go", options=RunOptions())
    expected = "done" if mode == "prompt" else "max_steps"
    assert run.result.reason == expected
    assert run.transcript().header["agent"] == "tester"


async def test_prompt_mode_uses_the_agents_selector_template(agent: Agents, drive: Driver) -> None:
    body = mode_body(
        "prompt", 'prompts:\n  tool_selection: \'Tools: {{ tools | map(attribute="name") | join(",") }}\'\n'
    )
    spec = agent(body.replace("prompts:\n  system: You add.\n", ""), tools=TOOLS)
    run = await drive(spec, [text('{"tool_calls": []}'), text("ok")], "hi")
    assert run.requests[0].messages[0] == {"role": "system", "content": "Tools: add,fail"}
