"""Structured output through ``runner serve``: an agent's ``output:``, a client's ``response_format``.

Driven by the real ``openai`` SDK (``create``, ``parse``, the ``stream`` helper) against the app on
uvicorn and an agent on the scripted model server, both on 127.0.0.1. What reached the model is
read from the scripted server's ``requests``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import openai
import pydantic
import pytest

from runner.store.transcript import sessions_dir
from tests.serve.structured_common import ADD_TOOLS, QUESTION, SUM, SUM_OUTPUT


class Sum(pydantic.BaseModel):
    total: int
    note: str


def add_then(answer: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A model that calls ``add`` first, then answers ``answer`` (JSON text unless a string)."""

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        if body["messages"][-1]["role"] == "user":
            return {"tool_calls": [{"id": "call_add", "name": "add", "arguments": {"a": 2, "b": 3}}]}
        return {"content": answer if isinstance(answer, str) else json.dumps(answer)}

    return reply


def sent_format(body: dict[str, Any]) -> dict[str, Any]:
    """The ``response_format`` a request to the model carried."""
    assert "response_format" in body, f"no response_format in {sorted(body)}"
    value: dict[str, Any] = body["response_format"]
    return value


def tool_names(body: dict[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in body.get("tools") or []]


def content_of(client: openai.OpenAI, model: str, *, stream: bool, **kwargs: Any) -> str:
    if stream:
        chunks = list(client.chat.completions.create(model=model, messages=QUESTION, stream=True, **kwargs))
        finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
        assert finishes == ["stop"]
        return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    answer = client.chat.completions.create(model=model, messages=QUESTION, **kwargs)
    assert answer.choices[0].finish_reason == "stop"
    return answer.choices[0].message.content or ""


# ----------------------------------------------------------------- the agent's own output:


@pytest.mark.parametrize("stream", [False, True])
def test_an_agent_with_output_answers_with_the_json_text_after_its_tool(
    scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any], stream: bool
) -> None:
    server = scripted(add_then(SUM))
    agent_files.write("summer", server, SUM_OUTPUT, tools=ADD_TOOLS)
    served = serve_app([agent_files.root])
    content = content_of(served.openai(), "summer", stream=stream)
    assert json.loads(content) == SUM
    assert "<details" not in content  # only the JSON: the tool's block would break a parser
    first, second = server.requests  # the fast path: no request beyond the tool's and the answer's
    for body in (first, second):
        assert tool_names(body) == ["add"]  # tools kept, beside the schema, in one request
        spec = sent_format(body)["json_schema"]
        assert sent_format(body)["type"] == "json_schema" and spec["strict"] is True
        assert spec["schema"]["properties"] == {"total": {"type": "integer"}, "note": {"type": "string"}}
    assert second["messages"][-1] == {"role": "tool", "tool_call_id": "call_add", "content": "5"}


def test_a_hook_queued_turn_replaces_the_answer_rather_than_appending_a_second_json(
    scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any]
) -> None:
    server = scripted([{"content": json.dumps({"total": 1, "note": "first"})}, {"content": json.dumps(SUM)}])
    hook = "limits:\n  max_turns: 2\nhooks:\n  turn_post:\n    - message: Check it again.\n"
    agent_files.write("twice", server, SUM_OUTPUT + hook)
    served = serve_app([agent_files.root])
    content = content_of(served.openai(), "twice", stream=False)
    assert json.loads(content) == SUM  # one JSON value, the last turn's
    assert len(server.requests) == 2


# ----------------------------------------------------------------- a client's response_format


@pytest.mark.parametrize("stream", [False, True])
def test_parse_with_a_pydantic_model_returns_an_instance_for_an_agent_without_output(
    scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any], stream: bool
) -> None:
    server = scripted(add_then(SUM))
    agent_files.write("helper", server, "prompts:\n  system: You help.", tools=ADD_TOOLS)
    served = serve_app([agent_files.root])
    client = served.openai()
    if stream:
        with client.chat.completions.stream(model="helper", messages=QUESTION, response_format=Sum) as events:
            completion = events.get_final_completion()
    else:
        completion = client.chat.completions.parse(model="helper", messages=QUESTION, response_format=Sum)
    assert completion.choices[0].message.parsed == Sum(**SUM)
    first, second = server.requests
    for body in (first, second):
        assert tool_names(body) == ["add"]
        spec = sent_format(body)["json_schema"]
        assert spec["name"] == "Sum" and spec["strict"] is True
        assert spec["schema"]["required"] == ["total", "note"]


