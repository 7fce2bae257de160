"""What ``output:`` sends on the wire, measured on the scripted OpenAI-compatible server, on both paths.

The fast path (httpx) and litellm (``openai/...`` with an ``api_base``, the fast path off) both send
``response_format`` (json_schema, strict for a closed schema) in the same request as ``tools``; the
JSON answer arrives as the reply's text. A server that refuses ``response_format`` beside tools
(400) gets the final-answer tool from then on, and the runtime remembers it for the next session.
A turn whose first answer matches costs no extra request.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import runner
from runner.runtime import RuntimeSettings
from runner.testing import ScriptedServer

PATHS = ["fast", "litellm"]
ANSWER = {"city": "Vancouver", "temps": [11, 12, 9]}


def write_agent(folder: Path, server: ScriptedServer) -> Path:
    (folder / "wire_tools.py").write_text(
        "def forecast(city: str) -> str:\n"
        '    """The temperatures of the next days."""\n'
        '    return "11, 12, 9"\n',
        encoding="utf-8",
    )
    path = folder / "agent.yaml"
    path.write_text(
        textwrap.dedent(
            f"""\
            version: 1
            name: weather
            model:
              id: openai/scripted
              api_base: {server.base_url}
              api_key: ${{SCRIPTED_KEY:-sk-test}}
              retries: 0
            tools:
              - python: wire_tools
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
    return path


def agent_on(path: Path, tmp_path: Path, which: str) -> runner.Agent:
    settings = RuntimeSettings(home=tmp_path / "home", fast_path=which == "fast", write_transcript=False)
    return runner.Agent.from_file(path, settings=settings)


def forecast_then_answer(body: dict[str, Any]) -> dict[str, Any]:
    """Call the tool first; answer as the request asks (the JSON text, or the final-answer tool)."""
    if not any(m.get("role") == "tool" for m in body["messages"]):
        return {"tool_calls": [{"name": "forecast", "arguments": {"city": "Vancouver"}}]}
    names = [t["function"]["name"] for t in body.get("tools") or ()]
    if "final_answer" in names:
        return {"tool_calls": [{"name": "final_answer", "arguments": ANSWER}]}
    return {"content": json.dumps(ANSWER)}


@pytest.mark.parametrize("which", PATHS)
def test_response_format_goes_beside_the_tools_and_the_answer_costs_no_extra_request(
    tmp_path: Path, scripted_server: Callable[..., ScriptedServer], which: str
) -> None:
    server = scripted_server(forecast_then_answer)
    result = agent_on(write_agent(tmp_path, server), tmp_path, which).run_sync("weather in Vancouver?")
    assert result.data == ANSWER and result.reason == "done"
    assert len(server.requests) == 2  # the tool step and the answer
    for body in server.requests:
        assert [t["function"]["name"] for t in body["tools"]] == ["forecast"]
        response_format = body["response_format"]
        assert response_format["type"] == "json_schema"
        assert response_format["json_schema"]["name"] == "weather"
        assert response_format["json_schema"]["strict"] is True
        assert response_format["json_schema"]["schema"]["additionalProperties"] is False


def refuses_response_format_with_tools(body: dict[str, Any]) -> dict[str, Any]:
    """A provider that cannot combine them, as some do: 400 when both come in one request."""
    if body.get("response_format") and body.get("tools"):
        return {"status": 400, "error": "response_format json_schema cannot be combined with tools"}
    return forecast_then_answer(body)


@pytest.mark.parametrize("which", PATHS)
def test_a_refusal_moves_to_the_final_answer_tool_and_the_runtime_remembers_it(
    tmp_path: Path, scripted_server: Callable[..., ScriptedServer], which: str
) -> None:
    server = scripted_server(refuses_response_format_with_tools)
    agent = agent_on(write_agent(tmp_path, server), tmp_path, which)
    notes: list[str] = []

    async def twice() -> list[Any]:
        async with agent:
            sink = lambda event: notes.append(getattr(event, "text", ""))  # noqa: E731
            return [await agent.run("weather?", sink=sink), await agent.run("again?", sink=sink)]

    import asyncio

    first, second = asyncio.run(twice())
    assert first.data == ANSWER and second.data == ANSWER
    refused = [b for b in server.requests if b.get("response_format")]
    assert len(refused) == 1  # one refusal, learned: the second session asks with the tool at once
    after = server.requests[1:]
    assert all("final_answer" in [t["function"]["name"] for t in b["tools"]] for b in after)
    assert any("refused response_format" in n for n in notes)
