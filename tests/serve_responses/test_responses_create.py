"""``responses.create`` with the openai SDK, whole and streamed: the response object, its usage and
the exact event order."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.serve_responses.conftest import check_events


@pytest.fixture
def hello(scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any]) -> Any:
    server = scripted(
        [
            {
                "content": "Hello there.",
                "reasoning": "They greet me.",
                "usage": {"prompt_tokens": 11, "completion_tokens": 4},
            }
        ],
        repeat=True,
    )
    agent_files.write("greeter", server, "prompts:\n  system: You greet.")
    served = serve_app([agent_files.root])
    served.model_server = server
    return served


def test_create_whole_answers_with_usage_and_output_text(hello: Any) -> None:
    client = hello.openai()
    response = client.responses.create(
        model="greeter", input="Hi!", instructions="Be brief.", metadata={"k": "v"}
    )
    assert response.status == "completed"
    assert response.output_text == "Hello there."
    assert response.model == "greeter" and response.metadata == {"k": "v"}
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens, response.usage.total_tokens) == (
        11,
        4,
        15,
    )
    assert response.usage.input_tokens_details.cache_write_tokens == 0
    kinds = [item.type for item in response.output]
    assert kinds == ["reasoning", "message"]
    assert response.output[0].summary[0].text == "They greet me."
    sent = hello.model_server.requests[-1]["messages"]
    assert [m["role"] for m in sent] == ["system", "system", "user"]
    assert sent[1]["content"] == "Be brief."


def test_create_streamed_follows_the_api_order(hello: Any) -> None:
    client = hello.openai()
    events = [
        event.model_dump() for event in client.responses.create(model="greeter", input="Hi!", stream=True)
    ]
    final = check_events(events)
    assert final is not None and final["status"] == "completed"
    kinds = [e["type"] for e in events]
    assert kinds[0:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    body = [k for k in kinds[2:-1] if not k.endswith(".delta")]
    assert body == [
        "response.output_item.added",
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_text.done",
        "response.reasoning_summary_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
    ]
    text = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert text == "Hello there."


def test_stream_helper_gives_the_final_response(hello: Any) -> None:
    client = hello.openai()
    with client.responses.stream(model="greeter", input="Hi!") as stream:
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert "".join(deltas) == "Hello there." == final.output_text
    assert final.usage is not None and final.usage.total_tokens == 15


def test_an_image_part_reaches_the_model_as_an_image(hello: Any) -> None:
    client = hello.openai()
    url = "data:image/png;base64,iVBORw0KGgo="
    content = [{"type": "input_text", "text": "What is this?"}, {"type": "input_image", "image_url": url}]
    response = client.responses.create(model="greeter", input=[{"role": "user", "content": content}])
    assert response.output_text == "Hello there."
    (user,) = [m for m in hello.model_server.requests[-1]["messages"] if m["role"] == "user"]
    assert user["content"][1] == {"type": "image_url", "image_url": {"url": url, "detail": "auto"}}


def test_an_image_to_a_model_without_images_is_a_400_naming_the_part(
    scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any]
) -> None:
    server = scripted([{"content": "unused"}], repeat=True)
    path = agent_files.write("texter", server)
    path.write_text(path.read_text().replace("openai/scripted", "openai/gpt-3.5-turbo"))
    served = serve_app([agent_files.root])
    url = "data:image/png;base64,iVBORw0KGgo="
    content = [{"type": "input_text", "text": "What is this?"}, {"type": "input_image", "image_url": url}]
    items = [{"role": "user", "content": "First."}, {"role": "user", "content": content}]
    with served.http() as http:
        response = http.post("/v1/responses", json={"model": "texter", "input": items})
        text = http.post("/v1/responses", json={"model": "texter", "input": "Hi"})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and error["code"] == "image_input_unsupported"
    assert error["param"] == "input[1].content[1]"
    assert "'texter' (openai/gpt-3.5-turbo) does not take images" in error["message"]
    assert len(server.requests) == 1  # the model was asked only for the text
    assert text.status_code == 200


def test_an_image_to_a_vision_model_passes_through(
    scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any]
) -> None:
    server = scripted([{"content": "A cat."}], repeat=True)
    path = agent_files.write("looker", server)
    path.write_text(path.read_text().replace("openai/scripted", "openai/gpt-4o-mini"))
    served = serve_app([agent_files.root])
    url = "https://example.com/cat.png"
    content = [{"type": "input_image", "image_url": url, "detail": "low"}]
    client = served.openai()
    response = client.responses.create(model="looker", input=[{"role": "user", "content": content}])
    assert response.output_text == "A cat."
    (user,) = [m for m in server.requests[-1]["messages"] if m["role"] == "user"]
    assert user["content"] == [{"type": "image_url", "image_url": {"url": url, "detail": "low"}}]


@pytest.mark.parametrize(
    ("model_id", "takes"),
    [
        ("openai/gpt-4o-mini", True),  # litellm's map: supports_vision
        ("openai/gpt-3.5-turbo", False),  # in the map without it
        ("openai/o3-mini", False),
        ("openai/qwen2.5-vl-7b-instruct", True),  # not in the map: the family tables
        ("openai/llama-3.2-11b-vision-instruct", True),
        ("openai/llama3.1:8b", False),
        ("openai/scripted", None),  # unknown: the model answers for itself
    ],
)
def test_which_models_take_images(model_id: str, takes: bool | None) -> None:
    from runner.serve.responses.images import takes_images

    assert takes_images(model_id) is takes