@pytest.mark.parametrize("stream", [False, True])
def test_json_object_gets_a_json_object(
    scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any], stream: bool
) -> None:
    server = scripted(add_then("Here it is:\n```json\n" + json.dumps(SUM) + "\n```"))
    agent_files.write("helper", server, tools=ADD_TOOLS)
    served = serve_app([agent_files.root])
    content = content_of(served.openai(), "helper", stream=stream, response_format={"type": "json_object"})
    assert json.loads(content) == SUM  # the object, not the prose around it
    assert sent_format(server.requests[0])["json_schema"]["schema"]["type"] == "object"


def test_an_answer_that_does_not_validate_is_repaired(
    scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any]
) -> None:
    server = scripted([{"content": '{"total": "five", "note": "2 + 3"}'}, {"content": json.dumps(SUM)}])
    agent_files.write("helper", server)
    served = serve_app([agent_files.root])
    completion = served.openai().chat.completions.parse(
        model="helper", messages=QUESTION, response_format=Sum
    )
    assert completion.choices[0].message.parsed == Sum(**SUM)
    _first, second = server.requests
    told = second["messages"][-1]
    assert told["role"] == "user" and "at $.total: 'five' is not of type 'integer'" in told["content"]
    assert second["messages"][-2] == {"role": "assistant", "content": '{"total": "five", "note": "2 + 3"}'}


def prose(body: dict[str, Any]) -> dict[str, Any]:
    return {"content": "The total is five, I think."}


def test_a_model_that_never_gives_json_is_an_openai_error_not_a_200(
    scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any]
) -> None:
    server = scripted(prose)
    agent_files.write("helper", server)
    served = serve_app([agent_files.root])
    with pytest.raises(openai.APIStatusError) as caught:
        served.openai().chat.completions.parse(model="helper", messages=QUESTION, response_format=Sum)
    assert caught.value.status_code == 502
    error = caught.value.body
    assert isinstance(error, dict) and error["code"] == "output_invalid" and error["type"] == "server_error"
    assert error["message"].startswith("the answer did not match the request's response_format after 3 tries")
    assert "holds no JSON" in error["message"]
    assert len(server.requests) == 3  # the first try and limits.output_retries (2) more


def test_a_streamed_answer_that_never_validates_ends_with_an_error_event(
    scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any]
) -> None:
    """The stream has begun (200) when the retries run out: it ends with OpenAI's error event
    instead of a finish, and the SDK raises it. (Not through the recorder: its chunk rules do not
    know error events.)"""
    server = scripted(prose)
    agent_files.write("helper", server)
    served = serve_app([agent_files.root])
    body = {
        "model": "helper",
        "messages": QUESTION,
        "stream": True,
        "response_format": {"type": "json_object"},
    }
    with httpx.Client(base_url=served.url, timeout=30) as http:
        raw = http.post("/v1/chat/completions", json=body)
        client = openai.OpenAI(base_url=served.base_url, api_key="k", http_client=http, max_retries=0)
        with pytest.raises(openai.APIError) as caught:
            list(
                client.chat.completions.create(
                    model="helper", messages=QUESTION, stream=True, response_format={"type": "json_object"}
                )
            )
    assert raw.status_code == 200
    events = [line[len("data: ") :] for line in raw.text.split("\n\n") if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    error = json.loads(events[-2])
    assert set(error) == {"error"} and set(error["error"]) == {"message", "type", "param", "code"}
    assert error["error"]["code"] == "output_invalid"
    chunks = [json.loads(e) for e in events[:-2]]
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks)  # no finish: it failed
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks) == ""  # no prose
    assert "after 3 tries" in caught.value.message
    assert len(server.requests) == 6


