"""Bad input to ``/v1/responses`` answered in the API's error shape with the right status (each
checked by the recorder against ``{"error": {message, type, param, code}}``), and the server keeps
answering."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import openai
import pytest


@pytest.fixture
def served(scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any]) -> Any:
    server = scripted([{"content": "fine"}], repeat=True)
    agent_files.write("helper", server)
    served = serve_app([agent_files.root], max_body_bytes=1024 * 1024)
    served.model_server = server
    return served


BAD_INPUTS = [
    (5, "input"),
    ([], "input"),
    ([{"type": "telepathy", "content": "x"}], "input[0].type"),
    ([{"role": "robot", "content": "x"}], "input[0].role"),
    ([{"role": "user", "content": 42}], "input[0].content"),
    ([{"role": "user", "content": [{"type": "input_text", "text": 7}]}], "input[0].content[0].text"),
    ([{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}], "input[0].content[0].type"),
    (
        [{"role": "user", "content": "hi"}, {"type": "function_call", "name": "f", "arguments": "{}"}],
        "input[1].call_id",
    ),
    ([{"type": "function_call_output", "output": "x"}], "input[0].call_id"),
    (["just a string item"], "input[0]"),
]


@pytest.mark.parametrize(("value", "param"), BAD_INPUTS)
def test_malformed_input_is_a_400_naming_the_item(served: Any, value: Any, param: str) -> None:
    with served.http() as http:
        answer = http.post("/v1/responses", json={"model": "helper", "input": value})
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["param"] == param
    assert answer.json()["error"]["type"] == "invalid_request_error"
    assert served.model_server.requests == []


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"input": "hi"}, "model"),
        ({"model": "helper"}, "input"),
        ({"model": "helper", "input": "hi", "tools": [{"type": "function"}]}, "tools[0].name"),
        ({"model": "helper", "input": "hi", "tools": "all"}, "tools"),
        (
            {"model": "helper", "input": "hi", "tool_choice": {"type": "function", "name": "nope"}},
            "tool_choice",
        ),
        ({"model": "helper", "input": "hi", "max_output_tokens": 0}, "max_output_tokens"),
        ({"model": "helper", "input": "hi", "temperature": 9}, "temperature"),
        ({"model": "helper", "input": "hi", "store": "yes"}, "store"),
        ({"model": "helper", "input": "hi", "text": {"format": {"type": "xml"}}}, "text.format.type"),
        ({"model": "helper", "input": "hi", "previous_response_id": 12}, "previous_response_id"),
        ({"model": "helper", "input": "hi", "metadata": {"k": 1}}, "metadata"),
    ],
)
def test_bad_fields_are_a_400_naming_them(served: Any, body: dict[str, Any], param: str) -> None:
    with served.http() as http:
        answer = http.post("/v1/responses", json=body)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["param"] == param


def test_unknown_model_and_unknown_previous_response_are_404s(served: Any) -> None:
    client = served.openai()
    with pytest.raises(openai.NotFoundError) as caught:
        client.responses.create(model="nobody", input="hi")
    assert caught.value.body["code"] == "model_not_found" and caught.value.body["param"] == "model"
    for unknown in ("resp_" + "1" * 32, "resp_../../etc/passwd", "x" * 5000):
        with pytest.raises(openai.NotFoundError) as caught:
            client.responses.create(model="helper", input="hi", previous_response_id=unknown)
        assert caught.value.body["code"] == "previous_response_not_found"
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve("resp_" + "2" * 32)


def test_auth_wrong_media_type_big_and_nested_bodies(
    scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any]
) -> None:
    agent_files.write("helper", scripted([{"content": "still here"}], repeat=True))
    served = serve_app([agent_files.root], api_keys=["k"], max_body_bytes=1024 * 1024)
    with served.http(headers={"authorization": "Bearer k"}) as http:
        assert (
            http.post(
                "/v1/responses",
                json={"model": "helper", "input": "hi"},
                headers={"authorization": "Bearer no"},
            ).status_code
            == 401
        )
        assert (
            http.post(
                "/v1/responses", content=b"model=helper", headers={"content-type": "text/plain"}
            ).status_code
            == 415
        )
        big = http.post("/v1/responses", json={"model": "helper", "input": "x" * (4 * 1024 * 1024)})
        assert big.status_code == 413
        nested = b'{"model": "helper", "input": ' + b"[" * 5000 + b"]" * 5000 + b"}"
        deep = http.post("/v1/responses", content=nested, headers={"content-type": "application/json"})
        assert deep.status_code == 400 and "deeper" in deep.json()["error"]["message"]
        answer = http.post("/v1/responses", json={"model": "helper", "input": "hi"})
        assert answer.status_code == 200 and answer.json()["output"][0]["content"][0]["text"] == "still here"


def test_a_model_failure_is_a_502_whole_and_a_failed_event_streamed(
    scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any], home: Any
) -> None:
    failing = {"status": 400, "error": {"message": "bad thing", "type": "invalid_request_error"}}
    agent_files.write("helper", scripted([failing], repeat=True))
    served = serve_app([agent_files.root])
    client = served.openai()
    with pytest.raises(openai.APIStatusError) as caught:
        client.responses.create(model="helper", input="hi")
    assert caught.value.status_code == 502 and caught.value.body["code"] == "model_error"
    events = [e.model_dump() for e in client.responses.create(model="helper", input="hi", stream=True)]
    kinds = [e["type"] for e in events]
    assert kinds[-2:] == ["error", "response.failed"]
    assert (
        events[-1]["response"]["status"] == "failed"
        and "bad thing" in events[-1]["response"]["error"]["message"]
    )
    assert not list((home / "serve" / "responses").glob("*.json")), "a failed run stores nothing"
    with pytest.raises(openai.NotFoundError):  # nor keeps it in memory to be written later
        client.responses.retrieve(events[-1]["response"]["id"])
    with served.http() as http:
        assert json.loads(http.get("/health").text)["status"] == "ok"
