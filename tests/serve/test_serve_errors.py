"""Bad requests and failures: each one answered in OpenAI's error shape, never a traceback."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import openai
import pytest

ADD_TOOLS = '''
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
'''


@pytest.fixture
def served(scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any]) -> Any:
    server = scripted([{"content": "hello"}], repeat=True)
    agent_files.write("hello", server)
    return serve_app([agent_files.root])


def error_of(response: Any) -> dict[str, Any]:
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    return dict(body["error"])


def test_invalid_json_body_is_400(served: Any) -> None:
    with served.http() as http:
        response = http.post(
            "/v1/chat/completions",
            content=b'{"model": "hello", "messages": [',
            headers={"content-type": "application/json"},
        )
    assert response.status_code == 400
    assert error_of(response)["code"] == "invalid_json"


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": "hello"}, "messages"),
        ({"model": "hello", "messages": []}, "messages"),
        ({"messages": [{"role": "user", "content": "hi"}]}, "model"),
        ({"model": "hello", "messages": [{"role": "wizard", "content": "hi"}]}, "messages[0].role"),
        ({"model": "hello", "messages": [{"role": "user", "content": 3}]}, "messages[0].content"),
        ({"model": "hello", "messages": [{"role": "user", "content": "hi"}], "stream": "yes"}, "stream"),
        (
            {"model": "hello", "messages": [{"role": "user", "content": "hi"}], "temperature": 9},
            "temperature",
        ),
        ({"model": "hello", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 0}, "max_tokens"),
        ({"model": "hello", "messages": [{"role": "user", "content": "hi"}], "n": 3}, "n"),
        (
            {"model": "hello", "messages": [{"role": "user", "content": "hi"}], "limits": {"max_steps": -1}},
            "limits.max_steps",
        ),
        (
            {"model": "hello", "messages": [{"role": "user", "content": "hi"}], "limits": {"max_turns": 2}},
            "limits",
        ),
        (
            {
                "model": "hello",
                "messages": [{"role": "user", "content": "hi"}],
                "tools": [{"type": "function"}],
            },
            "tools[0]",
        ),
        (
            {"model": "hello", "messages": [{"role": "assistant", "content": "I spoke last"}]},
            "messages[0].role",
        ),
        (
            {"model": "hello", "messages": [{"role": "tool", "tool_call_id": "nope", "content": "x"}]},
            "messages",
        ),
        ([1, 2, 3], None),
    ],
)
def test_malformed_requests_are_400_naming_the_field(served: Any, body: Any, param: str | None) -> None:
    with served.http() as http:
        response = http.post("/v1/chat/completions", json=body)
    assert response.status_code == 400, response.text
    error = error_of(response)
    assert error["type"] == "invalid_request_error" and error["param"] == param


def test_sdk_sees_missing_messages_as_bad_request(served: Any) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        served.openai().chat.completions.create(model="hello", messages=[])
    assert caught.value.status_code == 400


def test_unknown_model_is_404_with_the_served_names(served: Any) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        served.openai().chat.completions.create(model="nobody", messages=[{"role": "user", "content": "hi"}])
    error = caught.value.body
    assert isinstance(error, dict)
    assert error["code"] == "model_not_found" and error["param"] == "model" and "hello" in error["message"]


def test_unknown_route_and_method_answer_in_openai_shape(served: Any) -> None:
    with served.http() as http:
        missing = http.get("/v1/nothing-here")
        wrong = http.get("/v1/chat/completions")
    assert missing.status_code == 404 and error_of(missing)["type"] == "invalid_request_error"
    assert wrong.status_code == 405 and error_of(wrong)["message"]


def test_wrong_or_missing_key_is_401_and_the_right_key_works(
    scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any]
) -> None:
    server = scripted([{"content": "hello"}], repeat=True)
    agent_files.write("hello", server)
    served = serve_app([agent_files.root], api_keys=["key-one", "key-two"])
    with pytest.raises(openai.AuthenticationError) as caught:
        served.openai(api_key="key-three").models.list()
    assert caught.value.status_code == 401
    with pytest.raises(openai.AuthenticationError):
        served.openai(api_key="key-one-and-more").chat.completions.create(
            model="hello", messages=[{"role": "user", "content": "hi"}]
        )
    with served.http() as http:
        bare = http.get("/v1/models")
        assert bare.status_code == 401 and bare.headers["www-authenticate"] == "Bearer"
        assert error_of(bare)["code"] == "invalid_api_key"
        assert http.get("/health").status_code == 200  # for load balancers: no key, no data
    answer = served.openai(api_key="key-two").chat.completions.create(
        model="hello", messages=[{"role": "user", "content": "hi"}]
    )
    assert answer.choices[0].message.content == "hello"
    assert [m.id for m in served.openai(api_key="key-one").models.list()] == ["hello"]


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_oversized_body_is_413(served: Any, chunked: bool) -> None:
    payload = (
        b'{"model": "hello", "messages": [{"role": "user", "content": "' + b"x" * (5 * 1024 * 1024) + b'"}]}'
    )
    json_type = {"content-type": "application/json"}
    with served.http() as http:
        if chunked:
            parts = iter([payload[:1000], payload[1000:]])
            response = http.post("/v1/chat/completions", content=parts, headers=json_type)
        else:
            response = http.post("/v1/chat/completions", content=payload, headers=json_type)
    assert response.status_code == 413
    assert error_of(response)["code"] == "request_too_large"


def test_model_error_mid_stream_ends_with_a_readable_error_and_one_finish(
    scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any], check_stream: Any
) -> None:
    server = scripted(
        [
            {"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]},
            {"status": 500, "error": "the upstream model exploded"},
        ]
    )
    agent_files.write("fragile", server, tools=ADD_TOOLS)
    served = serve_app([agent_files.root])
    chunks = list(
        served.openai().chat.completions.create(
            model="fragile", messages=[{"role": "user", "content": "1+2"}], stream=True
        )
    )
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["stop"]
    (raw,) = served.recorder.streams()
    result = check_stream(raw.body)
    assert len(result.blocks) == 1 and result.blocks[0].result == "3"
    assert "</details>\n\n\n**Error:** the model failed: openai/scripted: " in result.content
    assert result.content.endswith("the upstream model exploded\n")


def test_model_error_of_a_whole_answer_is_502(
    scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any]
) -> None:
    server = scripted([{"status": 503, "error": "no capacity"}])
    agent_files.write("down", server)
    served = serve_app([agent_files.root])
    with pytest.raises(openai.InternalServerError) as caught:
        served.openai().chat.completions.create(model="down", messages=[{"role": "user", "content": "hi"}])
    assert caught.value.status_code == 502
    body = caught.value.body
    assert isinstance(body, dict) and body["code"] == "model_error" and "no capacity" in body["message"]


def test_a_tool_source_that_cannot_open_is_an_error_before_any_stream(
    scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any]
) -> None:
    server = scripted([{"content": "never"}])
    agent_files.write("broken_tools", server, "tools:\n  - openapi: http://127.0.0.1:9/openapi.json")
    served = serve_app([agent_files.root])
    with pytest.raises(openai.InternalServerError) as caught:
        served.openai().chat.completions.create(
            model="broken_tools", messages=[{"role": "user", "content": "hi"}], stream=True
        )
    assert caught.value.status_code == 500
    assert "tool source" in str(caught.value.body)
    assert server.requests == []


@pytest.mark.parametrize("stream", [False, True])
def test_a_model_that_cannot_be_reached_is_reported_without_its_url(
    agent_files: Any, serve_app: Callable[..., Any], stream: bool
) -> None:
    import socket
    from types import SimpleNamespace

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    internal = f"http://127.0.0.1:{port}/v1"
    agent_files.write("lost", SimpleNamespace(base_url=internal))
    served = serve_app([agent_files.root])
    with served.http() as http:
        body = {"model": "lost", "messages": [{"role": "user", "content": "hi"}], "stream": stream}
        response = http.post("/v1/chat/completions", json=body)
    text = response.text
    assert "cannot connect" in text and "(the agent's model endpoint)" in text
    assert f"127.0.0.1:{port}" not in text and internal not in text