# ----------------------------------------------------------------- bad response_format


def post(served: Any, response_format: Any, model: str = "helper") -> tuple[int, dict[str, Any]]:
    with served.http() as http:
        body = {"model": model, "messages": QUESTION, "response_format": response_format}
        answer = http.post("/v1/chat/completions", json=body)
    return answer.status_code, answer.json()


def schema_format(schema: Any, name: Any = "answer") -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}


@pytest.mark.parametrize(
    ("response_format", "param", "says"),
    [
        (
            schema_format({"type": "object", "properties": {"n": {"type": "object", "required": "n"}}}),
            "response_format.json_schema.schema",
            "'response_format.json_schema.schema.properties.n.required' is not usable: "
            "not a valid JSON Schema",
        ),
        (
            schema_format(
                {"type": "object", "properties": {"n": {"$ref": "#/$defs/Nmber"}}, "$defs": {"Number": {}}}
            ),
            "response_format.json_schema.schema",
            "$ref '#/$defs/Nmber' does not resolve: the schema has nothing at /$defs/Nmber "
            "(did you mean '#/$defs/Number'?)",
        ),
        (
            schema_format({"type": "object", "properties": {"n": {"$ref": "https://example.com/n.json"}}}),
            "response_format.json_schema.schema",
            "points outside the schema",
        ),
        (
            schema_format({"type": "objetc"}),
            "response_format.json_schema.schema",
            "unknown type 'objetc' (did you mean 'object'?)",
        ),
        (
            {"type": "json_schema", "json_schema": {"schema": {"type": "object"}}},
            "response_format.json_schema.name",
            "'response_format.json_schema.name' must match",
        ),
        (
            schema_format({"type": "object"}, name="my answer!"),
            "response_format.json_schema.name",
            "must match",
        ),
        ({"type": "json_schema"}, "response_format.json_schema", "must be an object"),
        ({"type": "yaml"}, "response_format.type", "must be text, json_object or json_schema, not 'yaml'"),
        ("json", "response_format", "must be an object with a 'type'"),
    ],
)
def test_a_bad_response_format_is_a_400_naming_where(
    scripted: Callable[..., Any],
    agent_files: Any,
    serve_app: Callable[..., Any],
    response_format: Any,
    param: str,
    says: str,
) -> None:
    server = scripted([])
    agent_files.write("helper", server)
    served = serve_app([agent_files.root])
    status, body = post(served, response_format)
    assert status == 400
    assert body["error"]["type"] == "invalid_request_error" and body["error"]["param"] == param
    assert says in body["error"]["message"]
    assert server.requests == []  # refused before any model request


MODEL_MODULE = """
import pydantic


class Temp(pydantic.BaseModel):
    high: int
    low: int | None = None


class Weather(pydantic.BaseModel):
    city: str = pydantic.Field(description="Where.")
    temps: list[Temp]
    today: Temp = pydantic.Field(description="The temperatures of today.")
"""


class Temp(pydantic.BaseModel):  # the same models as the agent's, on the client's side
    high: int
    low: int | None = None


class Weather(pydantic.BaseModel):
    city: str = pydantic.Field(description="Where.")
    temps: list[Temp]
    today: Temp = pydantic.Field(description="The temperatures of today.")


class Other(pydantic.BaseModel):
    city: str
    temps: list[int]
    today: Temp


WEATHER = {"city": "Vancouver", "temps": [{"high": 11, "low": 4}, {"high": 12}], "today": {"high": 9}}


@pytest.fixture
def forecaster(scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any]) -> Any:
    server = scripted([{"content": json.dumps(WEATHER)}], repeat=True)
    (agent_files.root / "weather_model.py").write_text(MODEL_MODULE, encoding="utf-8")
    agent_files.write("forecaster", server, "output:\n  python: weather_model:Weather")
    served = serve_app([agent_files.root])
    served.model_server = server
    return served


