"""Client tools over HTTP: the answer stops at the client's calls, and the follow-up request goes on."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

ADD_TOOLS = '''
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
'''

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


def reply(body: dict[str, Any]) -> dict[str, Any]:
    """Call the agent's add and the client's get_weather together; answer once both results are in."""
    if body["messages"][-1]["role"] == "user":
        return {
            "content": "Checking.",
            "tool_calls": [
                {"id": "call_add", "name": "add", "arguments": {"a": 2, "b": 3}},
                {"id": "call_weather", "name": "get_weather", "arguments": {"city": "Paris"}},
            ],
        }
    return {"content": "Sunny, and 2 + 3 = 5."}


@pytest.fixture
def weather(scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any]) -> Any:
    server = scripted(reply)
    agent_files.write("helper", server, "prompts:\n  system: You help.", tools=ADD_TOOLS)
    served = serve_app([agent_files.root])
    served.model_server = server
    return served


async def ask(
    served: Any, *, mode: str, messages: list[dict[str, Any]]
) -> tuple[str, list[dict[str, Any]], str]:
    """One request through the openai SDK in ``mode``; (content, client calls, finish reason)."""
    kwargs: dict[str, Any] = {"model": "helper", "messages": messages, "tools": [WEATHER]}
    stream = mode.endswith("stream")
    if mode.startswith("async"):
        client = served.async_openai()
        if stream:
            chunks = [c async for c in await client.chat.completions.create(stream=True, **kwargs)]
        else:
            answer = await client.chat.completions.create(**kwargs)
        await client.close()
    else:
        client = served.openai()
        if stream:
            chunks = list(
                await asyncio.to_thread(lambda: list(client.chat.completions.create(stream=True, **kwargs)))
            )
        else:
            answer = await asyncio.to_thread(client.chat.completions.create, **kwargs)
    if not stream:
        message = answer.choices[0].message
        calls = [c.model_dump(exclude_none=True) for c in message.tool_calls or []]
        return message.content or "", calls, answer.choices[0].finish_reason
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    calls = []
    for chunk in chunks:
        for delta_call in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            data = delta_call.model_dump(exclude_none=True)
            data.pop("index")
            calls.append(data)
    finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert len(finish) == 1
    return content, calls, finish[0]


@pytest.mark.parametrize("mode", ["sync", "sync-stream", "async", "async-stream"])
async def test_client_calls_end_the_answer_and_their_results_continue_it(weather: Any, mode: str) -> None:
    question = [{"role": "user", "content": "Weather in Paris, and 2+3?"}]
    content, calls, finish = await ask(weather, mode=mode, messages=question)
    assert finish == "tool_calls"
    assert calls == [
        {
            "id": "call_weather",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
        }
    ]
    assert content.startswith('Checking.\n<details type="tool_calls" done="true" id="call_add" name="add"')
    assert "get_weather" not in content  # the client's call is not shown as executed

    follow_up = [
        *question,
        {"role": "assistant", "content": content, "tool_calls": calls},
        {"role": "tool", "tool_call_id": "call_weather", "content": "sunny, 5 C"},
    ]
    content, calls, finish = await ask(weather, mode=mode, messages=follow_up)
    assert (content, calls, finish) == ("Sunny, and 2 + 3 = 5.", [], "stop")

    first, second = weather.model_server.requests
    assert [t["function"]["name"] for t in first["tools"]] == ["add", "get_weather"]
    assert json.dumps(first["tools"]) == json.dumps(second["tools"])  # the tools prefix is byte-stable
    assert json.dumps(first["messages"][:2]) == json.dumps(second["messages"][:2])
    assert second["messages"][2:] == [
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {
                    "id": "call_add",
                    "type": "function",
                    "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'},
                },
                {
                    "id": "call_weather",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_add", "content": "5"},
        {"role": "tool", "tool_call_id": "call_weather", "content": "sunny, 5 C"},
    ]


async def test_tool_choice_none_hides_the_client_tools(weather: Any) -> None:
    client = weather.async_openai()
    await client.chat.completions.create(
        model="helper",
        messages=[{"role": "user", "content": "hi"}],
        tools=[WEATHER],  # type: ignore[list-item]
        tool_choice="none",
    )
    await client.close()
    assert [t["function"]["name"] for t in weather.model_server.requests[0]["tools"]] == ["add"]
