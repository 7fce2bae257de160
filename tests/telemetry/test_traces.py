"""GenAI spans of a run, as a tracing backend sees them (the SDK's in-memory exporter)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.models.base import Reply, Usage
from runner.testing import run_agent, text, tool_call
from tests.telemetry.helpers import Traces, write_agent

TOOLS = '''
def lookup(city: str, api_key: str = "") -> str:
    """Weather of a city."""
    return f"sunny in {city}"


def broken() -> str:
    """Always fails."""
    raise RuntimeError("no luck")
'''

BODY = """
tools:
  - python: $TOOLS
"""


async def test_a_run_is_an_invoke_agent_span_with_its_chat_and_tool_spans(
    tmp_path: Path, traces: Traces
) -> None:
    path = write_agent(tmp_path, BODY, TOOLS, name="weather")
    script = [
        tool_call("lookup", city="Paris"),
        Reply(content="It is sunny.", usage=Usage(12, 4, 16), finish_reason="stop", model="scripted-1"),
    ]
    run = await run_agent(path, "Weather in Paris?", script=script)
    assert run.output == "It is sunny."
    agent = traces.one("invoke_agent weather")
    chats = traces.named("chat scripted")
    tool = traces.one("execute_tool lookup")
    assert len(chats) == 2
    a = agent.attributes
    assert a["gen_ai.operation.name"] == "invoke_agent"
    assert a["gen_ai.agent.name"] == "weather"
    assert a["gen_ai.conversation.id"] == run.session.session_id
    assert a["gen_ai.provider.name"] == "openai"
    assert a["runner.agent.path"] == str(path)
    assert len(str(a["runner.agent.revision"])) == 16  # outside git: the configuration's hash
    # every span of the run is in the agent's trace, under its span
    assert {s.context.trace_id for s in traces.spans} == {agent.context.trace_id}
    assert all(c.parent is not None and c.parent.span_id == agent.context.span_id for c in chats)
    assert tool.parent is not None and tool.parent.span_id == agent.context.span_id
    last = chats[-1].attributes
    assert last["gen_ai.operation.name"] == "chat"
    assert last["gen_ai.request.model"] == "scripted"
    assert last["gen_ai.response.model"] == "scripted-1"
    assert last["gen_ai.response.finish_reasons"] == ("stop",)
    assert (last["gen_ai.usage.input_tokens"], last["gen_ai.usage.output_tokens"]) == (12, 4)
    assert [c.attributes["runner.step"] for c in chats] == [1, 2]  # the loop's step of each call
    t = tool.attributes
    assert t["gen_ai.operation.name"] == "execute_tool"
    assert t["gen_ai.tool.name"] == "lookup"
    assert t["gen_ai.tool.type"] == "function"
    assert t["gen_ai.agent.name"] == "weather"
    assert t["runner.step"] == 1
    assert str(t["gen_ai.tool.call.id"]).startswith("call")
    assert "gen_ai.tool.call.arguments" not in t  # content only when the user opts in
    assert "gen_ai.input.messages" not in last
    assert [e.name for e in agent.events] == ["runner.turn"]
    assert agent.events[0].attributes["runner.turn.reason"] == "done"


async def test_a_failing_tool_is_an_error_span_and_the_model_error_type_is_named(
    tmp_path: Path, traces: Traces
) -> None:
    path = write_agent(tmp_path, BODY, TOOLS)
    await run_agent(path, "Try.", script=[tool_call("broken"), text("It broke.")])
    tool = traces.one("execute_tool broken")
    assert tool.attributes["error.type"] == "tool_error"
    assert tool.status.status_code.name == "ERROR"
    assert tool.attributes["runner.tool.outcome"] == "error"


async def test_streamed_calls_parent_on_the_agent_not_the_chat_span(tmp_path: Path, traces: Traces) -> None:
    # a call whose arguments are complete starts while the model still streams (eager start)
    path = write_agent(tmp_path, BODY, TOOLS)  # model.stream is on by default
    from runner.testing.model import tool_calls

    script = [tool_calls(("lookup", {"city": "A"}), ("lookup", {"city": "B"})), text("Done.")]
    await run_agent(path, "Two cities.", script=script)
    agent = traces.one("invoke_agent tester")
    tools = traces.named("execute_tool lookup")
    assert len(tools) == 2
    assert {t.parent.span_id for t in tools if t.parent} == {agent.context.span_id}


async def test_content_is_recorded_only_on_opt_in_with_secrets_redacted(
    tmp_path: Path, traces: Traces, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-live-0123456789abcdef"
    monkeypatch.setenv("WEATHER_API_KEY", secret)
    monkeypatch.setattr(traces_tracing(), "capture_content", True)
    path = write_agent(tmp_path, BODY + 'vars:\n  key: "${WEATHER_API_KEY}"\n', TOOLS)
    script = [tool_call("lookup", city=f"Paris {secret}", api_key="plain-but-named"), text("Ok.")]
    await run_agent(path, "Weather?", script=script)
    tool = traces.one("execute_tool lookup")
    arguments = json.loads(str(tool.attributes["gen_ai.tool.call.arguments"]))
    assert arguments == {"city": "Paris ***", "api_key": "***"}
    assert tool.attributes["gen_ai.tool.call.result"] == "sunny in Paris ***"
    chat = traces.named("chat scripted")[0]
    messages = json.loads(str(chat.attributes["gen_ai.input.messages"]))
    assert messages[-1] == {"role": "user", "content": "Weather?"}
    for span in traces.spans:
        assert secret not in json.dumps(dict(span.attributes or {}))


async def test_model_calls_are_counted_in_the_genai_metrics(tmp_path: Path, traces: Traces) -> None:
    path = write_agent(tmp_path, "")
    await run_agent(path, "Hi", script=[Reply(content="Hello", usage=Usage(9, 2, 11))])
    durations = traces.metric_points("gen_ai.client.operation.duration")
    assert len(durations) == 1 and durations[0].count == 1
    assert durations[0].attributes["gen_ai.request.model"] == "scripted"
    tokens = {
        p.attributes["gen_ai.token.type"]: p.sum for p in traces.metric_points("gen_ai.client.token.usage")
    }
    assert tokens == {"input": 9, "output": 2}


def traces_tracing() -> object:
    import runner.telemetry as telemetry

    return telemetry._tracing


@pytest.mark.parametrize("fast_path", [True, False], ids=["httpx fast path", "litellm"])
async def test_a_model_request_carries_the_chat_spans_traceparent(
    tmp_path: Path, traces: Traces, fast_path: bool
) -> None:
    from runner.testing import ScriptedServer

    path = write_agent(tmp_path, "")
    with ScriptedServer([{"content": "Hi"}]) as server:
        run = await run_agent(path, "Hello", server=server, fast_path=fast_path)
        sent = server.headers[0].get("traceparent", "")
    assert run.output == "Hi"
    chat = traces.one("chat openai/scripted")
    assert sent.split("-")[:3] == ["00", f"{chat.context.trace_id:032x}", f"{chat.context.span_id:016x}"]


def test_off_every_scope_is_the_one_no_op_and_nothing_is_sent() -> None:
    import runner.telemetry as telemetry

    assert not telemetry.active()
    assert telemetry.agent("a", conversation_id="c", model="m") is telemetry.NOOP
    assert telemetry.chat("m", stream=True) is telemetry.NOOP
    assert telemetry.tool("t", call_id="1", agent_name="a") is telemetry.NOOP
    assert telemetry.inject({}) == {} and telemetry.trace_headers() == {}
    with telemetry.continue_trace({"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}):
        assert telemetry.trace_headers() == {}