def test_a_response_format_that_conflicts_with_the_agents_output_is_refused(forecaster: Any) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        forecaster.openai().chat.completions.parse(
            model="forecaster", messages=QUESTION, response_format=Other
        )
    error = caught.value.body
    assert isinstance(error, dict)
    assert (error["code"], error["param"]) == ("response_format_conflict", "response_format")
    assert "conflicts with this agent's own output schema" in error["message"]
    assert forecaster.model_server.requests == []


@pytest.mark.parametrize("stream", [False, True])
def test_the_same_schema_as_the_agents_strict_or_not_is_no_conflict(forecaster: Any, stream: bool) -> None:
    client = forecaster.openai()
    if stream:
        with client.chat.completions.stream(
            model="forecaster", messages=QUESTION, response_format=Weather
        ) as s:
            completion = s.get_final_completion()
    else:  # the SDK sends its strict version of the model: closed objects, every property required
        completion = client.chat.completions.parse(
            model="forecaster", messages=QUESTION, response_format=Weather
        )
    assert completion.choices[0].message.parsed == Weather(**WEATHER)
    loose = {"type": "json_schema", "json_schema": {"name": "w", "schema": Weather.model_json_schema()}}
    assert json.loads(content_of(client, "forecaster", stream=stream, response_format=loose)) == WEATHER
    obj = {"type": "json_object"}  # any object: the agent's is one
    assert json.loads(content_of(client, "forecaster", stream=stream, response_format=obj)) == WEATHER
    sent = sent_format(forecaster.model_server.requests[0])["json_schema"]
    assert sent["name"] == "Weather"  # the agent's own schema is what the model is asked for


# ----------------------------------------------------------------- the record


@pytest.mark.parametrize("stream", [False, True])
def test_the_transcript_records_the_object_and_the_access_line_the_request(
    scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any], home: Path, stream: bool
) -> None:
    server = scripted(add_then(SUM))
    agent_files.write("summer", server, SUM_OUTPUT, tools=ADD_TOOLS)
    lines: list[str] = []
    served = serve_app([agent_files.root], report=lines.append)
    content_of(served.openai(), "summer", stream=stream)
    (line,) = [line for line in lines if line.startswith("request:")]
    assert line.startswith("request: summer 200 ") and " tokens stop session " in line
    (path,) = sessions_dir(home).glob("*.jsonl")
    records = [json.loads(text) for text in path.read_text(encoding="utf-8").splitlines()]
    outputs = [r["data"] for r in records if r.get("event") == "output"]
    assert outputs == [{"value": SUM}]
    assert line.endswith(path.stem) or path.stem in line


def test_a_failed_structured_request_is_logged_with_its_error_and_keeps_every_answer(
    scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any], home: Path
) -> None:
    server = scripted(prose)
    agent_files.write("helper", server)
    lines: list[str] = []
    served = serve_app([agent_files.root], report=lines.append)
    with pytest.raises(openai.APIStatusError):
        served.openai().chat.completions.create(
            model="helper", messages=QUESTION, response_format={"type": "json_object"}
        )
    (line,) = [line for line in lines if line.startswith("request:")]
    assert line.startswith("request: helper 502 ") and "(the answer did not match" in line
    (path,) = sessions_dir(home).glob("*.jsonl")
    records = [json.loads(text) for text in path.read_text(encoding="utf-8").splitlines()]
    assert [r["data"]["attempt"] for r in records if r.get("event") == "output_invalid"] == [1, 2, 3]
    answers = [r for r in records if r.get("type") == "message" and r["role"] == "assistant"]
    assert len(answers) == 3 and answers[-1]["content"] == "The total is five, I think."


@pytest.mark.parametrize("stream", [False, True])
def test_a_response_format_is_honoured_in_inline_mode_as_json_in_the_text(
    scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any], stream: bool
) -> None:
    server = scripted([{"content": "Sure.\n```json\n" + json.dumps(SUM) + "\n```\nAnything else?"}])
    agent_files.write("inliner", server, "function_calling: inline", tools=ADD_TOOLS)
    served = serve_app([agent_files.root])
    client = served.openai()
    if stream:
        with client.chat.completions.stream(
            model="inliner", messages=QUESTION, response_format=Sum
        ) as events:
            completion = events.get_final_completion()
    else:
        completion = client.chat.completions.parse(model="inliner", messages=QUESTION, response_format=Sum)
    assert completion.choices[0].message.parsed == Sum(**SUM)
    assert completion.choices[0].message.content == json.dumps(SUM)  # the prose around it is not sent
    (body,) = server.requests
    assert "response_format" not in body  # inline mode: the system prompt asks for the JSON
    system = body["messages"][0]["content"]
    assert "reply with only a JSON value that matches this JSON Schema" in system and '"total"' in system


