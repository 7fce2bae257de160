"""Model faults injected by third-party mock servers (llmock, aimock), through both model paths.

Each test performs the fault and fails if the runner mishandles it: a ``Retry-After`` not waited
for, a cut stream taken as a whole answer, a message that blames the wrong party or reads like a
traceback (an invented ``HTTP 500``, "Handle with litellm...", an object repr, the text twice).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from runner.errors import ModelError
from runner.models.base import Completed, Model, Request, StreamEvent, TextDelta
from runner.models.faults import IncompleteStream
from runner.models.resilient import ResilientModel

# the module's aimock_reset is started once: all its tests on one worker (xdist loadgroup)
pytestmark = pytest.mark.xdist_group("aimock-servers")

PATHS = ("openai_compat", "litellm")
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "weather",
        "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
ANSWER = "All forty-two of them are here today"


def make(path: str, base_url: str, model_id: str = "openai/faulty", timeout_s: float = 30.0) -> Model:
    """A model on ``path`` (the fast path or litellm) at ``base_url``."""
    if path == "litellm":
        from runner.models.litellm_model import LiteLLMModel

        return LiteLLMModel(model_id, api_base=base_url, api_key="sk-test", timeout_s=timeout_s)
    from runner.models.openai_compat import OpenAICompatModel

    return OpenAICompatModel(model_id, api_base=base_url, api_key="sk-test", timeout_s=timeout_s)


def ask(model_id: str = "openai/faulty", *, tools: bool = False) -> Request:
    return Request(
        model=model_id,
        messages=[{"role": "user", "content": "How many?"}],
        tools=[WEATHER_TOOL] if tools else None,
    )


async def collect(model: Model, request: Request) -> list[StreamEvent]:
    return [event async for event in model.stream(request)]


def text_of(events: list[StreamEvent]) -> str:
    return "".join(event.text for event in events if isinstance(event, TextDelta))


def assert_honest(message: str) -> None:
    """No advice for litellm's programmers, no object reprs, no bytes reprs, no repeated text."""
    assert "Handle with" not in message
    assert "litellm." not in message and "MidStreamFallbackError" not in message
    assert " at 0x" not in message and "b'" not in message and 'b"' not in message
    assert "Original exception" not in message
    assert "127.0.0.1" not in message  # the endpoint's URL says nothing the user does not know


@pytest.fixture(params=PATHS)
def path(request: pytest.FixtureRequest) -> str:
    """Which model path a test runs on: the httpx fast path or litellm."""
    return str(request.param)


