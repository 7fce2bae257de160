"""Request bodies built to crash or stall the server: lone surrogates, deep nesting, huge histories.

Each test sends the attack over HTTP and checks the server answers it cleanly (an OpenAI-shaped
error or a normal answer), stays responsive, and writes only what is bounded.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

import runner.serve.app as serve_app_module
from runner.serve.request import MAX_DEPTH, read_chat
from runner.serve.sse import encode

JSON = {"content-type": "application/json"}
HI_WITH_X = '{"model": "hello", "messages": [{"role": "user", "content": "hi"}], "x": '


@pytest.fixture
def model(scripted: Callable[..., Any]) -> Any:
    return scripted([{"content": "hello"}], repeat=True)


@pytest.fixture
def served(model: Any, agent_files: Any, serve_app: Callable[..., Any]) -> Any:
    agent_files.write("hello", model)
    return serve_app([agent_files.root])


def post(served: Any, raw: bytes, **options: Any) -> httpx.Response:
    with served.http() as http:
        return http.post("/v1/chat/completions", content=raw, headers=JSON, **options)


def transcripts(home: Path) -> list[Path]:
    return sorted((home / "sessions").glob("*.jsonl")) if (home / "sessions").is_dir() else []


# ------------------------------------------------------------------ lone surrogates


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_lone_surrogates_from_the_client_become_replacement_characters(
    served: Any, model: Any, home: Path, stream: bool
) -> None:
    raw = (
        b'{"model": "hello", "stream": %s, "messages": ['
        b'{"role": "system", "content": "rules \\udcff"},'
        b'{"role": "user", "content": "first \\ud800"},'
        b'{"role": "assistant", "content": "ok \\udfff"},'
        b'{"role": "user", "content": [{"type": "text", "text": "hi \\udcff\\ud83d\\ude00"}]}],'
        b'"metadata": {"\\udcff": "\\udcff"}}'
    ) % (b"true" if stream else b"false")
    response = post(served, raw)
    assert response.status_code == 200, response.text
    if stream:
        assert b'"finish_reason":"stop"' in response.content and response.content.endswith(
            b"data: [DONE]\n\n"
        )
    else:
        assert response.json()["choices"][0]["message"]["content"] == "hello"
    sent = json.dumps(model.requests[-1]["messages"], ensure_ascii=False)
    assert "rules \ufffd" in sent and "first \ufffd" in sent and "hi \ufffd\U0001f600" in sent
    (transcript,) = transcripts(home)
    text = transcript.read_bytes().decode("utf-8")  # strict: the transcript is valid UTF-8
    assert "\\udcff" not in text.lower() and ("hi \ufffd" in text or "hi \\ufffd" in text)


def test_invalid_utf8_bytes_become_replacement_characters(served: Any, model: Any) -> None:
    raw = b'{"model": "hello", "messages": [{"role": "user", "content": "caf\xe9 \xff"}]}'
    assert post(served, raw).status_code == 200
    assert model.requests[-1]["messages"][-1]["content"].endswith("caf\ufffd \ufffd")


def test_an_event_with_a_lone_surrogate_is_still_valid_utf8() -> None:
    event = encode({"choices": [{"delta": {"content": "model said \udcff"}}]})
    assert "model said \ufffd" in event.decode("utf-8")


# ------------------------------------------------------------------ nesting


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 900, 100_000])
def test_deeply_nested_bodies_are_400_in_openai_shape(served: Any, model: Any, depth: int) -> None:
    nested = "[" * depth + "]" * depth
    raw = (HI_WITH_X + nested + "}").encode()
    response = post(served, raw)
    assert response.status_code == 400, response.text[:300]
    error = response.json()["error"]
    assert error["code"] == "invalid_json" and "deeper than" in error["message"]
    assert model.requests == []


def test_a_deep_tool_schema_is_400(served: Any, model: Any) -> None:
    schema: dict[str, Any] = {"type": "object"}
    for _ in range(MAX_DEPTH):
        schema = {"type": "object", "properties": {"x": schema}}
    body = {
        "model": "hello",
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"type": "function", "function": {"name": "deep", "parameters": schema}}],
    }
    assert post(served, json.dumps(body).encode()).status_code == 400 and model.requests == []


def test_nesting_within_the_limit_is_answered(served: Any) -> None:
    nested = "[" * (MAX_DEPTH - 3) + "]" * (MAX_DEPTH - 3)
    raw = (HI_WITH_X + nested + "}").encode()
    assert post(served, raw).status_code == 200


# ------------------------------------------------------------------ size of what a request makes


def test_a_request_of_110k_messages_is_413_and_writes_nothing(served: Any, model: Any, home: Path) -> None:
    messages = [{"role": "user", "content": "x"}] * 110_000
    raw = json.dumps({"model": "hello", "messages": messages}, separators=(",", ":")).encode()
    assert len(raw) < 4 * 1024 * 1024
    response = post(served, raw)
    assert response.status_code == 413
    error = response.json()["error"]
    assert error["code"] == "too_many_messages" and "110000 messages" in error["message"]
    assert model.requests == [] and transcripts(home) == []


def test_tool_blocks_count_as_the_messages_they_become(served: Any, model: Any, home: Path) -> None:
    block = '<details type="tool_calls"><summary></summary></details>'
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": block * 60_000},
        {"role": "user", "content": "again"},
    ]
    response = post(served, json.dumps({"model": "hello", "messages": messages}).encode())
    assert response.status_code == 413
    assert "once the tool calls of its earlier answers are counted" in response.json()["error"]["message"]
    assert model.requests == [] and transcripts(home) == []


def test_the_transcript_of_a_request_at_the_limits_is_bounded(
    model: Any, agent_files: Any, serve_app: Callable[..., Any], home: Path
) -> None:
    agent_files.write("hello", model)
    served = serve_app([agent_files.root], max_messages=1000, max_body_bytes=256 * 1024)
    messages: list[dict[str, Any]] = []
    while len(messages) < 998:
        messages += [{"role": "user", "content": "u" * 100}, {"role": "assistant", "content": "a" * 100}]
    messages.append({"role": "user", "content": "last"})
    raw = json.dumps({"model": "hello", "messages": messages}).encode()
    assert post(served, raw).status_code == 200
    (transcript,) = transcripts(home)
    # the body once, plus a bounded overhead per message (the record envelope)
    # (measured: the body plus about 55 bytes per message)
    assert transcript.stat().st_size <= len(raw) + 1000 * 150, (transcript.stat().st_size, len(raw))
    too_many = json.dumps({"model": "hello", "messages": messages * 2}).encode()
    assert post(served, too_many).status_code == 413


# ------------------------------------------------------------------ the event loop stays free


def test_a_4_mb_adversarial_history_is_answered(served: Any) -> None:
    unit = '<details type="tool_calls"><summary></summary><details type="tool_calls" a="'
    content = unit * ((4 * 1024 * 1024 - 4096) // (len(json.dumps(unit)) - 2))
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": content},
        {"role": "user", "content": "next"},
    ]
    raw = json.dumps({"model": "hello", "messages": messages}).encode()
    response = post(served, raw, timeout=30)  # the cubic parser took hours for this
    assert response.status_code == 200
    assert response.json()["choices"][0]["message"]["content"] == "hello"


def test_health_answers_while_a_request_is_being_decoded(
    served: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    decoding, release = threading.Event(), threading.Event()

    def slow_read_chat(raw: bytes, **options: Any) -> Any:
        decoding.set()
        assert release.wait(30), "the test did not release the decoder"
        return read_chat(raw, **options)

    monkeypatch.setattr(serve_app_module, "read_chat", slow_read_chat)
    result: dict[str, Any] = {}

    def chat() -> None:
        # past the size decoded on the loop (small bodies take microseconds there)
        padding = "x" * (serve_app_module._INLINE_DECODE_BYTES + 1)
        body = {"model": "hello", "messages": [{"role": "user", "content": "hi " + padding}]}
        result["response"] = post(served, json.dumps(body).encode())

    worker = threading.Thread(target=chat)
    worker.start()
    try:
        assert decoding.wait(30), "the request never reached the decoder"
        with served.http() as http:
            health = http.get("/health", timeout=10)  # would wait for the decoder if it ran on the loop
        assert health.status_code == 200 and "response" not in result
    finally:
        release.set()
        worker.join(30)
    assert result["response"].status_code == 200
