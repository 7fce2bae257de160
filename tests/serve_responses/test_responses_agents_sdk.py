"""openai-agents with ``OpenAIResponsesModel`` pointed at ``runner serve``: its function tools are
client tools of the served agent, whose own tool steps (``mcp_call`` items) it records and never
runs; streamed and not."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

ADD_TOOLS = '''
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
'''


def reply(body: dict[str, Any]) -> dict[str, Any]:
    """Call the served agent's add and the client's lookup; then answer from both results."""
    results = {m["tool_call_id"]: m["content"] for m in body["messages"] if m["role"] == "tool"}
    if "call_lookup" not in results:
        return {
            "content": "Working.",
            "reasoning": "I need both.",
            "tool_calls": [
                {"id": "call_add", "name": "add", "arguments": {"a": 20, "b": 22}},
                {"id": "call_lookup", "name": "lookup", "arguments": {"city": "Oslo"}},
            ],
        }
    return {"content": f"{results['call_lookup']}; the sum is {results['call_add']}."}


@pytest.fixture
def served(scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any]) -> Any:
    from agents import set_tracing_disabled  # openai-agents imported where used: ~1 s

    set_tracing_disabled(True)
    server = scripted(reply)
    agent_files.write("helper", server, "prompts:\n  system: You help.", tools=ADD_TOOLS)
    served = serve_app([agent_files.root])
    served.model_server = server
    return served


def _agent(served: Any, looked_up: list[str]) -> Any:
    from agents import Agent, OpenAIResponsesModel, function_tool

    @function_tool
    def lookup(city: str) -> str:
        """The population of a city."""
        looked_up.append(city)
        return f"{city} has 700k people"

    model = OpenAIResponsesModel(model="helper", openai_client=served.async_openai())
    return Agent(name="client", instructions="Use tools.", model=model, tools=[lookup])


@pytest.mark.parametrize("streamed", [False, True])
async def test_agents_sdk_runs_its_function_tool_through_the_server(served: Any, streamed: bool) -> None:
    from agents import Runner

    looked_up: list[str] = []
    agent = _agent(served, looked_up)
    if streamed:
        result = Runner.run_streamed(agent, "How many people live in Oslo, and what is 20+22?")
        kinds = [event.type async for event in result.stream_events()]
        assert "raw_response_event" in kinds
    else:
        result = await Runner.run(agent, "How many people live in Oslo, and what is 20+22?")
    assert result.final_output == "Oslo has 700k people; the sum is 42."
    assert looked_up == ["Oslo"], "its own tool ran once; the served agent's add was never run by it"
    items = [item.type for item in result.new_items]
    assert "tool_call_item" in items and "tool_call_output_item" in items
    sent = served.model_server.requests[-1]["messages"]
    assert [m["tool_call_id"] for m in sent if m["role"] == "tool"] == ["call_add", "call_lookup"]
