"""The fault helpers both model paths share: Retry-After, provider messages, clean one-line errors."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import time

import httpx
import pytest

from runner.errors import ConfigError
from runner.models import faults, resilient
from runner.models.base import Request
from runner.models.faults import clean, provider_message, retry_after_s
from runner.models.openai_compat import OpenAICompatModel
from runner.models.prices import cost_usd, model_entry

NOW = dt.datetime(2026, 12, 1, 12, 0, 0, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"Retry-After": "2"}, 2.0),
        ({"retry-after": "0.5"}, 0.5),
        ({"retry-after-ms": "1500", "retry-after": "2"}, 1.5),  # the finer one wins
        ({"Retry-After": "Tue, 01 Dec 2026 12:00:07 GMT"}, 7.0),  # an HTTP date
        ({"Retry-After": "Tue, 01 Dec 2026 11:59:00 GMT"}, 0.0),  # a date in the past: no wait
        ({"Retry-After": "soon"}, None),
        ({"Retry-After": "-3"}, None),
        ({}, None),
    ],
)
def test_retry_after_reads_seconds_and_http_dates(headers: dict[str, str], expected: float | None) -> None:
    assert retry_after_s(headers, now=NOW) == expected


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            b'{"error": {"message": "Rate limit exceeded.", "type": "rate_limit_error"}}',
            "Rate limit exceeded.",
        ),
        ('{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}', "Overloaded"),
        ('[{"error": {"code": 429, "message": "Quota", "status": "RESOURCE_EXHAUSTED"}}]', "Quota"),
        ('{"detail": "Not Found"}', "Not Found"),
        ("<html>bad gateway</html>", None),
    ],
)
def test_provider_message_reads_each_wire_shape(body: str | bytes, expected: str | None) -> None:
    assert provider_message(body) == expected


def test_clean_removes_what_is_meant_for_programmers() -> None:
    raw = (
        "litellm.InternalServerError: AnthropicException - Server disconnected. Handle with "
        "`litellm.InternalServerError`. ctx=<ssl.SSLContext object at 0x7f3a68792510> "
        "Original exception: APIConnectionError: litellm.APIConnectionError: Server disconnected"
    )
    assert clean(raw) == "Server disconnected ctx=SSLContext"


def test_clean_reads_the_message_out_of_a_bytes_repr() -> None:
    raw = (
        """AnthropicError - b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded."}}'"""
    )
    assert clean(raw) == "Overloaded."


# ----------------------------------------------------------------- Retry-After on the fast path's wire


async def test_fast_path_honours_an_http_date_retry_after(monkeypatch: pytest.MonkeyPatch) -> None:
    waits: list[float] = []

    async def record(delay: float) -> None:
        waits.append(delay)

    monkeypatch.setattr(resilient, "_sleep", record)
    when = email_date(time.time() + 30)
    answers = iter(
        [
            httpx.Response(429, json={"error": {"message": "slow down"}}, headers={"Retry-After": when}),
            httpx.Response(200, json={"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}]}),
        ]
    )
    inner = OpenAICompatModel(
        "openai/m", api_base="http://test/v1", transport=httpx.MockTransport(lambda r: next(answers))
    )
    model = resilient.ResilientModel(inner, retries=1)
    reply = await model.complete(Request("openai/m", [{"role": "user", "content": "hi"}], stream=False))
    assert reply.content == "ok"
    (wait,) = waits
    assert 27 <= wait <= 30


def email_date(epoch: float) -> str:
    import email.utils

    return email.utils.formatdate(epoch, usegmt=True)


# ----------------------------------------------------------------- prices without litellm


def test_prices_come_from_litellms_data_file_without_importing_litellm() -> None:
    code = (
        "import sys, json; from runner.models.prices import cost_usd;"
        "c = cost_usd('openai/gpt-4o-mini', 1_000_000, 0);"
        "print(json.dumps([c, 'litellm' in sys.modules]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    cost, imported = json.loads(out.stdout)
    assert cost == pytest.approx(0.15)  # gpt-4o-mini: $0.15 per million prompt tokens
    assert imported is False


def test_an_unknown_model_is_unpriced_not_free() -> None:
    assert model_entry("openai/my-local-llama") is None
    assert cost_usd("openai/my-local-llama", 1000, 1000) is None
    assert cost_usd("anthropic/claude-haiku-4-5", 1000, 0) is not None


async def test_fast_path_usage_is_priced() -> None:
    body = {
        "choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1_000_000, "completion_tokens": 1_000_000},
    }
    model = OpenAICompatModel(
        "openai/gpt-4o-mini",
        api_base="http://test/v1",
        transport=httpx.MockTransport(lambda r: httpx.Response(200, json=body)),
    )
    reply = await model.complete(Request("openai/gpt-4o-mini", [{"role": "user", "content": "hi"}]))
    assert reply.usage.cost_usd == pytest.approx(0.15 + 0.60)


# ----------------------------------------------------------------- a missing API key


async def test_a_missing_api_key_is_refused_before_any_request(monkeypatch: pytest.MonkeyPatch) -> None:
    from runner.models.litellm_model import LiteLLMModel, MissingApiKey

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    model = LiteLLMModel("openai/gpt-4o-mini")  # no api_base: litellm would go to api.openai.com
    with pytest.raises(MissingApiKey) as caught:  # the no-network guard would fail a request
        await model.complete(Request("openai/gpt-4o-mini", [{"role": "user", "content": "hi"}]))
    assert isinstance(caught.value, ConfigError) and caught.value.exit_code == 2
    assert caught.value.message == (
        "no API key for openai/gpt-4o-mini: set OPENAI_API_KEY (or use --replay, or a local api_base)"
    )


async def test_a_provider_without_an_api_key_variable_is_not_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    import litellm

    from runner.models.litellm_model import missing_api_key

    # Ollama needs no key, Bedrock finds AWS credentials elsewhere: never "no API key" for them
    assert missing_api_key("ollama/llama3.1", litellm) is None
    assert missing_api_key("bedrock/anthropic.claude-v2", litellm) is None
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    error = missing_api_key("anthropic/claude-3-5-haiku-latest", litellm)
    assert error is not None and "set ANTHROPIC_API_KEY" in error.message


def test_incomplete_stream_is_a_retryable_model_error() -> None:
    error = faults.incomplete_stream("m", shown=False, in_tool_call=True)
    assert error.retryable and "inside a tool call's arguments" in error.message
