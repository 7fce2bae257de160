"""Client function tools over the Responses API: the answer ends with ``function_call`` items, the
client continues with ``function_call_output`` (resending the history, or by
``previous_response_id``); the agent's own tool steps show as ``mcp_call`` items; hosted tool types
are left out, and forcing one is a 400."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import openai
import pytest

from tests.serve_responses.conftest import check_events

ADD_TOOLS = '''
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
'''

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
    "strict": True,
}


def reply(body: dict[str, Any]) -> dict[str, Any]:
    """Call the agent's add and the client's get_weather; answer with the weather once it is in."""
    last = body["messages"][-1]
    if last["role"] == "user":
        return {
            "content": "Checking.",
            "tool_calls": [
                {"id": "call_add", "name": "add", "arguments": {"a": 2, "b": 3}},
                {"id": "call_weather", "name": "get_weather", "arguments": {"city": "Paris"}},
            ],
        }
    results = {m["tool_call_id"]: m["content"] for m in body["messages"] if m["role"] == "tool"}
    return {"content": f"{results['call_weather']}, and 2 + 3 = {results['call_add']}."}


@pytest.fixture
def weather(scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any]) -> Any:
    server = scripted(reply)
    agent_files.write("helper", server, "prompts:\n  system: You help.", tools=ADD_TOOLS)
    served = serve_app([agent_files.root])
    served.model_server = server
    return served


def _first(client: openai.OpenAI, stream: bool, **extra: Any) -> Any:
    kwargs: dict[str, Any] = {
        "model": "helper",
        "input": "Weather in Paris? And 2+3?",
        "tools": [WEATHER],
        **extra,
    }
    if not stream:
        return client.responses.create(**kwargs)
    with client.responses.stream(**kwargs) as events:
        for _ in events:
            pass
        return events.get_final_response()


@pytest.mark.parametrize("stream", [False, True])
def test_client_call_then_output_by_previous_response_id(weather: Any, stream: bool) -> None:
    client = weather.openai()
    first = _first(client, stream)
    kinds = [item.type for item in first.output]
    assert kinds == ["message", "mcp_call", "function_call"]
    step, call = first.output[1], first.output[2]
    assert (step.name, json.loads(step.arguments), step.output) == ("add", {"a": 2, "b": 3}, "5")
    assert (call.call_id, call.name, json.loads(call.arguments)) == (
        "call_weather",
        "get_weather",
        {"city": "Paris"},
    )
    second = client.responses.create(
        model="helper",
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "Sunny"}],
        tools=[WEATHER],
    )
    assert second.output_text == "Sunny, and 2 + 3 = 5."
    assert second.previous_response_id == first.id


def test_client_call_then_output_by_resending_history(weather: Any) -> None:
    client = weather.openai()
    first = _first(client, False)
    history: list[Any] = [{"role": "user", "content": "Weather in Paris? And 2+3?"}]
    history += [item.model_dump(exclude_none=True) for item in first.output]
    history.append({"type": "function_call_output", "call_id": "call_weather", "output": "Rainy"})
    second = client.responses.create(model="helper", input=history, tools=[WEATHER], store=False)
    assert second.output_text == "Rainy, and 2 + 3 = 5."
    sent = weather.model_server.requests[-1]["messages"]
    tool_ids = [m["tool_call_id"] for m in sent if m["role"] == "tool"]
    assert tool_ids == ["call_add", "call_weather"], "the agent's own step is the call and result again"


CARRIED = ["reasoning.encrypted_content"]


def _carried(client: openai.OpenAI, stream: bool) -> Any:
    return _first(client, stream, store=False, include=CARRIED)


@pytest.mark.parametrize("stream", [False, True])
def test_with_encrypted_reasoning_asked_each_own_step_also_rides_in_a_reasoning_item(
    weather: Any, stream: bool
) -> None:
    first = _carried(weather.openai(), stream)
    assert [item.type for item in first.output] == ["message", "mcp_call", "reasoning", "function_call"]
    carrier = first.output[2]
    assert carrier.summary == [] and carrier.encrypted_content.startswith("runner.step.1:")


@pytest.mark.parametrize("keep_mcp_call", [True, False])
def test_a_resent_history_gets_the_step_back_from_its_reasoning_item_once(
    weather: Any, keep_mcp_call: bool
) -> None:
    # Codex resends reasoning items and not mcp_call ones; openai-agents resends both
    client = weather.openai()
    first = _carried(client, False)
    items = [item.model_dump(exclude_none=True) for item in first.output]
    history: list[Any] = [{"role": "user", "content": "Weather in Paris? And 2+3?"}]
    history += [item for item in items if keep_mcp_call or item["type"] != "mcp_call"]
    history.append({"type": "function_call_output", "call_id": "call_weather", "output": "Rainy"})
    second = client.responses.create(
        model="helper", input=history, tools=[WEATHER], store=False, include=CARRIED
    )
    assert second.output_text == "Rainy, and 2 + 3 = 5."
    sent = weather.model_server.requests[-1]["messages"]
    assert [m["tool_call_id"] for m in sent if m["role"] == "tool"] == ["call_add", "call_weather"]


def test_a_reasoning_item_of_another_server_is_left_alone_and_a_broken_step_is_a_400(weather: Any) -> None:
    client = weather.openai()
    foreign = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAAB-opaque"}
    answered = client.responses.create(
        model="helper", input=[{"role": "user", "content": "hi"}, foreign], store=False
    )
    assert answered.status == "completed"
    broken = {**foreign, "encrypted_content": "runner.step.1:not-base64-json"}
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="helper", input=[{"role": "user", "content": "hi"}, broken])
    assert caught.value.body["param"] == "input[1].encrypted_content"
    assert "not a step this server wrote" in caught.value.body["message"]


def test_output_for_a_call_never_issued_is_a_400(weather: Any) -> None:
    client = weather.openai()
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(
            model="helper",
            input=[
                {"role": "user", "content": "hi"},
                {"type": "function_call_output", "call_id": "call_nobody", "output": "x"},
            ],
        )
    assert caught.value.body["param"] == "input[1].call_id"
    assert "call_nobody" in caught.value.body["message"]


def test_hosted_tools_are_left_out_with_a_warning(
    scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any]
) -> None:
    server = scripted([{"content": "Plain answer."}])
    agent_files.write("plain", server)
    lines: list[str] = []
    served = serve_app([agent_files.root], report=lines.append)
    client = served.openai()
    namespace = {
        "type": "namespace",
        "name": "mcp__files",
        "description": "file tools",
        "tools": [
            {"type": "function", "name": "read_file", "parameters": {"type": "object", "properties": {}}}
        ],
    }
    response = client.responses.create(
        model="plain",
        input="hi",
        tools=[{"type": "web_search"}, {"type": "file_search", "vector_store_ids": ["v"]}, namespace],
    )
    assert response.output_text == "Plain answer."
    offered = [t["function"]["name"] for t in server.requests[-1].get("tools", [])]
    assert offered == ["read_file"], "the namespace's functions are offered, hosted tools are not"
    assert any("file_search, web_search" in line for line in lines), lines


def test_namespaced_call_says_its_namespace(
    scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any]
) -> None:
    server = scripted([{"tool_calls": [{"id": "call_r", "name": "read_file", "arguments": {}}]}])
    agent_files.write("plain", server)
    client = serve_app([agent_files.root]).openai()
    namespace = {
        "type": "namespace",
        "name": "files",
        "description": "d",
        "tools": [{"type": "function", "name": "read_file"}],
    }
    events = [
        e.model_dump()
        for e in client.responses.create(model="plain", input="hi", tools=[namespace], stream=True)
    ]
    final = check_events(events)
    assert final is not None
    (call,) = final["output"]
    assert (call["type"], call["name"], call["namespace"]) == ("function_call", "read_file", "files")
    kinds = [e["type"] for e in events]
    assert kinds.index("response.function_call_arguments.delta") < kinds.index(
        "response.function_call_arguments.done"
    )


def test_tool_choice_forcing_a_hosted_tool_is_a_400(weather: Any) -> None:
    client = weather.openai()
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(
            model="helper", input="hi", tools=[{"type": "web_search"}], tool_choice={"type": "web_search"}
        )
    assert caught.value.body["param"] == "tool_choice"
    assert "web_search" in caught.value.body["message"]
    assert weather.model_server.requests == []


def test_tool_choice_forcing_a_function_answers_with_one_call_of_it(
    scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any]
) -> None:
    server = scripted([{"content": json.dumps({"city": "Lima"})}])
    agent_files.write("plain", server)
    client = serve_app([agent_files.root]).openai()
    forced = {"type": "function", "name": "get_weather"}
    response = client.responses.create(
        model="plain", input="Pick a city.", tools=[WEATHER], tool_choice=forced
    )
    (call,) = response.output
    assert (call.type, call.name, json.loads(call.arguments)) == (
        "function_call",
        "get_weather",
        {"city": "Lima"},
    )
    assert response.tool_choice.name == "get_weather"
