"""Retries with backoff, then fallbacks: the ``model.retries`` and ``model.fallbacks`` of the agent file.

``ResilientModel`` wraps a primary model and its fallbacks behind the same ``Model`` protocol.
A retryable ``ModelError`` (429, 5xx, network, timeout) is retried ``retries`` times with
exponential backoff and jitter; then (or at once, for an error that retrying cannot fix) the next
model is tried. A stream is retried only while it has yielded nothing: once text has reached the
user, replaying it would show it twice. A model that refuses to stream is asked with ``complete``
instead, silently, from then on (SPEC section 4: "stream: silently false when the model cannot stream").

A server that says how long to wait (``Retry-After``, in seconds or as an HTTP date) is waited for
that long instead of the backoff, capped by the model's ``timeout_s`` and by ``MAX_RETRY_AFTER_S``.
Every retry is announced (``runner.models.notices``): which error, how long the wait, which attempt.

Each request (each attempt) is bounded as a whole by ``total_timeout_s`` (``model.total_timeout_s``):
the models' own timeouts bound each wait for data, so a server that drips a chunk every few seconds
would otherwise keep a call going forever. The bound is one timer per request; it cancels the call
only while the request itself is awaited, never the caller's own work between two events.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from typing import Any

import runner.telemetry as telemetry
from runner.errors import ModelError
from runner.models.base import Model, Reply, Request, StreamEvent, StreamingUnsupported, events_of
from runner.models.notices import notify
from runner.models.retry import MAX_RETRY_AFTER_S, RetryPolicy

__all__ = ["MAX_RETRY_AFTER_S", "ResilientModel", "overran"]

_sleep = asyncio.sleep  # tests replace it to record backoff delays


class ResilientModel:
    """A primary model with retries and ordered fallbacks, itself a ``Model``."""

    def __init__(
        self,
        primary: Model,
        fallbacks: Sequence[Model] = (),
        *,
        retries: int = 2,
        backoff_s: float = 0.5,
        max_backoff_s: float = 8.0,
        max_wait_s: float | None = None,
        total_timeout_s: float | None = None,
    ) -> None:
        self.primary = primary
        self.fallbacks = list(fallbacks)
        self.retries = max(0, retries)
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        # the longest Retry-After honoured: the model's timeout_s, and never past MAX_RETRY_AFTER_S
        self.max_wait_s = min(MAX_RETRY_AFTER_S, max_wait_s) if max_wait_s else MAX_RETRY_AFTER_S
        #: How long each wait is (``runner.models.retry``: the batch's retries wait by it too).
        self.policy = RetryPolicy(backoff_s, max_backoff_s, self.max_wait_s)
        self.total_timeout_s = total_timeout_s  # None: a request may take as long as its data keeps coming
        self.last_model: str | None = None  # the model that gave the last answer
        self._cannot_stream: set[int] = set()

    def __repr__(self) -> str:
        return f"ResilientModel({self.primary!r}, fallbacks={self.fallbacks!r}, retries={self.retries})"

    @property
    def name(self) -> str:
        """The primary model's id."""
        return self.primary.name

    @property
    def keeps_messages(self) -> bool:
        """Whether no model of the chain changes a request's messages in place (each says so:
        ``keeps_messages``; a model that does not say is taken to)."""
        return all(
            getattr(model, "keeps_messages", False) is True for model in (self.primary, *self.fallbacks)
        )

    @property
    def supports_tools(self) -> bool | None:
        """The primary model's tool support."""
        return self.primary.supports_tools

    @property
    def structured_output(self) -> str | None:
        """How the primary model takes ``output:`` (``runner.modes.structured``)."""
        return getattr(self.primary, "structured_output", None)

    async def complete(self, request: Request) -> Reply:
        """Ask each model in turn, retrying transient errors, until one answers."""
        errors: dict[int, ModelError] = {}
        for position, model in enumerate(self._models()):
            sent = self._request_for(model, request)
            for attempt in range(self.retries + 1):
                try:
                    reply = await self._complete(model, sent)
                except ModelError as exc:
                    errors[position] = exc
                    if not exc.retryable or attempt == self.retries:
                        break
                    await self._wait(model, exc, attempt)
                else:
                    self.last_model = model.name
                    return reply
        raise self._failure(errors)

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        """Stream from the first model that answers; retry or fall back only before the first event."""
        errors: dict[int, ModelError] = {}
        for position, model in enumerate(self._models()):
            sent = self._request_for(model, request)
            attempt = 0
            while True:
                started = False
                _prepare(model)
                events = self._events(model, sent)
                bound = _Bound(model.name, self.total_timeout_s) if self.total_timeout_s else None
                try:
                    if bound is None:
                        async for event in events:
                            started = True
                            yield event
                    else:
                        while (bounded := await bound.next(events)) is not None:
                            started = True
                            yield bounded
                except ModelError as exc:
                    if started:
                        raise
                    if isinstance(exc, StreamingUnsupported) and id(model) not in self._cannot_stream:
                        self._cannot_stream.add(id(model))
                        continue  # ask the same model again without streaming; not a retry
                    errors[position] = exc
                    if not exc.retryable or attempt == self.retries:
                        break
                    await self._wait(model, exc, attempt)
                    attempt += 1
                    continue
                finally:
                    if bound is not None:
                        bound.stop()
                    await _close(events)
                self.last_model = model.name
                return
        raise self._failure(errors)

    async def aclose(self) -> None:
        """Close every model (each once)."""
        closed: set[int] = set()
        for model in self._models():
            if id(model) not in closed:
                closed.add(id(model))
                await model.aclose()

    async def _complete(self, model: Model, request: Request) -> Reply:
        """``model.complete(request)`` within ``total_timeout_s``."""
        if not self.total_timeout_s:
            return await model.complete(request)
        _prepare(model)
        scope = asyncio.timeout(self.total_timeout_s)
        try:
            async with scope:
                return await model.complete(request)
        except TimeoutError:
            if scope.expired():
                raise overran(model.name, self.total_timeout_s) from None
            raise

    def _models(self) -> list[Model]:
        return [self.primary, *self.fallbacks]

    def _request_for(self, model: Model, request: Request) -> Request:
        return request if model is self.primary else replace(request, model=model.name)

    def _events(self, model: Model, request: Request) -> AsyncIterator[StreamEvent]:
        if id(model) not in self._cannot_stream:
            return model.stream(
                request
            )  # closed by ``stream``'s finally, so an HTTP stream is released at once
        return self._completed(model, request)

    async def _completed(self, model: Model, request: Request) -> AsyncIterator[StreamEvent]:
        for event in events_of(await model.complete(request)):
            yield event

    async def _wait(self, model: Model, error: ModelError, attempt: int) -> None:
        """Wait before retry ``attempt + 1``: what the server asked for, else the backoff; say so."""
        delay, why = self.policy.delay(attempt, error.retry_after)
        reason = error.message.removeprefix(f"{model.name}: ").rstrip(".")
        notify(f"{model.name}: {reason}; retrying in {delay:.1f} s{why} ({attempt + 1} of {self.retries})")
        telemetry.model_retry(model.name, error, delay)
        await _sleep(delay)

    def _failure(self, errors: dict[int, ModelError]) -> ModelError:
        """The last error alone, or (with fallbacks) one error that lists each model's last error."""
        last = errors[max(errors)]
        if len(errors) == 1:
            return last
        tried = "; ".join(error.message for error in errors.values())
        return ModelError(
            f"every model failed: {tried}",
            hint=last.hint,
            status=last.status,
            retryable=last.retryable,
            retry_after=last.retry_after,
        )


