"""A model's retry notices never reach a served answer's content (issue 23, item 26).

``> openai/x: HTTP 429 ... retrying in 1.0 s (1 of 1)`` is what the model layer says while a session
waits on it. A program reading JSON from the answer would break on it: served, the notice goes to
the server's log and to ``reasoning_content``, and the content is exactly the answer.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import pytest

from runner.testing import ScriptedServer

ANSWER = '{"city": "Paris", "degrees": 21}'


class FlakyOnce:
    """Answers 429 to the first request, then ``ANSWER``; counts the requests."""

    def __init__(self) -> None:
        self.calls = 0
        self.lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            self.calls += 1
            first = self.calls == 1
        if first:
            return {"status": 429, "error": "Rate limit exceeded"}
        return {"content": ANSWER}


@pytest.fixture
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The model layer's backoff waits, recorded instead of slept (the server runs in this process)."""
    from runner.models import resilient

    waits: list[float] = []

    async def record(delay: float) -> None:
        waits.append(delay)

    monkeypatch.setattr(resilient, "_sleep", record)
    return waits


@pytest.fixture
def flaky(
    scripted: Callable[..., ScriptedServer], agent_files: Any, serve_app: Callable[..., Any]
) -> tuple[Any, FlakyOnce, list[str]]:
    script = FlakyOnce()
    server = scripted(script)
    path = agent_files.write("weather", server)
    path.write_text(path.read_text().replace("retries: 0", "retries: 1"), encoding="utf-8")
    lines: list[str] = []
    return serve_app([agent_files.root], report=lines.append), script, lines


def _notice_lines(lines: list[str]) -> list[str]:
    return [line for line in lines if "HTTP 429" in line]


def test_a_retried_429_is_not_in_a_whole_answers_content(
    flaky: tuple[Any, FlakyOnce, list[str]], no_backoff: list[float]
) -> None:
    served, script, lines = flaky
    answer = served.openai().chat.completions.create(
        model="weather", messages=[{"role": "user", "content": "weather in Paris?"}]
    )
    message = answer.choices[0].message
    assert script.calls == 2 and len(no_backoff) == 1  # the retry happened
    assert message.content == ANSWER
    json.loads(message.content)
    reasoning = message.model_extra.get("reasoning_content") or ""
    assert "HTTP 429" in reasoning and "retrying in" in reasoning
    (logged,) = _notice_lines(lines)
    assert logged.startswith("notice: weather: ") and "retrying in" in logged


def test_a_retried_429_is_not_in_a_streamed_answers_content(
    flaky: tuple[Any, FlakyOnce, list[str]], no_backoff: list[float], check_stream: Callable[..., Any]
) -> None:
    served, script, lines = flaky
    body = {"model": "weather", "messages": [{"role": "user", "content": "weather?"}], "stream": True}
    with served.http() as http:
        raw = http.post("/v1/chat/completions", json=body).content
    result = check_stream(raw)
    assert script.calls == 2
    assert result.content == ANSWER
    reasoning = "".join(
        c["choices"][0]["delta"].get("reasoning_content") or "" for c in result.chunks if c["choices"]
    )
    assert "HTTP 429" in reasoning
    assert len(_notice_lines(lines)) == 1
