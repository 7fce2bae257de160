"""How ``output:`` reaches a provider that is not OpenAI, measured on llmock's Anthropic endpoint.

What litellm does with ``response_format`` beside ``tools`` decides the strategy
(``runner.models.model_data.output_strategy``): for a model without native structured output it adds
a ``json_tool_call`` tool and forces it (the model must answer at once: the agent's tools are off),
so the runner uses its own final-answer tool there; for a model with it (claude-sonnet-4-5) it sends
``output_format`` beside the tools, so the runner sends ``response_format``.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

import runner
from runner.models.base import Request
from runner.models.model_data import output_strategy
from runner.runtime import RuntimeSettings

OLD = "anthropic/claude-3-5-haiku-latest"
NEW = "anthropic/claude-sonnet-4-5"
TOOL = {
    "type": "function",
    "function": {
        "name": "forecast",
        "description": "The temperatures of the next days.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "temps": {"type": "array", "items": {"type": "number"}}},
    "required": ["city", "temps"],
    "additionalProperties": False,
}
ANSWER = {"city": "Vancouver", "temps": [11, 12, 9]}


@pytest.mark.parametrize(("model_id", "forced"), [(OLD, True), (NEW, False)])
async def test_what_litellm_makes_of_response_format_beside_tools(
    llmock: Any, model_id: str, forced: bool
) -> None:
    from runner.models.litellm_model import LiteLLMModel

    llmock.reply("{}")
    model = LiteLLMModel(model_id, api_base=llmock.url + "/anthropic", api_key="sk-test")
    response_format = {"type": "json_schema", "json_schema": {"name": "w", "schema": SCHEMA, "strict": True}}
    request = Request(
        model_id,
        [{"role": "user", "content": "weather?"}],
        tools=[TOOL],
        params={"response_format": response_format},
        stream=False,
    )
    await model.complete(request)
    body = llmock.requests[-1].body
    if forced:  # the schema becomes a tool the model must call now: no forecast first
        assert body["tool_choice"] == {"type": "tool", "name": "json_tool_call"}
        assert output_strategy(model_id) == "tool"
    else:  # native structured output, beside the tools
        assert "tool_choice" not in body and body["output_format"]["type"] == "json_schema"
        assert output_strategy(model_id) == "response_format"
    await model.aclose()


def test_an_anthropic_agent_keeps_its_tools_and_answers_through_the_final_answer_tool(
    llmock: Any, tmp_path: Path
) -> None:
    (tmp_path / "prov_tools.py").write_text(
        'def forecast(city: str) -> str:\n    """The temperatures."""\n    return "11, 12, 9"\n',
        encoding="utf-8",
    )
    path = tmp_path / "agent.yaml"
    path.write_text(
        textwrap.dedent(
            f"""\
            version: 1
            name: weather
            model:
              id: {OLD}
              api_base: {llmock.url}/anthropic
              api_key: ${{ANTHROPIC_KEY:-sk-test}}
              retries: 0
            tools:
              - python: prov_tools
            output:
              type: object
              properties:
                city: {{type: string}}
                temps: {{type: array, items: {{type: number}}}}
              required: [city, temps]
              additionalProperties: false
            """
        ),
        encoding="utf-8",
    )
    llmock.call_tool("forecast", {"city": "Vancouver"}).call_tool("final_answer", ANSWER)
    settings = RuntimeSettings(home=tmp_path / "home", write_transcript=False)
    result = runner.Agent.from_file(path, settings=settings).run_sync("weather in Vancouver?")
    assert result.data == ANSWER
    first, second = (record.body for record in llmock.requests)
    for body in (first, second):
        assert [t["name"] for t in body["tools"]] == ["forecast", "final_answer"]
        assert "tool_choice" not in body and "output_format" not in body
    assert len(llmock.requests) == 2  # no request after the final answer
