"""The litellm path: every provider litellm knows, behind the ``Model`` protocol.

This is the only module of the runner that imports litellm, and it does so on the first call
(the import costs seconds; SPEC section 14). litellm's exceptions become ``ModelError`` in one
place, ``map_litellm_error`` (in ``litellm_errors``). litellm's own retries are turned off
(``max_retries=0``): retrying is ``ResilientModel``'s job, so that ``model.retries`` means what it says.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from typing import Any

import runner.telemetry as telemetry
from runner.errors import ConfigError, ModelError, RunnerError
from runner.models.accumulate import ToolCallAccumulator, new_call_id
from runner.models.base import (
    Completed,
    ReasoningDelta,
    Reply,
    Request,
    StreamEvent,
    TextDelta,
    ToolCall,
    Usage,
)
from runner.models.faults import IncompleteStream, incomplete_stream, no_choices
from runner.models.litellm_errors import map_litellm_error
from runner.models.model_data import output_strategy
from runner.tools.threads import MODEL_THREADS

__all__ = ["LiteLLMModel", "MissingApiKey", "map_litellm_error", "supports_function_calling"]

_litellm: Any = None


class MissingApiKey(ConfigError):
    """The provider needs an API key and none is set: found before any request is sent (exit code 2)."""


def missing_api_key(model_id: str, litellm: Any) -> MissingApiKey | None:
    """The error for a model whose provider's key variable is unset, by litellm's own knowledge.

    Only API-key variables count (``*_API_KEY``): providers that find credentials elsewhere (AWS
    profiles, Google's application default credentials, a local Ollama) are never refused here.
    """
    try:
        missing = list(litellm.validate_environment(model=model_id).get("missing_keys") or ())
    except Exception:
        return None
    if not missing or not all(str(name).endswith("_API_KEY") for name in missing):
        return None
    provider = model_id.split("/")[0].upper()
    names = " or ".join(sorted(missing, key=lambda name: (not name.startswith(provider), name)))
    return MissingApiKey(
        f"no API key for {model_id}: set {names} (or use --replay, or a local api_base)",
        hint="or give model.api_key: ${YOUR_KEY_VARIABLE} in the agent file",
    )


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
        self._timeout_s = timeout_s
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
        # the key check runs once, before the first request (no key, no api_base: litellm's env vars)
        self._key_checked = bool(api_key or api_base)

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

    @property
    def structured_output(self) -> str:
        """How an agent with ``output:`` asks this model for its answer (``model_data.output_strategy``)."""
        return output_strategy(self.name, self.api_base)

    async def complete(self, request: Request) -> Reply:
        """Answer in one piece: litellm's blocking ``completion`` on a model worker thread.

        litellm's async path runs its success logging (a log payload the runner never reads, ~1 ms of
        CPU per call) as a task on the caller's event loop, where it lands between a reply and the
        tools it asked for; its sync path runs the same work on litellm's own threads, overlapping the
        next request. Cancelling abandons the call: the thread finishes it and the answer is dropped.
        Streaming stays on ``acompletion`` (chunks arrive on the loop; stopping early closes the stream).
        """
        litellm = self._litellm()
        try:
            response = await MODEL_THREADS.run(
                _quietly, litellm.completion, self._arguments(request, stream=False)
            )
        except Exception as exc:
            raise map_litellm_error(
                exc, self.name, timeout_s=self._timeout(request), api_base=self.api_base
            ) from exc
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
            response_id=_text_or_none(getattr(response, "id", None)),
        )

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        """Answer as a stream; tool calls are reported as soon as their arguments are complete."""
        litellm = self._litellm()
        accumulator = ToolCallAccumulator()
        text: list[str] = []
        reasoning: list[str] = []
        usage_data: Any = None
        finish_reason: str | None = None
        model = self.name
        response_id: str | None = None
        response: Any = None
        finished = False
        chunks = choices = 0  # chunks received; those that carried a choice
        quiet = _quiet()
        quiet.__enter__()
        try:
            response = await litellm.acompletion(**self._arguments(request, stream=True))
            async for chunk in response:
                chunks += 1
                usage_data = getattr(chunk, "usage", None) or usage_data
                model = chunk.model or model
                response_id = response_id or _text_or_none(getattr(chunk, "id", None))
                if not chunk.choices:
                    continue
                choices += 1
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
            error = map_litellm_error(
                exc,
                self.name,
                streaming=True,
                shown=bool(text or reasoning),
                in_tool_call=accumulator.has_open_call,
                timeout_s=self._timeout(request),
                api_base=self.api_base,
            )
            if isinstance(error, IncompleteStream) and chunks and not choices:
                error = no_choices(self.name)  # chunks came, none with a choice: ``choices: []`` only
            raise error from exc
        finally:
            quiet.__exit__(None, None, None)
            if response is not None and not finished:
                await _close_quietly(response)  # the consumer stopped early: release the connection
        empty = not (text or reasoning or accumulator.has_calls)
        if not choices and chunks:
            raise no_choices(self.name)
        if finish_reason is None or (empty and not _provider_finished(response)):
            raise incomplete_stream(
                self.name, shown=bool(text or reasoning), in_tool_call=accumulator.has_open_call
            )
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
                response_id=response_id,
            )
        )

    async def aclose(self) -> None:
        """Nothing to release: litellm keeps its own shared HTTP clients."""

    def prepare(self) -> None:
        """Import litellm now (seconds, once per process), so that no request's time pays for it."""
        _import_litellm(local_cost_map=self._local_cost_map)

    def _litellm(self) -> Any:
        """litellm, imported; before the first request, refuse a provider whose API key is unset."""
        litellm = _import_litellm(local_cost_map=self._local_cost_map)
        if not self._key_checked:
            error = missing_api_key(self.name, litellm)
            if error is not None:
                raise error
            self._key_checked = True
        return litellm

    def _timeout(self, request: Request) -> float:
        value = request.params.get("timeout", self._timeout_s)
        return float(value) if isinstance(value, (int, float)) else self._timeout_s

    def _arguments(self, request: Request, *, stream: bool) -> dict[str, Any]:
        arguments = {**self._fixed, **request.params, "messages": request.messages, "stream": stream}
        if request.tools:
            arguments["tools"] = request.tools
        if stream and "stream_options" not in arguments:
            arguments["stream_options"] = {"include_usage": True}
        if telemetry.enabled():  # the chat span's context, W3C traceparent
            arguments["extra_headers"] = dict(telemetry.inject({**(arguments.get("extra_headers") or {})}))
        return arguments

    def _usage(self, data: Any) -> Usage:
        if data is None:
            return Usage()
        prompt = getattr(data, "prompt_tokens", 0) or 0
        completion = getattr(data, "completion_tokens", 0) or 0
        total = getattr(data, "total_tokens", 0) or prompt + completion
        return Usage(prompt, completion, total, self._cost(prompt, completion), _cached_tokens(data))

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


