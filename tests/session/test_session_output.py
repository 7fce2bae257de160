"""Structured output in the loop: tools kept in every mode, the answer checked, repaired, refused.

Each mode's model calls a tool first and then answers; the turn ends only with an answer that
matches ``output:``. No extra model request is made when the first answer matches (the requests are
counted). A provider that refuses ``response_format`` gets the final-answer tool, then JSON text.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from runner.errors import ModelError, OutputError
from runner.session.events import AnswerDraft, OutputReady, TextChunk
from runner.testing import ScriptedModel, text, tool_call, tool_calls
from tests.session.conftest import Agents, Driver, history_problems

TOOLS = '''
def forecast(city: str) -> str:
    """The temperatures of the next days."""
    return "11, 12, 9"
'''

OUTPUT = """
output:
  type: object
  properties:
    city: {type: string}
    temps: {type: array, items: {type: number}}
  required: [city, temps]
  additionalProperties: false
"""
ANSWER = {"city": "Vancouver", "temps": [11, 12, 9]}


def _call(mode: str) -> Any:
    """The model's tool call, written the way ``mode`` reads it."""
    if mode == "native":
        return tool_call("forecast", city="Vancouver")
    if mode == "inline":
        return text('<tool_call>{"name": "forecast", "arguments": {"city": "Vancouver"}}</tool_call>')
    return text(json.dumps({"tool_calls": [{"name": "forecast", "parameters": {"city": "Vancouver"}}]}))


def _final(strategy: str, value: Any) -> Any:
    if strategy == "tool":
        return tool_call("final_answer", **value)
    return text(json.dumps(value))


CASES = [
    ("native", "response_format"),
    ("native", "tool"),
    ("inline", "text"),
    ("prompt", "text"),
]


@pytest.mark.parametrize(("mode", "strategy"), CASES)
async def test_every_mode_keeps_its_tools_and_ends_with_the_typed_answer(
    agent: Agents, drive: Driver, mode: str, strategy: str
) -> None:
    spec = agent(f"function_calling: {mode}\n{OUTPUT}", tools=TOOLS)
    model = ScriptedModel([_call(mode), _final(strategy, ANSWER)], structured_output=strategy)
    run = await drive(spec, None, "weather in Vancouver?", model=model)
    turn = run.results[-1]
    assert (turn.reason, turn.structured, turn.value) == ("done", True, ANSWER)
    assert run.result.data == ANSWER and json.loads(run.result.output) == ANSWER
    assert any(m.get("content") == "11, 12, 9" or "11, 12, 9" in str(m.get("content")) for m in run.history)
    assert len(model.requests) == 2  # the tool step and the answer: no request more
    last = model.requests[-1]
    if strategy == "response_format":
        spec_ = last.params["response_format"]["json_schema"]
        assert spec_["strict"] is True and spec_["schema"]["required"] == ["city", "temps"]
        assert [t["function"]["name"] for t in last.tools] == ["forecast"]
    elif strategy == "tool":
        assert "response_format" not in last.params
        assert [t["function"]["name"] for t in last.tools] == ["forecast", "final_answer"]
        assert "call the `final_answer` tool" in last.messages[0]["content"]
    else:
        assert "response_format" not in last.params
        assert '"additionalProperties": false' in last.messages[0]["content"]  # the schema, in the prompt
    assert [e.value for e in run.events if isinstance(e, OutputReady)] == [ANSWER]
    assert not [e for e in run.events if isinstance(e, TextChunk)]  # drafts, not the answer, stream
    assert run.transcript_events("output")[0]["data"]["value"] == ANSWER
    assert history_problems(run.history) == []


