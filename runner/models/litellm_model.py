"""The litellm path: every provider litellm knows, behind the ``Model`` protocol.

This is the only module of the runner that imports litellm, and it does so on the first call
(the import costs seconds; SPEC section 14). litellm's exceptions become ``ModelError`` in one
place, ``map_litellm_error``. litellm's own retries are turned off (``max_retries=0``): retrying is
``ResilientModel``'s job, so that ``model.retries`` means what it says.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import AsyncIterator
from typing import Any

from runner.errors import ModelError, RunnerError
from runner.models.accumulate import ToolCallAccumulator, new_call_id
from runner.models.base import (
    Completed,
    ReasoningDelta,
    Reply,
    Request,
    StreamEvent,
    StreamingUnsupported,
    TextDelta,
    ToolCall,
    Usage,
    says_streaming_unsupported,
)
from runner.tools.threads import MODEL_THREADS

__all__ = ["LiteLLMModel", "map_litellm_error", "supports_function_calling"]

_litellm: Any = None

_RETRYABLE = frozenset(
    {
        "RateLimitError",
        "InternalServerError",
        "ServiceUnavailableError",
        "BadGatewayError",
        "APIConnectionError",
    }
)
_CONNECTION = frozenset({"APIConnectionError", "ConnectError", "ConnectionError", "ClientConnectorError"})
_TIMEOUT = frozenset({"Timeout", "APITimeoutError", "TimeoutException", "TimeoutError"})
# "litellm.RateLimitError: RateLimitError: OpenAIException - slow down" -> "slow down"
_LITELLM_PREFIX = re.compile(r"^(litellm\.\w+: )?(\w+Error: )?(\w+Exception - )?")
_HINTS = {
    "AuthenticationError": "check model.api_key (or the provider's usual API key variable)",
    "NotFoundError": "check model.id and model.api_base",
    "ContextWindowExceededError": "the conversation is too long for the model; set limits.context_tokens",
}


def _import_litellm(*, local_cost_map: bool = True) -> Any:
    global _litellm
    if _litellm is None:
        if local_cost_map:
            # Without this, importing litellm fetches the price list from the network.
            os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        # The runner registers no litellm logging callbacks, yet litellm copies the whole history after
        # every call to shorten base64 data in the log payload it builds: O(history) per step, about a
        # fifth of a step's time at 50 steps. 0 turns the copy off; a user who adds litellm callbacks and
        # wants images shortened in them sets the variable (docs/decisions.md).
        os.environ.setdefault("MAX_BASE64_LENGTH_FOR_LOGGING", "0")
        import litellm

        litellm.suppress_debug_info = True  # no "Give Feedback / Get Help" banner on every error
        _litellm = litellm
    return _litellm


def supports_function_calling(model_id: str) -> bool | None:
    """What litellm's model information says about native tool calls; None when it does not know."""
    litellm = _import_litellm()
    try:
        info = litellm.get_model_info(model_id)
    except Exception:
        return None
    value = info.get("supports_function_calling")
    return None if value is None else bool(value)


def map_litellm_error(exc: BaseException, model: str, *, streaming: bool = False) -> ModelError:
    """Turn any exception raised by litellm into a ``ModelError`` (retryable for 429, 5xx, network)."""
    if isinstance(exc, ModelError):
        return exc
    names = {cls.__name__ for cls in type(exc).__mro__}
    chain = set(names)
    cause: BaseException | None = exc
    for _ in range(8):  # litellm wraps network errors several times; look for the original
        cause = cause.__cause__ or cause.__context__ if cause is not None else None
        if cause is None:
            break
        chain.update(cls.__name__ for cls in type(cause).__mro__)
    detail = _LITELLM_PREFIX.sub("", str(exc).strip())[:500] or type(exc).__name__
    status = getattr(exc, "status_code", None)
    status = status if isinstance(status, int) else None
    message = f"{model}: {detail}"
    if chain & _TIMEOUT:
        return ModelError(message, retryable=True, hint="raise model.timeout_s if the model is slow")
    if chain & _CONNECTION:
        return ModelError(message, retryable=True, hint="is the model's endpoint reachable?")
    if status is not None:
        message = f"{model}: HTTP {status} {type(exc).__name__}: {detail}"
    if streaming and status in (400, 404, 422, 501) and says_streaming_unsupported(str(exc)):
        return StreamingUnsupported(message, status=status)
    retryable = bool(names & _RETRYABLE) or status in (408, 409, 425, 429) or (status or 0) >= 500
    hint = next((_HINTS[name] for name in _HINTS if name in names), None)
    return ModelError(message, status=status, retryable=retryable, hint=hint)