def _provider_finished(response: Any) -> bool:
    """Whether the provider itself ended the stream with a finish reason.

    litellm's stream wrapper gives the last chunk ``finish_reason="stop"`` when the provider sent
    none (a stream cut cleanly, or whose first event was corrupted); the reasons it really received
    are kept on the wrapper. A wrapper without those attributes (another litellm) is believed.
    Only an empty answer is judged by them (``stream``): a stream cut after some text is caught by
    litellm itself on the OpenAI and Anthropic wires, and a provider handler that never fills those
    attributes must not turn every answer into an error.
    """
    fields = ("received_finish_reason", "intermittent_finish_reason", "received_any_finish_reason")
    if not all(hasattr(response, name) for name in fields):
        return True
    return any(getattr(response, name) for name in fields)


async def _close_quietly(response: Any) -> None:
    closer = getattr(response, "aclose", None)
    if closer is not None:
        with contextlib.suppress(Exception):
            await closer()


def _text_or_none(value: Any) -> str | None:
    """A provider's id field as text (None when it sent none, or not a string)."""
    return value if isinstance(value, str) and value else None


def _cached_tokens(usage: Any) -> int:
    """``usage.prompt_tokens_details.cached_tokens`` (litellm gives an object, or a dict), else 0."""
    details = getattr(usage, "prompt_tokens_details", None)
    cached = (
        details.get("cached_tokens") if isinstance(details, dict) else getattr(details, "cached_tokens", None)
    )
    return cached if isinstance(cached, int) and cached > 0 else 0
