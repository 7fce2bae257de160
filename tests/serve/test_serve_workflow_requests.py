"""What a request may ask of a workflow model: response_format, tools, limits, its input (issue 17).

Each bad request gets a 400 (or 502 when the workflow's output does not match what the client
asked for) in OpenAI's shape, naming the field; nothing runs for a refused request.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from runner.testing import ScriptedServer
from tests.workflow.helpers import Models, team, user_text

SCHEMA_WORKFLOW = """workflow:
  name: typed
  output_schema:
    type: object
    required: [answer]
    properties: {answer: {type: string}}
  output: '{"answer": {{ steps.say.output | tojson }}}'
  steps:
    - {id: say, agent: sayer}
"""

PLAIN_WORKFLOW = """workflow:
  name: plain
  steps:
    - {id: say, agent: sayer}
    - {id: again, agent: sayer, input: "{{ steps.say.output }}"}
"""

ANSWER = {"type": "object", "required": ["answer"], "properties": {"answer": {"type": "string"}}}


@pytest.fixture
def served(scripted: Callable[..., ScriptedServer], agent_files: Any, serve_app: Callable[..., Any]) -> Any:
    models = Models({"sayer": lambda body: "said " + user_text(body)})
    server = scripted(models)
    (agent_files.root / "typed").mkdir()
    (agent_files.root / "plain").mkdir()
    team(agent_files.root / "typed", server.base_url, {"sayer": ""}, SCHEMA_WORKFLOW)
    team(agent_files.root / "plain", server.base_url, {"sayer": ""}, PLAIN_WORKFLOW)
    app = serve_app([agent_files.root])
    app.models, app.model_server = models, server
    return app


def post(served: Any, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    body = {"messages": [{"role": "user", "content": "hi"}], **body}
    with served.http() as http:
        answer = http.post("/v1/chat/completions", json=body)
    return answer.status_code, answer.json()


def json_schema(schema: dict[str, Any], name: str = "answer") -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}


def test_a_response_format_of_another_shape_than_the_output_schema_is_a_400(served: Any) -> None:
    status, body = post(served, {"model": "typed", "response_format": json_schema({"type": "array"})})
    assert status == 400
    assert body["error"]["param"] == "response_format" and body["error"]["code"] == "response_format_conflict"
    assert "conflicts with this workflow's own output schema" in body["error"]["message"]
    assert served.models.calls == {}  # nothing ran
    # the same shape (titles and strictness aside) and json_object are no conflict
    same = {**ANSWER, "title": "Answer", "additionalProperties": False}
    for response_format in (json_schema(same), {"type": "json_object"}):
        status, body = post(served, {"model": "typed", "response_format": response_format})
        assert status == 200, body
        assert json.loads(body["choices"][0]["message"]["content"]) == {"answer": "said hi"}


def test_without_an_output_schema_the_output_is_checked_against_the_clients_schema(served: Any) -> None:
    status, body = post(served, {"model": "plain", "response_format": json_schema(ANSWER)})
    assert status == 502
    assert body["error"]["code"] == "output_invalid" and body["error"]["type"] == "server_error"
    assert body["error"]["message"] == (
        "the workflow's output is not JSON (Expecting value); the request's response_format wants JSON"
    )
    assert served.models.calls == {"sayer": 2}  # no repair: the workflow ran once


def test_a_json_output_that_does_not_match_the_clients_schema_is_a_502_naming_the_field(
    scripted: Callable[..., ScriptedServer], agent_files: Any, serve_app: Callable[..., Any]
) -> None:
    server = scripted(Models({"sayer": lambda body: {"answer": 42}}))
    team(agent_files.root, server.base_url, {"sayer": ""}, PLAIN_WORKFLOW)
    app = serve_app([agent_files.root])
    status, body = post(app, {"model": "plain", "response_format": json_schema(ANSWER)})
    assert status == 502 and body["error"]["code"] == "output_invalid"
    assert body["error"]["message"].startswith(
        "the workflow's output does not match the request's response_format: at $.answer:"
    )
    # a matching one passes as it is
    status, body = post(app, {"model": "plain", "response_format": json_schema({"type": "object"})})
    assert status == 200 and json.loads(body["choices"][0]["message"]["content"]) == {"answer": 42}


def test_client_tools_are_refused_with_a_400_naming_tools(served: Any) -> None:
    tool = {"type": "function", "function": {"name": "web_search", "parameters": {"type": "object"}}}
    status, body = post(served, {"model": "plain", "tools": [tool]})
    assert status == 400 and body["error"]["param"] == "tools"
    assert body["error"]["message"].startswith("a workflow cannot call the client's tools (web_search)")
    assert served.models.calls == {}
    # tool_choice none offers no tools: accepted
    status, body = post(served, {"model": "plain", "tools": [tool], "tool_choice": "none"})
    assert status == 200 and body["choices"][0]["message"]["content"] == "said said hi"


def test_a_forced_tool_choice_gets_the_output_as_that_tools_call(served: Any) -> None:
    tool = {"type": "function", "function": {"name": "Answer", "parameters": ANSWER}}
    forced = {"type": "function", "function": {"name": "Answer"}}
    status, body = post(served, {"model": "typed", "tools": [tool], "tool_choice": forced})
    assert status == 200, body
    choice = body["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    (call,) = choice["message"]["tool_calls"]
    assert call["function"]["name"] == "Answer"
    assert json.loads(call["function"]["arguments"]) == {"answer": "said hi"}


@pytest.mark.parametrize(
    ("messages", "param", "message"),
    [
        (
            [
                {"role": "user", "content": "hi"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "42"},
            ],
            "messages[2].role",
            "a workflow's input is the last message, which must be a user message (messages[2] is 'tool')",
        ),
        (
            [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
            "messages[1].role",
            "the last message must be a user message or tool results, not 'assistant'",
        ),
        (
            [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "look"},
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                    ],
                }
            ],
            "messages[0].content[1]",
            "a workflow's input is text; 'messages[0].content[1]' is a 'image_url' part",
        ),
    ],
)
def test_an_input_that_is_not_a_user_text_is_a_400(
    served: Any, messages: list[dict[str, Any]], param: str, message: str
) -> None:
    status, body = post(served, {"model": "plain", "messages": messages})
    assert status == 400 and body["error"]["param"] == param
    assert body["error"]["message"] == message
    assert served.models.calls == {}


def test_text_parts_of_the_last_user_message_are_the_input(served: Any) -> None:
    content = [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]
    status, body = post(served, {"model": "plain", "messages": [{"role": "user", "content": content}]})
    assert status == 200 and body["choices"][0]["message"]["content"] == "said said one\ntwo"


def test_request_limits_lower_the_workflows_budget_and_max_tool_calls_is_refused(served: Any) -> None:
    status, body = post(served, {"model": "plain", "limits": {"max_tool_calls": 3}})
    assert status == 400 and body["error"]["param"] == "limits.max_tool_calls"
    assert "does not apply to a workflow" in body["error"]["message"]
    status, body = post(served, {"model": "plain", "limits": {"max_steps": 1}})
    assert status == 502 and body["error"]["code"] == "workflow_limit"
    assert "the workflow ran 1 agent steps (limits.max_steps)" in body["error"]["message"]
    assert served.models.calls == {"sayer": 1}
    status, body = post(served, {"model": "plain", "limits": {"timeout_s": 30}, "temperature": 0.2})
    assert status == 200 and body["choices"][0]["message"]["content"] == "said said hi"
    # sampling parameters are not given to the steps: each step's agent has its own
    assert all("temperature" not in request for request in served.model_server.requests)


def test_an_unknown_model_is_a_404_that_lists_the_workflows(served: Any) -> None:
    status, body = post(served, {"model": "nope"})
    assert status == 404 and body["error"]["code"] == "model_not_found"
    assert body["error"]["message"] == "The model 'nope' does not exist (served: plain, sayer, typed)"