class LiteLLMModel:
    """A ``Model`` on ``litellm.acompletion``; messages pass through untouched."""

    def __init__(
        self,
        model_id: str,
        *,
        api_base: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 120.0,
        local_cost_map: bool = True,
    ) -> None:
        self.name = model_id
        self.api_base = api_base
        self._local_cost_map = local_cost_map
        self._fixed: dict[str, Any] = {"model": model_id, "max_retries": 0, "timeout": timeout_s}
        if api_base:
            self._fixed["api_base"] = api_base
        if api_key:
            self._fixed["api_key"] = api_key
        elif api_base and model_id.startswith("openai/") and not os.environ.get("OPENAI_API_KEY"):
            # Local OpenAI-compatible servers need no key, but the openai client refuses to start without one.
            self._fixed["api_key"] = "sk-no-key"
        self._supports_tools: bool | None = None
        self._tools_known = False
        self._priced: bool | None = None  # False once litellm said it has no price for the model

    def __repr__(self) -> str:
        return f"LiteLLMModel({self.name!r}, api_base={self.api_base!r})"

    @property
    def supports_tools(self) -> bool | None:
        """From litellm's model information; an ``openai/`` model at an ``api_base`` counts as native."""
        if not self._tools_known:
            if self.api_base and self.name.startswith("openai/"):
                self._supports_tools = True
            else:
                _import_litellm(local_cost_map=self._local_cost_map)
                self._supports_tools = supports_function_calling(self.name)
            self._tools_known = True
        return self._supports_tools

    async def complete(self, request: Request) -> Reply:
        """Answer in one piece: litellm's blocking ``completion`` on a model worker thread.

        litellm's async path runs its success logging (a log payload the runner never reads, ~1 ms of
        CPU per call) as a task on the caller's event loop, where it lands between a reply and the
        tools it asked for; its sync path runs the same work on litellm's own threads, overlapping the
        next request. Cancelling abandons the call: the thread finishes it and the answer is dropped.
        Streaming stays on ``acompletion`` (chunks arrive on the loop; stopping early closes the stream).
        """
        litellm = _import_litellm(local_cost_map=self._local_cost_map)
        try:
            response = await MODEL_THREADS.run(
                _quietly, litellm.completion, self._arguments(request, stream=False)
            )
        except Exception as exc:
            raise map_litellm_error(exc, self.name) from exc
        try:
            choice = response.choices[0]
            message = choice.message
        except (AttributeError, IndexError) as exc:
            raise ModelError(f"{self.name}: the answer has no choices[0].message") from exc
        calls = tuple(
            ToolCall(
                id=call.id or new_call_id(),
                name=call.function.name or "",
                arguments=call.function.arguments or "{}",
            )
            for call in message.tool_calls or ()
        )
        return Reply(
            content=message.content,
            tool_calls=calls,
            reasoning=getattr(message, "reasoning_content", None),
            usage=self._usage(getattr(response, "usage", None)),
            finish_reason=choice.finish_reason,
            model=response.model or self.name,
        )

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        """Answer as a stream; tool calls are reported as soon as their arguments are complete."""
        litellm = _import_litellm(local_cost_map=self._local_cost_map)
        accumulator = ToolCallAccumulator()
        text: list[str] = []
        reasoning: list[str] = []
        usage_data: Any = None
        finish_reason: str | None = None
        model = self.name
        response: Any = None
        finished = False
        quiet = _quiet()
        quiet.__enter__()
        try:
            response = await litellm.acompletion(**self._arguments(request, stream=True))
            async for chunk in response:
                usage_data = getattr(chunk, "usage", None) or usage_data
                model = chunk.model or model
                if not chunk.choices:
                    continue
                choice = chunk.choices[0]
                delta = choice.delta
                thought = getattr(delta, "reasoning_content", None)
                if thought:
                    reasoning.append(thought)
                    yield ReasoningDelta(thought)
                if delta.content:
                    text.append(delta.content)
                    yield TextDelta(delta.content)
                for item in delta.tool_calls or ():
                    for ready in accumulator.feed_events(item):
                        yield ready
                if choice.finish_reason:
                    finish_reason = choice.finish_reason
            finished = True
        except RunnerError:
            raise
        except Exception as exc:
            raise map_litellm_error(exc, self.name, streaming=True) from exc
        finally:
            quiet.__exit__(None, None, None)
            if response is not None and not finished:
                await _close_quietly(response)  # the consumer stopped early: release the connection
        for ready in accumulator.finish_events():
            yield ready
        yield Completed(
            Reply(
                content="".join(text) or None,
                tool_calls=accumulator.calls,
                reasoning="".join(reasoning) or None,
                usage=self._usage(usage_data),
                finish_reason=finish_reason,
                model=model,
            )
        )

    async def aclose(self) -> None:
        """Nothing to release: litellm keeps its own shared HTTP clients."""

    def _arguments(self, request: Request, *, stream: bool) -> dict[str, Any]:
        arguments = {**self._fixed, **request.params, "messages": request.messages, "stream": stream}
        if request.tools:
            arguments["tools"] = request.tools
        if stream and "stream_options" not in arguments:
            arguments["stream_options"] = {"include_usage": True}
        return arguments

    def _usage(self, data: Any) -> Usage:
        if data is None:
            return Usage()
        prompt = getattr(data, "prompt_tokens", 0) or 0
        completion = getattr(data, "completion_tokens", 0) or 0
        total = getattr(data, "total_tokens", 0) or prompt + completion
        return Usage(prompt, completion, total, self._cost(prompt, completion))

    def _cost(self, prompt_tokens: int, completion_tokens: int) -> float | None:
        if self._priced is False:
            return None
        try:
            prompt_cost, completion_cost = _litellm.cost_per_token(
                model=self.name, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens
            )
        except Exception:
            self._priced = False  # litellm has no price for this model: do not ask on every step
            return None
        self._priced = True
        return float(prompt_cost + completion_cost)


