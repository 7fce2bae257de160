"""Structured output on the Responses API (``text.format``, ``responses.parse``), an agent's own
``output:``, conflicts, and per-request parameters that only lower the agent's."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import openai
import pydantic
import pytest

from tests.serve.structured_common import ADD_TOOLS, SUM, SUM_OUTPUT


class Sum(pydantic.BaseModel):
    total: int
    note: str


class Other(pydantic.BaseModel):
    city: str


def add_then(answer: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def reply(body: dict[str, Any]) -> dict[str, Any]:
        if body["messages"][-1]["role"] == "user":
            return {"tool_calls": [{"id": "call_add", "name": "add", "arguments": {"a": 2, "b": 3}}]}
        return {"content": answer if isinstance(answer, str) else json.dumps(answer)}

    return reply


@pytest.mark.parametrize("stream", [False, True])
def test_parse_with_a_pydantic_model(
    scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any], stream: bool
) -> None:
    server = scripted(add_then(SUM))
    agent_files.write("helper", server, tools=ADD_TOOLS)
    client = serve_app([agent_files.root]).openai()
    if stream:
        with client.responses.stream(model="helper", input="2 + 3?", text_format=Sum) as events:
            response = events.get_final_response()
        parsed = Sum.model_validate_json(response.output_text)
    else:
        response = client.responses.parse(model="helper", input="2 + 3?", text_format=Sum)
        parsed = response.output_parsed
    assert parsed == Sum(**SUM)
    assert [item.type for item in response.output] == ["message"], "the JSON alone: no tool step items"
    spec = server.requests[0]["response_format"]["json_schema"]
    assert spec["name"] == "Sum" and spec["schema"]["required"] == ["total", "note"]


def test_json_object_and_a_repair(
    scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any]
) -> None:
    server = scripted([{"content": '{"total": "five", "note": "x"}'}, {"content": json.dumps(SUM)}])
    agent_files.write("helper", server)
    client = serve_app([agent_files.root]).openai()
    response = client.responses.parse(model="helper", input="2 + 3?", text_format=Sum)
    assert response.output_parsed == Sum(**SUM) and len(server.requests) == 2
    told = server.requests[1]["messages"][-1]
    assert told["role"] == "user" and "'five' is not of type 'integer'" in told["content"]
    loose = scripted([{"content": "Sure:\n```json\n" + json.dumps(SUM) + "\n```"}])
    agent_files.write("loose", loose)
    client = serve_app([agent_files.root]).openai()
    answer = client.responses.create(model="loose", input="2 + 3?", text={"format": {"type": "json_object"}})
    assert json.loads(answer.output_text) == SUM, "the object, not the prose around it"


def test_an_agent_with_output_answers_json_and_refuses_another_shape(
    scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any]
) -> None:
    server = scripted(add_then(SUM), repeat=True)
    agent_files.write("summer", server, SUM_OUTPUT, tools=ADD_TOOLS)
    client = serve_app([agent_files.root]).openai()
    response = client.responses.create(model="summer", input="2 + 3?")
    assert json.loads(response.output_text) == SUM
    same = client.responses.create(model="summer", input="2 + 3?", text={"format": {"type": "json_object"}})
    assert json.loads(same.output_text) == SUM
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.parse(model="summer", input="2 + 3?", text_format=Other)
    assert (caught.value.body["code"], caught.value.body["param"]) == (
        "response_format_conflict",
        "text.format",
    )


def test_request_parameters_only_lower_the_agents(
    scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any]
) -> None:
    server = scripted([{"content": "ok"}], repeat=True)
    agent_files.write("helper", server, model="temperature: 0.5\nmax_tokens: 100")
    client = serve_app([agent_files.root]).openai()
    client.responses.create(
        model="helper",
        input="hi",
        temperature=1.5,
        max_output_tokens=500,
        top_p=0.9,
        reasoning={"effort": "low"},
        truncation="auto",
        user="u1",
        include=["reasoning.encrypted_content"],
        prompt_cache_key="k",
        service_tier="auto",
        safety_identifier="s",
        parallel_tool_calls=False,
    )
    lowered = client.responses.create(model="helper", input="hi", temperature=0.1, max_output_tokens=20)
    first, second = server.requests
    assert (first["temperature"], first["max_tokens"]) == (0.5, 100), "never above the agent's"
    assert (second["temperature"], second["max_tokens"]) == (0.1, 20)
    assert lowered.max_output_tokens == 20 and lowered.temperature == 0.1
