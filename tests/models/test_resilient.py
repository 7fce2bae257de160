"""Retries, backoff and fallbacks (``model.retries``, ``model.fallbacks``), in process."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from runner.errors import ModelError
from runner.models import resilient
from runner.models.base import (
    Completed,
    Reply,
    Request,
    StreamEvent,
    StreamingUnsupported,
    TextDelta,
)
from runner.models.resilient import ResilientModel
from runner.testing import ScriptedModel, text

REQUEST = Request(model="primary", messages=[{"role": "user", "content": "hi"}])


def transient(message: str = "busy") -> ModelError:
    return ModelError(message, status=503, retryable=True)


@pytest.fixture(autouse=True)
def recorded_sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Backoff delays are recorded instead of slept."""
    delays: list[float] = []

    async def sleep(delay: float) -> None:
        delays.append(delay)

    monkeypatch.setattr(resilient, "_sleep", sleep)
    return delays


async def test_retryable_errors_are_retried_until_success(recorded_sleeps: list[float]) -> None:
    primary = ScriptedModel([transient(), transient(), text("finally")], name="primary")
    reply = await ResilientModel(primary, retries=2).complete(REQUEST)
    assert reply.content == "finally"
    assert len(primary.requests) == 3
    assert len(recorded_sleeps) == 2


async def test_backoff_grows_exponentially_with_jitter(recorded_sleeps: list[float]) -> None:
    primary = ScriptedModel([transient()] * 4 + [text("ok")], name="primary")
    await ResilientModel(primary, retries=4, backoff_s=1.0, max_backoff_s=100).complete(REQUEST)
    for attempt, delay in enumerate(recorded_sleeps):
        assert 0.75 * 2**attempt <= delay <= 1.25 * 2**attempt
    assert len(set(recorded_sleeps)) == 4


async def test_non_retryable_error_goes_straight_to_the_fallback() -> None:
    primary = ScriptedModel([ModelError("bad request", status=400)], name="primary")
    fallback = ScriptedModel([text("fallback answer")], name="fallback")
    model = ResilientModel(primary, [fallback], retries=3)
    assert (await model.complete(REQUEST)).content == "fallback answer"
    assert len(primary.requests) == 1
    assert fallback.requests[0].model == "fallback"
    assert model.last_model == "fallback"


async def test_retries_count_extra_attempts_before_the_fallbacks_in_order() -> None:
    primary = ScriptedModel([transient()] * 3, name="primary")
    first = ScriptedModel([transient("first down")] * 3, name="first")
    second = ScriptedModel([text("second")], name="second")
    reply = await ResilientModel(primary, [first, second], retries=2).complete(REQUEST)
    assert reply.content == "second"
    assert (len(primary.requests), len(first.requests), len(second.requests)) == (3, 3, 1)


async def test_when_every_model_fails_the_error_names_each_failure() -> None:
    primary = ScriptedModel([ModelError("primary: no key", status=401)], name="primary")
    fallback = ScriptedModel(
        [ModelError("fallback: rate limited", status=429, retryable=True)] * 2, name="fb"
    )
    with pytest.raises(ModelError) as caught:
        await ResilientModel(primary, [fallback], retries=1).complete(REQUEST)
    assert "primary: no key" in caught.value.message
    assert "fallback: rate limited" in caught.value.message
    assert caught.value.status == 429


async def test_without_fallbacks_the_last_error_is_raised_as_is() -> None:
    error = ModelError("down", status=500, retryable=True)
    with pytest.raises(ModelError) as caught:
        await ResilientModel(ScriptedModel([error] * 2), retries=1).complete(REQUEST)
    assert caught.value is error


async def test_stream_is_retried_before_its_first_event() -> None:
    primary = ScriptedModel([transient(), text("streamed")], name="primary")
    events = [event async for event in ResilientModel(primary, retries=1).stream(REQUEST)]
    assert isinstance(events[-1], Completed) and events[-1].reply.content == "streamed"


class FailsMidStream:
    """Yields one piece of text, then fails as a dropped connection would."""

    name = "flaky"
    supports_tools: bool | None = True

    def __init__(self) -> None:
        self.calls = 0

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        self.calls += 1
        yield TextDelta("partial ")
        raise transient("connection reset")

    async def complete(self, request: Request) -> Reply:
        raise AssertionError("not used")

    async def aclose(self) -> None:
        pass


async def test_stream_that_already_yielded_is_not_retried_or_replayed() -> None:
    flaky = FailsMidStream()
    fallback = ScriptedModel([text("never")], name="fallback")
    seen: list[StreamEvent] = []
    with pytest.raises(ModelError, match="connection reset"):
        async for event in ResilientModel(flaky, [fallback], retries=3).stream(REQUEST):
            seen.append(event)
    assert seen == [TextDelta("partial ")]
    assert flaky.calls == 1
    assert fallback.requests == []


class CannotStream:
    """Refuses every streamed request; answers ``complete``."""

    name = "no-stream"
    supports_tools: bool | None = None

    def __init__(self) -> None:
        self.streams = 0
        self.completes = 0

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        self.streams += 1
        raise StreamingUnsupported("stream is not supported", status=400)
        yield TextDelta("")  # pragma: no cover - makes this an async generator

    async def complete(self, request: Request) -> Reply:
        self.completes += 1
        return text("whole")

    async def aclose(self) -> None:
        pass


async def test_model_that_cannot_stream_is_completed_silently_from_then_on(
    recorded_sleeps: list[float],
) -> None:
    inner = CannotStream()
    model = ResilientModel(inner, retries=2)
    for _ in range(3):
        events = [event async for event in model.stream(REQUEST)]
        assert events == [TextDelta("whole"), Completed(text("whole"))]
    assert (inner.streams, inner.completes) == (1, 3)
    assert recorded_sleeps == []


async def test_aclose_closes_primary_and_fallbacks() -> None:
    primary, fallback = ScriptedModel([]), ScriptedModel([])
    await ResilientModel(primary, [fallback]).aclose()
    assert primary.closed and fallback.closed


def test_name_and_tool_support_come_from_the_primary() -> None:
    model = ResilientModel(ScriptedModel([], name="main"), [CannotStream()])
    assert (model.name, model.supports_tools) == ("main", True)


async def test_retry_after_replaces_the_backoff_exactly_and_is_announced(
    recorded_sleeps: list[float], notices: list[str]
) -> None:
    limited = ModelError("primary: HTTP 429: slow down.", status=429, retryable=True, retry_after=3.0)
    primary = ScriptedModel([limited, transient("primary: busy"), text("ok")], name="primary")
    model = ResilientModel(primary, retries=2, backoff_s=0.5, max_wait_s=120)
    assert (await model.complete(REQUEST)).content == "ok"
    assert recorded_sleeps[0] == 3.0  # no jitter below what the server asked for
    assert 0.5 * 0.75 <= recorded_sleeps[1] <= 1.0 * 1.25  # no Retry-After: the backoff
    assert notices[0] == (
        "primary: HTTP 429: slow down; retrying in 3.0 s as the server asked (Retry-After) (1 of 2)"
    )
    assert notices[1].startswith("primary: busy; retrying in ") and "Retry-After" not in notices[1]


async def test_a_stream_retried_for_retry_after_waits_too(recorded_sleeps: list[float]) -> None:
    limited = ModelError("primary: HTTP 429", status=429, retryable=True, retry_after=1.5)
    primary = ScriptedModel([limited, text("ok")], name="primary")
    events = [event async for event in ResilientModel(primary, retries=1).stream(REQUEST)]
    assert isinstance(events[-1], Completed) and recorded_sleeps == [1.5]