# ----------------------------------------------------------------- a client's patterns

WORD = {
    "type": "object",
    "properties": {"word": {"type": "string", "pattern": "^(a+)+$"}},
    "required": ["word"],
}


def test_a_client_pattern_cannot_stall_the_server_on_a_backtracking_answer(
    scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any]
) -> None:
    """``^(a+)+$`` over 40 a's and a '!' takes Python's ``re`` about 2**40 steps (the test would
    time out); RE2 answers at once: no match, the model is told, and its next answer matches."""
    hostile = "a" * 40 + "!"
    server = scripted([{"content": json.dumps({"word": hostile})}, {"content": json.dumps({"word": "aaa"})}])
    agent_files.write("helper", server)
    served = serve_app([agent_files.root])
    content = content_of(served.openai(), "helper", stream=False, response_format=schema_format(WORD, "word"))
    assert json.loads(content) == {"word": "aaa"}
    told = server.requests[1]["messages"][-1]["content"]
    assert f"at $.word: '{hostile}' does not match '^(a+)+$'" in told
    with served.http() as http:  # the server still answers others
        assert http.get("/health").status_code == 200


def test_pattern_properties_are_matched_too(
    scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any]
) -> None:
    schema = {"type": "object", "patternProperties": {"^n_": {"type": "integer"}}}
    server = scripted([{"content": '{"n_a": "x", "other": 1}'}, {"content": '{"n_a": 1, "other": "x"}'}])
    agent_files.write("helper", server)
    served = serve_app([agent_files.root])
    content = content_of(served.openai(), "helper", stream=False, response_format=schema_format(schema))
    assert json.loads(content) == {"n_a": 1, "other": "x"}
    assert "at $.n_a: 'x' is not of type 'integer'" in server.requests[1]["messages"][-1]["content"]


@pytest.mark.parametrize(
    ("schema", "at"),
    [
        ({"type": "string", "pattern": "^(?=a)a$"}, ".pattern"),
        (
            {"type": "object", "properties": {"w": {"type": "string", "pattern": r"(a)\1"}}},
            ".properties.w.pattern",
        ),
        ({"type": "object", "patternProperties": {"(?<!x)y": {}}}, ".patternProperties['(?<!x)y']"),
    ],
)
def test_a_pattern_re2_cannot_run_is_a_400(
    scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any], schema: Any, at: str
) -> None:
    server = scripted([])
    agent_files.write("helper", server)
    served = serve_app([agent_files.root])
    status, body = post(served, schema_format(schema))
    assert status == 400 and body["error"]["param"] == "response_format.json_schema.schema"
    message = body["error"]["message"]
    assert message.startswith(
        f"'response_format.json_schema.schema{at}' is not usable: the regular expression"
    )
    assert "matched by RE2, without backreferences or look-around" in message


def test_a_structured_run_a_limit_stops_before_its_answer_is_an_error_not_an_empty_200(
    scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any]
) -> None:
    server = scripted(add_then(SUM))
    agent_files.write("summer", server, SUM_OUTPUT, tools=ADD_TOOLS)
    served = serve_app([agent_files.root])
    with pytest.raises(openai.APIStatusError) as caught:
        served.openai().chat.completions.create(
            model="summer", messages=QUESTION, extra_body={"limits": {"max_steps": 1}}
        )
    assert caught.value.status_code == 502
    error = caught.value.body
    assert isinstance(error, dict) and error["code"] == "output_missing"
    assert "before giving an answer that matches the requested schema" in error["message"]
    assert len(server.requests) == 1  # the tool's step ran; the answer's step was not allowed