async def test_a_final_answer_call_is_answered_in_the_history_but_never_sent_back(
    agent: Agents, drive: Driver
) -> None:
    spec = agent(OUTPUT, tools=TOOLS)
    model = ScriptedModel(
        [
            tool_calls(("forecast", {"city": "Vancouver"}), ("final_answer", ANSWER)),
            text("thanks"),
            tool_call("final_answer", city="Paris", temps=[]),
        ],
        structured_output="tool",
    )
    run = await drive(spec, None, "weather?", "and now?", model=model)
    first = run.results[0]
    assert first.value == ANSWER and len(model.requests[1].messages) == 7  # turn 2 follows at once
    assert run.history[4] == {"role": "assistant", "content": json.dumps(ANSWER)}  # the answer, said
    results = run.tool_results()
    assert results[0]["content"] == "11, 12, 9"  # it started while the reply streamed: its real result
    assert results[1]["content"].startswith("Accepted")
    assert history_problems(run.history) == []
    # Every turn ends with a typed answer: prose in the second is sent back, and the model calls the tool.
    assert run.results[1].value == {"city": "Paris", "temps": []} and len(model.requests) == 3


async def test_a_wrong_answer_is_sent_back_with_the_path_and_reason_then_accepted(
    agent: Agents, drive: Driver
) -> None:
    spec = agent(OUTPUT, tools=TOOLS)
    wrong = {**ANSWER, "extra": 1}
    run = await drive(
        spec, [text(json.dumps(wrong)), text("not json at all"), text(json.dumps(ANSWER))], "w?"
    )
    assert run.result.data == ANSWER
    repairs = [m["content"] for m in run.history if m["role"] == "user"][1:]
    assert "at $: Additional properties are not allowed ('extra' was unexpected)" in repairs[0]
    assert "(2 more tries)" in repairs[0]
    assert "holds no JSON" in repairs[1] and "(1 more try)" in repairs[1]
    assert '"city"' in repairs[1]  # an answer that is not JSON at all is shown the schema
    assert [e["data"]["attempt"] for e in run.transcript_events("output_invalid")] == [1, 2]


async def test_a_model_that_answers_prose_forever_fails_after_output_retries(
    agent: Agents, drive: Driver
) -> None:
    spec = agent(OUTPUT + "limits:\n  output_retries: 1\n", tools=TOOLS)
    with pytest.raises(OutputError) as caught:
        await drive(spec, [text("It is sunny."), text("Still sunny, really.")], "w?")
    assert "after 2 tries" in caught.value.message and "holds no JSON" in caught.value.message
    assert caught.value.exit_code == 1


async def test_a_failed_turn_keeps_the_transcript_with_the_last_invalid_answer(
    agent: Agents, drive: Driver, home: Any
) -> None:
    from runner.store.transcript import read_transcript, sessions_dir

    spec = agent(OUTPUT + "limits:\n  output_retries: 0\n", tools=TOOLS)
    with pytest.raises(OutputError):
        await drive(spec, [text("The last invalid answer.")], "w?")
    (path,) = sessions_dir(home).glob("*.jsonl")
    transcript = read_transcript(path)
    assert transcript.history()[-1] == {"role": "assistant", "content": "The last invalid answer."}
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["event"] for r in records if r["type"] == "event"][-2:] == ["output_invalid", "error"]


async def test_a_huge_answer_is_refused_without_being_parsed_and_the_message_stays_short(
    agent: Agents, drive: Driver
) -> None:
    spec = agent(OUTPUT, tools=TOOLS)
    huge = json.dumps({"city": "x" * 3_000_000, "temps": "y" * 100_000})
    model = ScriptedModel([text(huge), text("z" * 2_000_000), text(json.dumps(ANSWER))])
    run = await drive(spec, None, "w?", model=model)
    assert run.result.data == ANSWER
    repairs = [m["content"] for m in run.history if m["role"] == "user"][1:]
    assert all(len(r) < 2000 for r in repairs), [len(r) for r in repairs]
    assert "at most 1,000,000" in repairs[0]
    sent_back = [m["content"] for m in model.requests[-1].messages if m["role"] == "assistant"]
    assert [len(text) < 21_000 for text in sent_back] == [True, True]  # cut short, said so
    assert sent_back[0].endswith("more characters cut]")
    kept = [r for r in run.records() if r["type"] == "message" and r["role"] == "assistant"]
    assert len(kept[0]["content"]) == len(huge)  # the transcript keeps it whole