@pytest.fixture
def no_sleep(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Record ResilientModel's waits instead of sleeping them."""
    from runner.models import resilient

    waits: list[float] = []

    async def record(delay: float) -> None:
        waits.append(delay)

    monkeypatch.setattr(resilient, "_sleep", record)
    return waits


# ----------------------------------------------------------------- 1. Retry-After


async def test_retry_after_is_waited_for_and_announced(path: str, llmock: Any, notices: list[str]) -> None:
    llmock.rate_limit(retry_after=1).reply(ANSWER)
    model = ResilientModel(make(path, llmock.base_url()), retries=2, backoff_s=0.01)
    events = await collect(model, ask())
    assert text_of(events) == ANSWER
    first, second = llmock.requests
    # the retry came after the asked second, not after the 10 ms backoff
    waited = second.started_at - first.started_at
    assert waited >= 0.95, waited
    assert notices == [
        "openai/faulty: HTTP 429: Rate limit exceeded; retrying in 1.0 s as the server asked (Retry-After)"
        " (1 of 2)"
    ]


async def test_retry_after_is_capped_by_the_model_timeout(
    path: str, llmock: Any, notices: list[str], no_sleep: list[float]
) -> None:
    llmock.rate_limit(retry_after=3600).reply(ANSWER)
    model = ResilientModel(make(path, llmock.base_url()), retries=1, max_wait_s=2.5)
    assert text_of(await collect(model, ask())) == ANSWER
    assert no_sleep == [2.5]
    assert "the server asked for 3600 s; the most the runner waits is 2.5 s" in notices[0]


async def test_retry_after_is_capped_by_the_documented_maximum(llmock: Any, no_sleep: list[float]) -> None:
    from runner.models.resilient import MAX_RETRY_AFTER_S

    llmock.rate_limit(retry_after=3600).reply(ANSWER)
    model = ResilientModel(make("openai_compat", llmock.base_url()), retries=1, max_wait_s=600)
    await collect(model, ask())
    assert no_sleep == [MAX_RETRY_AFTER_S]


# ----------------------------------------------------------------- 2. a stream that ends early


async def test_a_stream_cut_after_text_is_an_error_not_an_answer(path: str, llmock: Any) -> None:
    llmock.reply(ANSWER).truncate(after_chunks=3)
    model = ResilientModel(make(path, llmock.base_url()), retries=2, backoff_s=0.01)
    shown: list[StreamEvent] = []
    with pytest.raises(IncompleteStream) as caught:
        async for event in model.stream(ask()):
            shown.append(event)
    assert text_of(shown) and text_of(shown) != ANSWER  # part of it was shown ...
    assert not any(isinstance(event, Completed) for event in shown)  # ... but never completed
    assert len(llmock.requests) == 1  # shown text is never asked for twice
    message = str(caught.value)
    assert "stopped before its end" in message and "not kept" in message
    assert_honest(message)


async def test_a_stream_cut_before_anything_was_shown_is_retried(path: str, llmock: Any) -> None:
    llmock.reply(ANSWER, times=2).truncate(after_chunks=1)  # only the role chunk: no text
    model = ResilientModel(make(path, llmock.base_url()), retries=2, backoff_s=0.01)
    events = await collect(model, ask())
    assert text_of(events) == ANSWER
    assert len(llmock.requests) == 2


async def test_a_stream_cut_inside_tool_arguments_is_retried_not_blamed_on_the_model(
    path: str, llmock: Any
) -> None:
    llmock.call_tool("weather", {"city": "Paris"}, times=2).truncate(after_chunks=3)
    model = ResilientModel(make(path, llmock.base_url()), retries=2, backoff_s=0.01)
    events = await collect(model, ask(tools=True))
    (completed,) = [event for event in events if isinstance(event, Completed)]
    (call,) = completed.reply.tool_calls
    assert json.loads(call.arguments) == {"city": "Paris"}
    assert len(llmock.requests) == 2


async def test_a_stream_cut_inside_tool_arguments_without_retries_says_where(path: str, llmock: Any) -> None:
    llmock.call_tool("weather", {"city": "Paris"}).truncate(after_chunks=3)
    model = ResilientModel(make(path, llmock.base_url()), retries=0)
    with pytest.raises(IncompleteStream, match="inside a tool call's arguments") as caught:
        await collect(model, ask(tools=True))
    assert "Invalid arguments" not in str(caught.value)
    assert_honest(str(caught.value))


ANTHROPIC = "anthropic/claude-3-5-haiku-latest"


async def test_anthropic_corrupted_first_event_is_retried_not_an_empty_answer(llmock: Any) -> None:
    llmock.reply(ANSWER, times=2).corrupt(after_chunks=0, provider="anthropic")
    model = ResilientModel(make("litellm", llmock.url + "/anthropic", ANTHROPIC), retries=2, backoff_s=0.01)
    events = await collect(model, ask(ANTHROPIC))
    assert text_of(events) == ANSWER
    assert len(llmock.requests) == 2


async def test_anthropic_corrupted_first_event_without_retries_is_an_error(llmock: Any) -> None:
    llmock.reply(ANSWER).corrupt(after_chunks=0, provider="anthropic")
    model = ResilientModel(make("litellm", llmock.url + "/anthropic", ANTHROPIC), retries=0)
    with pytest.raises(IncompleteStream) as caught:
        await collect(model, ask(ANTHROPIC))
    assert_honest(str(caught.value))


# ----------------------------------------------------------------- 3. honest messages


async def test_overloaded_529_keeps_its_status_and_the_providers_message(llmock: Any) -> None:
    llmock.fail(529, times=None)
    model = make("litellm", llmock.url + "/anthropic", ANTHROPIC)
    with pytest.raises(ModelError) as caught:
        await collect(model, ask(ANTHROPIC))
    error = caught.value
    assert error.status == 529 and error.retryable
    assert str(error) == f"{ANTHROPIC}: HTTP 529: Service overloaded."
    assert_honest(str(error))


async def test_overloaded_529_on_the_openai_wire(path: str, llmock: Any) -> None:
    llmock.fail(529)
    with pytest.raises(ModelError) as caught:
        await collect(make(path, llmock.base_url()), ask())
    assert (caught.value.status, caught.value.retryable) == (529, True)
    assert str(caught.value) == "openai/faulty: HTTP 529: Service overloaded."


async def test_a_drop_mid_stream_is_said_once_without_an_invented_status(path: str, llmock: Any) -> None:
    llmock.reply(ANSWER).disconnect(after_chunks=3)
    model = make(path, llmock.base_url())
    with pytest.raises(ModelError) as caught:
        await collect(model, ask())
    error = caught.value
    assert error.status is None and error.retryable
    assert error.message == "openai/faulty: the connection to the server dropped in the middle of the answer"
    assert_honest(str(error))


async def test_a_timeout_says_raise_timeout_s_on_both_paths(path: str, llmock: Any) -> None:
    llmock.slow_first_token(5)
    model = make(path, llmock.base_url(), timeout_s=0.5)
    with pytest.raises(ModelError) as caught:
        await collect(model, ask())
    assert caught.value.hint == "raise model.timeout_s if the model is slow"
    assert "timed out" in caught.value.message and caught.value.status is None
    assert_honest(str(caught.value))


RESET_CASES: list[tuple[str, str, Callable[[str], str]]] = [
    ("openai_compat", "openai/faulty", lambda url: url + "/v1"),
    ("litellm", "openai/faulty", lambda url: url + "/v1"),
    ("litellm", ANTHROPIC, lambda url: url),
]


@pytest.mark.parametrize(("kind", "model_id", "base"), RESET_CASES, ids=["fast", "litellm", "anthropic"])
async def test_a_connection_reset_before_the_first_byte_is_told_as_such(
    aimock_reset: str, kind: str, model_id: str, base: Callable[[str], str]
) -> None:
    model = make(kind, base(aimock_reset), model_id)
    with pytest.raises(ModelError) as caught:
        await collect(model, ask(model_id))
    error = caught.value
    assert error.status is None and error.retryable  # no "HTTP 500": the server sent no status
    assert error.message == f"{model_id}: the connection to the server was closed before an answer arrived"
    assert_honest(str(error))


WIRES: list[tuple[str, str, str]] = [
    ("openai_compat", "openai/faulty", "/v1"),
    ("litellm", "openai/faulty", "/v1"),
    ("litellm", ANTHROPIC, "/anthropic"),
    ("litellm", "gemini/gemini-2.0-flash", "/gemini/v1beta"),
]


@pytest.mark.parametrize(("kind", "model_id", "base"), WIRES, ids=["fast", "litellm", "anthropic", "gemini"])
async def test_whole_answers_and_tool_calls_are_never_taken_for_cut_ones(
    llmock: Any, kind: str, model_id: str, base: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import litellm

    from runner.models.litellm_model import _CALLBACK_LISTS

    for name in _CALLBACK_LISTS:  # a Gemini call registers litellm's "cache" callback process-wide
        monkeypatch.setattr(litellm, name, list(getattr(litellm, name, None) or []), raising=False)
    llmock.reply(ANSWER).call_tool("weather", {"city": "Paris"})
    model = ResilientModel(make(kind, llmock.url + base, model_id), retries=0)
    assert text_of(await collect(model, ask(model_id))) == ANSWER
    events = await collect(model, ask(model_id, tools=True))
    (completed,) = [event for event in events if isinstance(event, Completed)]
    assert [json.loads(call.arguments) for call in completed.reply.tool_calls] == [{"city": "Paris"}]