#: litellm's lists of logging callbacks; while all are empty, nobody reads what its success logging builds.
_CALLBACK_LISTS = (
    "callbacks",
    "success_callback",
    "_async_success_callback",
    "failure_callback",
    "_async_failure_callback",
    "input_callback",
    "_async_input_callback",
    "service_callback",
)


def _quiet() -> contextlib.AbstractContextManager[Any]:
    """Skip litellm's success logging when no callback listens (it costs a step ~0.3 ms of CPU).

    litellm builds a logging payload after every call, on a thread of its own, that competes with the
    runner's loop for the GIL just when the reply arrives. ``internal_sub_call`` is litellm's own way
    to call itself without logging; it is used only while no logging callback is registered, so a
    user who adds one (``litellm.success_callback``, ...) gets every call logged as before.
    """
    if _litellm is None or any(getattr(_litellm, name, None) for name in _CALLBACK_LISTS):
        return contextlib.nullcontext()
    try:
        from litellm._internal_context import internal_sub_call
    except ImportError:  # another litellm version: log as usual
        return contextlib.nullcontext()
    return internal_sub_call()


def _quietly(completion: Any, arguments: dict[str, Any]) -> Any:
    """``completion(**arguments)`` without litellm's success logging, when nobody listens."""
    with _quiet():
        return completion(**arguments)


async def _close_quietly(response: Any) -> None:
    closer = getattr(response, "aclose", None)
    if closer is not None:
        with contextlib.suppress(Exception):
            await closer()
