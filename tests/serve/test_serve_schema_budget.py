"""A client's schema cannot freeze ``runner serve`` (issue 23): the attacks, over HTTP.

- a 1.6 KB ``response_format`` whose ``$defs`` double at each level held the event loop for a
  minute: it is a 400 naming the limit, at once, and ``/health`` answers meanwhile;
- an answer's check runs off the event loop: ``/health`` answers while one is under way;
- an answer nested 1,000 levels was "internal error: RecursionError" (a 500, or an error chunk):
  it goes back to the model like any answer that does not match;
- a property named ``enum`` (or ``const``, ``default``, ``examples``) kept its ``pattern`` from the
  RE2 pre-check, so a pattern RE2 cannot run reached a paid model call and then a 500.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import httpx
import pytest

import runner.serve.protocol as protocol
from runner.serve.schemas import ClientSchema
from tests.serve.structured_common import QUESTION

WORD = {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]}


def doubling(levels: int) -> dict[str, Any]:
    defs: dict[str, Any] = {
        f"d{i}": {"allOf": [{"$ref": f"#/$defs/d{i + 1}"}, {"$ref": f"#/$defs/d{i + 1}"}]}
        for i in range(levels)
    }
    defs[f"d{levels}"] = {"type": "integer"}
    return {"$ref": "#/$defs/d0", "$defs": defs}


def schema_format(schema: Any) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}


def body(schema: Any, *, stream: bool = False) -> dict[str, Any]:
    return {
        "model": "helper",
        "messages": QUESTION,
        "response_format": schema_format(schema),
        "stream": stream,
    }


@pytest.fixture
def helper(scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any]) -> Any:
    """An agent on a model that answers what ``helper.model.script`` holds."""

    def start(script: list[dict[str, Any]]) -> Any:
        server = scripted(script)
        agent_files.write("helper", server)
        served = serve_app([agent_files.root])
        served.model_server = server
        return served

    return start


def test_the_doubling_schema_is_a_400_at_once_and_health_answers_meanwhile(
    helper: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    served = helper([{"content": "1"}])
    checked = threading.Event()
    real = protocol.client_schema

    def watched(*args: Any, **kwargs: Any) -> Any:
        try:
            return real(*args, **kwargs)
        finally:
            checked.set()

    monkeypatch.setattr(protocol, "client_schema", watched)
    attack = body(doubling(20))
    assert len(json.dumps(attack["response_format"])) < 1700
    result: dict[str, Any] = {}

    def send() -> None:
        with served.http() as http:
            result["response"] = http.post("/v1/chat/completions", json=attack, timeout=20)

    worker = threading.Thread(target=send)
    worker.start()
    try:
        assert checked.wait(20), "the request never reached the schema check"
        with served.http() as http:
            assert http.get("/health", timeout=10).status_code == 200
    finally:
        worker.join(30)
    response = result["response"]
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["param"] == "response_format.json_schema.schema"
    assert error["message"].startswith("'response_format.json_schema.schema['$defs'].d8' is not usable: ")
    assert "the schema is too complex" in error["message"] and "the limit is 20,000" in error["message"]
    assert served.model_server.requests == []


def test_health_answers_while_an_answer_is_being_checked(
    helper: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    long_word = "a" * 50_000  # past what is checked on the loop: to a worker thread at once
    served = helper([{"content": json.dumps({"word": long_word})}])
    checking, release = threading.Event(), threading.Event()
    real = ClientSchema.problems

    def slow(self: ClientSchema, value: Any) -> list[str]:
        checking.set()
        assert release.wait(30), "the test did not release the check"
        return real(self, value)

    monkeypatch.setattr(ClientSchema, "problems", slow)
    result: dict[str, Any] = {}

    def send() -> None:
        with served.http() as http:
            result["response"] = http.post("/v1/chat/completions", json=body(WORD), timeout=60)

    worker = threading.Thread(target=send)
    worker.start()
    try:
        assert checking.wait(30), "the answer was never checked"
        with served.http() as http:
            health = http.get("/health", timeout=10)  # would wait for the check if it ran on the loop
        assert health.status_code == 200 and "response" not in result
    finally:
        release.set()
        worker.join(30)
    assert json.loads(result["response"].json()["choices"][0]["message"]["content"]) == {"word": long_word}


def deep_answer(levels: int) -> str:
    return '{"word": ' + "[" * levels + "]" * levels + "}"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("levels", [150, 1000])
def test_a_deeply_nested_answer_goes_back_to_the_model(helper: Any, stream: bool, levels: int) -> None:
    served = helper([{"content": deep_answer(levels)}, {"content": json.dumps({"word": "ok"})}])
    with served.http() as http:
        response = http.post("/v1/chat/completions", json=body(WORD, stream=stream), timeout=30)
    assert response.status_code == 200
    if stream:
        events = [e[len("data: ") :] for e in response.text.split("\n\n") if e.startswith("data: ")]
        assert events[-1] == "[DONE]" and not any('"error"' in e for e in events)
        chunks = [json.loads(e) for e in events[:-1]]
        content = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    else:
        content = response.json()["choices"][0]["message"]["content"]
    assert json.loads(content) == {"word": "ok"}
    told = served.model_server.requests[1]["messages"][-1]["content"]
    assert "nests arrays and objects" in told and "deep" in told


@pytest.mark.parametrize("name", ["enum", "const", "default", "examples"])
def test_a_property_named_like_a_data_keyword_has_its_pattern_checked(helper: Any, name: str) -> None:
    served = helper([{"content": "{}"}])
    schema = {"type": "object", "properties": {name: {"type": "string", "pattern": r"(a)\1"}}}
    with served.http() as http:
        response = http.post("/v1/chat/completions", json=body(schema))
    assert response.status_code == 400
    error = response.json()["error"]
    at = f"'response_format.json_schema.schema.properties.{name}.pattern'"
    assert error["message"].startswith(f"{at} is not usable: the regular expression")
    assert served.model_server.requests == []  # refused before any model call


def test_a_pattern_inside_enum_values_is_data_not_a_pattern(helper: Any) -> None:
    served = helper([{"content": json.dumps({"word": "x"})}])
    schema = {"type": "object", "properties": {"word": {"enum": ["x", {"pattern": r"(a)\1"}]}}}
    with httpx.Client(base_url=served.url, timeout=30) as http:
        response = http.post("/v1/chat/completions", json=body(schema))
    assert response.status_code == 200
    assert json.loads(response.json()["choices"][0]["message"]["content"]) == {"word": "x"}