async def test_a_string_schema_takes_plain_text_and_an_array_schema_is_wrapped_on_the_wire(
    agent: Agents, drive: Driver
) -> None:
    spec = agent("output: {type: string, maxLength: 20}\n")
    run = await drive(spec, [text("Sunny and mild.")], "w?")
    assert run.result.data == "Sunny and mild."
    spec = agent("output: {type: array, items: {type: integer}}\n", name="lister")
    for strategy, reply in (
        ("response_format", text('{"value": [1, 2]}')),
        ("tool", tool_call("final_answer", value=[1, 2])),
    ):
        model = ScriptedModel([reply], structured_output=strategy)
        run = await drive(spec, None, "numbers?", model=model)
        assert run.result.data == [1, 2]
        request = model.requests[0]
        wire = (
            request.params["response_format"]["json_schema"]["schema"]
            if strategy == "response_format"
            else request.tools[-1]["function"]["parameters"]
        )
        assert wire["properties"]["value"] == {"type": "array", "items": {"type": "integer"}}


async def test_strict_is_asked_only_for_a_closed_schema(agent: Agents, drive: Driver) -> None:
    spec = agent("output: {type: object, properties: {a: {type: string}}}\n")
    model = ScriptedModel([text('{"a": "x"}')])
    await drive(spec, None, "?", model=model)
    assert model.requests[0].params["response_format"]["json_schema"]["strict"] is False


async def test_a_provider_that_refuses_response_format_gets_the_final_answer_tool(
    agent: Agents, drive: Driver
) -> None:
    spec = agent(OUTPUT, tools=TOOLS)
    refuse = ModelError("response_format json_schema is not supported together with tools", status=400)
    model = ScriptedModel([refuse, tool_call("final_answer", **ANSWER)])
    run = await drive(spec, None, "w?", model=model)
    assert run.result.data == ANSWER
    assert "response_format" in model.requests[0].params
    assert "response_format" not in model.requests[1].params
    assert model.requests[1].tools[-1]["function"]["name"] == "final_answer"
    assert any("refused response_format" in n.text and "final-answer tool" in n.text for n in run.notes())
    assert run.transcript_events("output_fallback")[0]["data"]["now"] == "tool"
    assert run.session.runtime.learned_output == {"scripted": "tool"}


async def test_a_provider_that_refuses_the_schema_everywhere_gets_instructions(
    agent: Agents, drive: Driver
) -> None:
    spec = agent(OUTPUT, tools=TOOLS)
    refusals = [
        ModelError("Invalid schema for response_format 'tester'", status=400),
        ModelError("Invalid schema for function 'final_answer': parameters", status=400),
    ]
    model = ScriptedModel([*refusals, text(json.dumps(ANSWER))])
    run = await drive(spec, None, "w?", model=model)
    assert run.result.data == ANSWER
    assert "reply with only a JSON value" in model.requests[2].messages[0]["content"]
    assert [e["data"]["now"] for e in run.transcript_events("output_fallback")] == ["tool", "text"]


async def test_an_unrelated_error_is_not_taken_for_a_refusal(agent: Agents, drive: Driver) -> None:
    spec = agent(OUTPUT, tools=TOOLS)
    with pytest.raises(ModelError, match="rate limited"):
        await drive(spec, [ModelError("rate limited", status=429)], "w?")
    with pytest.raises(ModelError, match="context length"):
        await drive(spec, [ModelError("maximum context length exceeded", status=400)], "w?")


async def test_answer_text_streams_as_drafts_and_other_calls_beside_a_valid_answer_are_not_run(
    agent: Agents, drive: Driver
) -> None:
    spec = agent(OUTPUT, tools=TOOLS)
    run = await drive(spec, [text(json.dumps(ANSWER))], "w?")
    drafts = "".join(e.text for e in run.events if isinstance(e, AnswerDraft))
    assert json.loads(drafts) == ANSWER


