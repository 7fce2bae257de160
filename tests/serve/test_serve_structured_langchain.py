"""LangChain's ``with_structured_output`` against ``runner serve``, in each of its three methods.

``langchain_openai.ChatOpenAI`` talks to the app on uvicorn (127.0.0.1) through the checked
httpx client; the agent runs on the scripted model server and calls its own tool before answering.

- ``json_schema`` (the default): a ``response_format`` ``json_schema``, honoured like any other.
- ``json_mode``: ``response_format: json_object``; LangChain parses the content.
- ``function_calling``: the schema comes as a client tool that ``tool_choice`` forces, and LangChain
  reads the answer from that tool's call. Serve takes the forced tool as the shape of the answer:
  the agent keeps its own tools and loop, its answer is checked against the tool's parameters, and
  it goes back as the one call of that tool (``finish_reason: tool_calls``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import openai
import pydantic
import pytest

ADD_TOOLS = '''
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
'''


class Sum(pydantic.BaseModel):
    """The sum of two numbers."""

    total: int
    note: str


SUM = {"total": 5, "note": "2 + 3"}


def add_then_answer(body: dict[str, Any]) -> dict[str, Any]:
    if body["messages"][-1]["role"] == "user":
        return {"tool_calls": [{"id": "call_add", "name": "add", "arguments": {"a": 2, "b": 3}}]}
    return {"content": json.dumps(SUM)}


@pytest.fixture
def helper(scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any]) -> Any:
    server = scripted(add_then_answer, repeat=True)
    agent_files.write("helper", server, "prompts:\n  system: You help.", tools=ADD_TOOLS)
    served = serve_app([agent_files.root])
    served.model_server = server
    return served


def chat(served: Any) -> Any:
    from langchain_openai import ChatOpenAI  # imported by the tests that use it: ~1.5 s

    return ChatOpenAI(
        base_url=served.base_url, api_key="sk-none", model="helper", http_client=served.http(), max_retries=0
    )


def tool_names(body: dict[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in body.get("tools") or []]


def test_with_structured_output_default_method_returns_an_instance(helper: Any) -> None:
    answer = chat(helper).with_structured_output(Sum).invoke("What is 2 + 3?")
    assert answer == Sum(**SUM)
    first, _second = helper.model_server.requests
    assert tool_names(first) == ["add"]  # the agent's tool is kept beside the schema
    assert first["response_format"]["json_schema"]["name"] == "Sum"


def test_with_structured_output_json_mode_returns_an_instance(helper: Any) -> None:
    answer = (
        chat(helper).with_structured_output(Sum, method="json_mode").invoke("What is 2 + 3? Answer in JSON.")
    )
    assert answer == Sum(**SUM)
    assert helper.model_server.requests[0]["response_format"]["json_schema"]["schema"]["type"] == "object"


def test_with_structured_output_function_calling_returns_an_instance(helper: Any) -> None:
    answer = chat(helper).with_structured_output(Sum, method="function_calling").invoke("What is 2 + 3?")
    assert answer == Sum(**SUM)
    first, second = helper.model_server.requests
    # The forced tool is not offered to the model: it is the answer's schema; the agent's add runs.
    assert tool_names(first) == ["add"] and "tool_choice" not in first
    spec = first["response_format"]["json_schema"]
    assert spec["name"] == "Sum" and spec["schema"]["required"] == ["total", "note"]
    assert second["messages"][-1] == {"role": "tool", "tool_call_id": "call_add", "content": "5"}


# langchain-openai dumps the SDK's stream chunks, whose ``parsed`` field is typed None: pydantic warns.
@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings:UserWarning")
@pytest.mark.parametrize("method", ["json_schema", "json_mode", "function_calling"])
def test_each_method_streamed_ends_with_an_instance(helper: Any, method: str) -> None:
    structured = chat(helper).with_structured_output(Sum, method=method)  # type: ignore[arg-type]
    chunks = list(structured.stream("What is 2 + 3? Answer in JSON."))
    assert chunks and chunks[-1] == Sum(**SUM)
    assert [t["function"]["name"] for t in helper.model_server.requests[0]["tools"]] == ["add"]


SUM_TOOL = {
    "type": "function",
    "function": {
        "name": "Sum",
        "parameters": {
            "type": "object",
            "properties": {"total": {"type": "integer"}, "note": {"type": "string"}},
            "required": ["total", "note"],
        },
    },
}
FORCED = {"type": "function", "function": {"name": "Sum"}}


@pytest.mark.parametrize("stream", [False, True])
def test_a_forced_client_tool_is_answered_with_one_checked_call(helper: Any, stream: bool) -> None:
    client = helper.openai()
    kwargs: dict[str, Any] = {
        "model": "helper",
        "messages": [{"role": "user", "content": "2 + 3?"}],
        "tools": [SUM_TOOL],
        "tool_choice": FORCED,
    }
    if stream:
        chunks = list(client.chat.completions.create(stream=True, **kwargs))
        calls = [call for c in chunks if c.choices for call in c.choices[0].delta.tool_calls or []]
        finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
        content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    else:
        answer = client.chat.completions.create(**kwargs)
        calls = list(answer.choices[0].message.tool_calls or [])
        finish = [answer.choices[0].finish_reason]
        content = answer.choices[0].message.content or ""
    assert finish == ["tool_calls"] and content == ""
    (call,) = calls
    assert call.function.name == "Sum" and json.loads(call.function.arguments) == SUM
    assert call.id.startswith("call_")


def test_a_forced_tool_whose_answer_does_not_validate_is_repaired(
    scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any]
) -> None:
    server = scripted([{"content": '{"total": 5}'}, {"content": json.dumps(SUM)}])
    agent_files.write("helper", server)
    served = serve_app([agent_files.root])
    answer = served.openai().chat.completions.create(
        model="helper", messages=[{"role": "user", "content": "2 + 3?"}], tools=[SUM_TOOL], tool_choice=FORCED
    )
    (call,) = answer.choices[0].message.tool_calls or []
    assert json.loads(call.function.arguments) == SUM
    told = server.requests[1]["messages"][-1]["content"]
    assert "at $: 'note' is a required property" in told


@pytest.mark.parametrize(
    ("extra", "param", "says"),
    [
        (
            {"tool_choice": {"type": "function", "function": {"name": "Nope"}}},
            "tool_choice",
            "not in 'tools'",
        ),
        ({"tool_choice": {"type": "function"}}, "tool_choice", "must be none, auto, required"),
        ({"tool_choice": FORCED, "response_format": {"type": "json_object"}}, "tool_choice", "two shapes"),
    ],
)
def test_a_bad_tool_choice_is_a_400(helper: Any, extra: dict[str, Any], param: str, says: str) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        helper.openai().chat.completions.create(
            model="helper", messages=[{"role": "user", "content": "hi"}], tools=[SUM_TOOL], **extra
        )
    error = caught.value.body
    assert isinstance(error, dict) and error["param"] == param and says in error["message"]
    assert helper.model_server.requests == []


def test_a_forced_tool_with_unusable_parameters_is_a_400(helper: Any) -> None:
    bad = {"type": "function", "function": {"name": "Sum", "parameters": {"type": "objekt"}}}
    with pytest.raises(openai.BadRequestError) as caught:
        helper.openai().chat.completions.create(
            model="helper", messages=[{"role": "user", "content": "hi"}], tools=[bad], tool_choice=FORCED
        )
    error = caught.value.body
    assert isinstance(error, dict) and error["param"] == "tools[0].function.parameters"
    assert "unknown type 'objekt'" in error["message"]


def test_a_forced_tool_that_conflicts_with_the_agents_output_is_refused(
    scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any]
) -> None:
    server = scripted([{"content": json.dumps({"city": "Paris"})}])
    agent_files.write("teller", server, "output:\n  type: object\n  properties:\n    city: {type: string}")
    served = serve_app([agent_files.root])
    with pytest.raises(openai.BadRequestError) as caught:
        served.openai().chat.completions.create(
            model="teller", messages=[{"role": "user", "content": "hi"}], tools=[SUM_TOOL], tool_choice=FORCED
        )
    error = caught.value.body
    assert isinstance(error, dict) and (error["code"], error["param"]) == (
        "response_format_conflict",
        "tool_choice",
    )
    assert error["message"].startswith(
        "the shape the forced tool_choice 'Sum' asks for conflicts with this agent's own"
    )
    assert server.requests == []
    # The same shape as the agent's: answered as the call, with the agent's checked answer.
    city = dict(
        SUM_TOOL,
        function={
            "name": "City",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    )
    answer = served.openai().chat.completions.create(
        model="teller",
        messages=[{"role": "user", "content": "hi"}],
        tools=[city],
        tool_choice={"type": "function", "function": {"name": "City"}},
    )
    (call,) = answer.choices[0].message.tool_calls or []
    assert (call.function.name, json.loads(call.function.arguments)) == ("City", {"city": "Paris"})