async def _close(events: Any) -> None:
    closer = getattr(events, "aclose", None)
    if closer is not None:
        await closer()


def overran(model: str, seconds: float) -> ModelError:
    """The error of a request that ran past ``model.total_timeout_s`` (not retried: it had its time)."""
    return ModelError(
        f"{model}: the answer did not end within {seconds:g} s (model.total_timeout_s)",
        hint="raise model.total_timeout_s if the model's answers really take this long",
    )


def _prepare(model: Model) -> None:
    """The model's one-time set-up (litellm's import, seconds long) before a request's time starts:
    ``total_timeout_s`` bounds the answer, not the runner's own start-up."""
    prepare = getattr(model, "prepare", None)
    if prepare is not None:
        prepare()


class _Bound:
    """One request's whole-duration bound: a timer that cancels the request only while it is awaited.

    Between two events the caller runs its own code (which no timer may cancel); a bound that passes
    then is reported by the next ``next``.
    """

    __slots__ = ("_handle", "_inside", "_model", "_passed", "_seconds", "_task")

    def __init__(self, model: str, seconds: float) -> None:
        loop = asyncio.get_running_loop()
        self._model = model
        self._seconds = seconds
        self._task = asyncio.current_task()
        self._inside = False
        self._passed = False
        self._handle = loop.call_at(loop.time() + seconds, self._expire)

    def _expire(self) -> None:
        self._passed = True
        if self._inside and self._task is not None:
            self._task.cancel()

    async def next(self, events: AsyncIterator[StreamEvent]) -> StreamEvent | None:
        """The next event of ``events`` (None at its end), or the bound's ``ModelError``."""
        if self._passed:
            raise overran(self._model, self._seconds)
        self._inside = True
        try:
            return await anext(events)
        except StopAsyncIteration:
            return None
        except asyncio.CancelledError:
            if self._passed and self._task is not None and self._task.uncancel() == 0:
                raise overran(self._model, self._seconds) from None
            raise
        finally:
            self._inside = False

    def stop(self) -> None:
        """The request is over: the timer is not needed any more."""
        self._handle.cancel()