async def test_a_python_model_gives_python_callers_an_instance(agent: Agents, drive: Driver) -> None:
    (agent.root / "weather_types.py").write_text(
        "from pydantic import BaseModel, field_validator\n\n"
        "class Forecast(BaseModel):\n"
        "    city: str\n"
        "    temps: list[float]\n\n"
        "    @field_validator('city')\n"
        "    @classmethod\n"
        "    def known(cls, value: str) -> str:\n"
        "        if value != value.title():\n"
        "            raise ValueError('write the city capitalised')\n"
        "        return value\n",
        encoding="utf-8",
    )
    spec = agent("output: {python: 'weather_types:Forecast'}\n", tools=TOOLS)
    lower = {"city": "vancouver", "temps": [1]}
    run = await drive(spec, [text(json.dumps(lower)), text(json.dumps(ANSWER))], "w?")
    data = run.result.data
    assert type(data).__name__ == "Forecast" and data.city == "Vancouver" and data.temps == [11, 12, 9]
    repair = [m["content"] for m in run.history if m["role"] == "user"][1]
    assert "write the city capitalised" in repair  # the model's own validators count too


async def test_a_subagent_with_output_returns_the_object_as_its_tool_result(
    agent: Agents, drive: Driver, monkeypatch: pytest.MonkeyPatch
) -> None:
    (agent.root / "child.yaml").write_text(
        "version: 1\nname: child\nmodel: openai/scripted\n" + OUTPUT.strip() + "\n", encoding="utf-8"
    )
    child = ScriptedModel([text("It is 11 degrees."), text(json.dumps(ANSWER))])
    monkeypatch.setattr("runner.models.factory.make_model", lambda spec, **kw: child)
    spec = agent("tools:\n  - agent: child.yaml\n")
    run = await drive(spec, [tool_call("child", input="weather?"), text("Done.")], "ask the child")
    result = run.tool_results()[0]
    assert json.loads(result["content"]) == ANSWER
    assert run.result.output == "Done." and run.result.data is None


async def test_a_client_schema_applies_to_an_agent_without_output(agent: Agents, drive: Driver) -> None:
    from runner.agentfile.output_schema import OutputSchema
    from runner.session import RunOptions

    spec = agent(tools=TOOLS)
    client = OutputSchema(
        {"type": "object", "required": ["ok"]}, name="answer", where="the request's response_format"
    )
    model = ScriptedModel([text("{}"), text('{"ok": true}')])
    run = await drive(spec, None, "?", model=model, options=RunOptions(output=client))
    assert run.result.data == {"ok": True}
    assert model.requests[0].params["response_format"]["json_schema"]["name"] == "answer"
    repair = [m["content"] for m in run.history if m["role"] == "user"][1]
    assert "'ok' is a required property" in repair


async def test_a_reload_that_changes_the_schema_applies_from_the_next_turn(agent: Agents, home: Any) -> None:
    from runner.agentfile import load_agent
    from runner.runtime import RuntimeSettings
    from runner.session import Session, runtime_host

    spec = agent("output: {type: object, required: [a]}\n")
    model = ScriptedModel([text('{"a": 1}'), text('{"a": 1}'), text('{"b": 2}')])
    host = runtime_host(spec, RuntimeSettings(home=home), model=model)
    async with await Session.open(host) as session:
        assert (await session.run(["first"])).data == {"a": 1}
        spec.path.write_text(spec.path.read_text().replace("required: [a]", "required: [b]"))
        await session.reload(load_agent(spec.path, env={}))
        result = await session.run(["second"])
    assert result.data == {"b": 2}  # {"a": 1} no longer matches: sent back, and the model answers anew
    assert "'b' is a required property" in model.requests[-1].messages[-1]["content"]
    await host.aclose()
