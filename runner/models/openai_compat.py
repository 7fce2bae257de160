"""A thin chat-completions client on httpx for OpenAI-compatible endpoints (the fast path).

Ollama, vLLM, llama.cpp server and LM Studio are reached as ``openai/<name>`` with an ``api_base``.
Talking to them directly keeps litellm's multi-second import off ``runner run`` (SPEC section 14);
this module must never import litellm. It is held to the same test suite as ``LiteLLMModel``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, cast

import httpx

import runner.telemetry as telemetry
from runner.errors import ModelError
from runner.models.accumulate import ToolCallAccumulator, new_call_id
from runner.models.base import (
    Completed,
    EncodedRun,
    ReasoningDelta,
    Reply,
    Request,
    StreamEvent,
    StreamingUnsupported,
    TextDelta,
    ToolCall,
    Usage,
    events_of,
    says_streaming_unsupported,
)
from runner.models.client_pools import ClientPools
from runner.models.faults import (
    clean,
    incomplete_stream,
    no_choices,
    provider_message,
    retry_after_s,
    retryable_status,
)
from runner.models.prices import cost_usd
from runner.tls import tls_context

__all__ = ["OpenAICompatModel"]

# litellm-only parameters that an OpenAI-compatible server would reject.
_LITELLM_ONLY = frozenset({"drop_params", "num_retries", "max_retries", "caching", "custom_llm_provider"})
_TIMEOUT_HINT = "raise model.timeout_s if the model is slow"
#: How long an idle kept-alive connection stays in the pool (httpx's default; a seam for tests).
KEEPALIVE_S = 5.0


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def spliced_body(body: dict[str, Any], run: EncodedRun) -> str:
    """``json.dumps`` of ``body`` (compact, ``ensure_ascii=False``) with the messages of ``run``
    taken from its text, not encoded again: the same JSON (``run.holds`` checked by the caller)."""
    messages = body["messages"]
    end = run.start + len(run.originals)
    # the model's name comes first and is a JSON string: the key below cannot occur in it
    head, tail = _dumps({**body, "messages": []}).split('"messages":[]', 1)
    pieces = [_dumps(messages[: run.start])[1:-1], run.text, _dumps(messages[end:])[1:-1]]
    return head + '"messages":[' + ",".join(p for p in pieces if p) + "]" + tail


class OpenAICompatModel:
    """``POST {api_base}/chat/completions`` over keep-alive ``httpx.AsyncClient``s (``ClientPools``)."""

    supports_tools: bool | None = True  # the server decides; SPEC section 8 counts it as native
    #: A request's messages are only encoded, never changed (``Runtime.shares_messages``).
    keeps_messages = True
    #: ``output:`` goes as ``response_format`` beside the tools; a server that refuses it gets the
    #: final-answer tool instead (``runner.modes.structured``).
    structured_output = "response_format"

    def __init__(
        self,
        model_id: str,
        *,
        api_base: str,
        api_key: str | None = None,
        timeout_s: float = 120.0,
        headers: Mapping[str, str] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.name = model_id
        self.api_base = api_base.rstrip("/")
        self._wire_model = model_id.removeprefix("openai/")
        self._url = self.api_base + "/chat/completions"
        self._timeout_s = timeout_s
        self._headers = {"content-type": "application/json", **(headers or {})}
        if api_key:
            self._headers["authorization"] = f"Bearer {api_key}"
        self._transport = transport  # a seam for tests (httpx.MockTransport)
        self._pools: ClientPools | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        return f"OpenAICompatModel({self.name!r}, api_base={self.api_base!r})"

    async def complete(self, request: Request) -> Reply:
        """Answer in one piece (``stream: false``)."""
        body, timeout, headers = self._prepare(request, stream=False)
        pools = self._http()
        index, client = pools.take()
        try:
            async with client.stream(
                "POST", self._url, content=body, headers=headers, timeout=timeout
            ) as response:
                _release_on_close(response)
                await response.aread()
                if response.status_code >= 400:
                    raise self._status_error(response, streaming=False)
                data = response.json()
        except httpx.HTTPError as exc:
            raise self._transport_error(exc, timeout, answered=False) from exc
        except ValueError as exc:
            raise ModelError(f"{self.name}: the server answered invalid JSON: {exc}") from exc
        finally:
            pools.give(index)
        return self._reply_from_completion(data)

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        """Answer as server-sent events; tool calls are reported as soon as their arguments are complete."""
        body, timeout, headers = self._prepare(request, stream=True)
        answer = _StreamedAnswer(self._wire_model)
        end = _StreamEnd()
        pools = self._http()
        index, client = pools.take()
        try:
            async with client.stream(
                "POST", self._url, content=body, headers=headers, timeout=timeout
            ) as response:
                _release_on_close(response)
                if response.status_code >= 400:
                    await response.aread()
                    raise self._status_error(response, streaming=True)
                if response.headers.get("content-type", "").startswith("application/json"):
                    # The server ignored ``stream: true`` and answered in one piece.
                    await response.aread()
                    for event in events_of(self._reply_from_completion(response.json())):
                        yield event
                    return
                async with contextlib.aclosing(_sse_data(response, end)) as datas:
                    async for data in datas:
                        chunk = self._parse_chunk(data)
                        if chunk.get("usage"):
                            answer.usage = self._usage(chunk["usage"])
                        for event in answer.feed(chunk):
                            yield event
        except httpx.HTTPError as exc:
            raise self._transport_error(exc, timeout, answered=end.data) from exc
        except ValueError as exc:
            raise ModelError(f"{self.name}: the server answered invalid JSON: {exc}") from exc
        finally:
            pools.give(index)
        if answer.finish_reason is None and not end.done:
            raise incomplete_stream(self.name, shown=answer.shown, in_tool_call=answer.calls.has_open_call)
        if not answer.choices:
            raise no_choices(self.name)
        for ready in answer.calls.finish_events():
            yield ready
        yield Completed(answer.reply())

    async def aclose(self) -> None:
        """Close the HTTP clients (if they belong to the running event loop)."""
        pools, self._pools = self._pools, None
        if pools is not None and self._loop is _running_loop():
            await pools.aclose()

    def _http(self) -> ClientPools:
        loop = asyncio.get_running_loop()
        if self._pools is None or self._loop is not loop:
            # Pooled connections belong to the loop that opened them: a new loop needs new clients.
            self._pools = ClientPools(self._new_client, idle_s=KEEPALIVE_S)
            self._loop = loop
        return self._pools

    def _new_client(self, pools: int) -> httpx.AsyncClient:
        """One of ``pools`` clients: 256 connections shared out among them, up to 128 kept alive (one
        client: 64, as before the pools; four: 32 each, so 64 streams spread over them stay alive)."""
        return httpx.AsyncClient(
            timeout=httpx.Timeout(self._timeout_s, connect=min(self._timeout_s, 10.0)),
            limits=httpx.Limits(
                max_connections=256 // pools,
                max_keepalive_connections=max(16, min(64, 128 // pools)),
                keepalive_expiry=KEEPALIVE_S,
            ),
            transport=self._transport,
            # An http:// endpoint never does TLS (redirects are not followed): no CA bundle to load.
            verify=tls_context() if self._url.startswith("https:") else False,
        )

    def _prepare(self, request: Request, *, stream: bool) -> tuple[bytes, Any, dict[str, str]]:
        body: dict[str, Any] = {"model": self._wire_model, "messages": request.messages}
        if request.tools:
            body["tools"] = request.tools
        timeout: Any = httpx.USE_CLIENT_DEFAULT
        headers = self._headers
        for key, value in request.params.items():
            if key == "timeout":
                timeout = value
            elif key == "extra_headers":
                headers = {**headers, **value}
            elif key == "extra_body":
                body.update(value)
            elif value is not None and key not in _LITELLM_ONLY:
                body[key] = value
        body["stream"] = stream
        if stream:
            body.setdefault("stream_options", {"include_usage": True})
        if telemetry.enabled():  # the chat span's context, W3C traceparent
            headers = dict(telemetry.inject({**headers}))
        run = request.encoded
        if run is not None and body["messages"] is request.messages and run.holds(request.messages):
            return spliced_body(body, run).encode(), timeout, headers
        return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode(), timeout, headers

    def _parse_chunk(self, data: bytes) -> dict[str, Any]:
        try:
            chunk = json.loads(data)
        except ValueError:
            chunk = None
        if not isinstance(chunk, dict):
            shown = data[:200].decode(errors="replace")
            # A corrupted stream is a transport fault: retried when nothing of it was shown yet.
            raise ModelError(
                f"{self.name}: the server sent a stream chunk that is not JSON: {shown!r}", retryable=True
            )
        error = chunk.get("error")
        if error:
            message, status = _error_fields(error)
            raise ModelError(f"{self.name}: {clean(message)}", retryable=retryable_status(status))
        return chunk

    def _reply_from_completion(self, data: dict[str, Any]) -> Reply:
        try:
            choice = data["choices"][0]
            message = choice["message"]
        except (KeyError, IndexError, TypeError) as exc:
            raise ModelError(f"{self.name}: the server's answer has no choices[0].message") from exc
        calls = tuple(
            ToolCall(
                id=call.get("id") or new_call_id(),
                name=(call.get("function") or {}).get("name") or "",
                arguments=_arguments_text((call.get("function") or {}).get("arguments")),
            )
            for call in message.get("tool_calls") or ()
        )
        return Reply(
            content=message.get("content"),
            tool_calls=calls,
            reasoning=message.get("reasoning_content") or message.get("reasoning"),
            usage=self._usage(data.get("usage") or {}),
            finish_reason=choice.get("finish_reason"),
            model=data.get("model") or self._wire_model,
            response_id=_text_or_none(data.get("id")),
        )

    def _usage(self, data: Mapping[str, Any]) -> Usage:
        """Tokens as the server counted them, priced from litellm's price data when it knows the model."""
        prompt = data.get("prompt_tokens") or 0
        completion = data.get("completion_tokens") or 0
        total = data.get("total_tokens") or prompt + completion
        details = data.get("prompt_tokens_details")
        cached = details.get("cached_tokens") if isinstance(details, Mapping) else None
        cached = cached if isinstance(cached, int) and cached > 0 else 0
        return Usage(prompt, completion, total, cost_usd(self.name, prompt, completion), cached)

    def _status_error(self, response: httpx.Response, *, streaming: bool) -> ModelError:
        """The server's status and its own message, once (the URL stays out: the user knows it)."""
        status = response.status_code
        message = provider_message(response.content) or clean(response.text) or response.reason_phrase
        text = f"{self.name}: HTTP {status}: {clean(message)}" if message else f"{self.name}: HTTP {status}"
        if streaming and status in (400, 404, 422, 501) and says_streaming_unsupported(message):
            return StreamingUnsupported(text, status=status)
        hint = "check model.api_key" if status in (401, 403) else None
        return ModelError(
            text,
            status=status,
            retryable=retryable_status(status),
            hint=hint,
            retry_after=retry_after_s(response.headers),
        )

    def _transport_error(self, exc: httpx.HTTPError, timeout: Any, *, answered: bool) -> ModelError:
        """What happened on the connection, in words (no status: the server sent none)."""
        if isinstance(exc, httpx.TimeoutException):
            seconds = timeout if isinstance(timeout, (int, float)) else self._timeout_s
            return ModelError(
                f"{self.name}: no answer within {seconds:g} s (timed out)", retryable=True, hint=_TIMEOUT_HINT
            )
        if isinstance(exc, httpx.UnsupportedProtocol):
            return ModelError(f"{self.name}: bad api_base {self.api_base!r}: {clean(str(exc))}")
        if isinstance(exc, httpx.ConnectError):
            return ModelError(
                f"{self.name}: cannot connect to {self.api_base}: {clean(str(exc)) or type(exc).__name__}",
                retryable=True,
                hint="is the server running?",
            )
        if isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)):
            what = (
                "dropped in the middle of the answer" if answered else "was closed before an answer arrived"
            )
            return ModelError(
                f"{self.name}: the connection to the server {what}",
                retryable=True,
                hint="the server or a proxy closed it; try again",
            )
        return ModelError(f"{self.name}: {clean(str(exc)) or type(exc).__name__}", retryable=True)


#: How long the end of a body may take after ``[DONE]`` before its connection is given up.
_DRAIN_S = 0.25


@dataclass
class _StreamEnd:
    """How far a stream got: whether data arrived, and whether its ``[DONE]`` did."""

    data: bool = False
    done: bool = False


class _StreamedAnswer:
    """What the chunks of a streamed answer said so far; ``feed`` gives the events of one chunk."""

    __slots__ = ("calls", "choices", "finish_reason", "model", "reasoning", "response_id", "text", "usage")

    def __init__(self, model: str) -> None:
        self.calls = ToolCallAccumulator()
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.usage = Usage()
        self.finish_reason: str | None = None
        self.model = model
        self.response_id: str | None = None
        self.choices = 0  # chunks that carried a choice

    @property
    def shown(self) -> bool:
        """Whether some of the answer (text or reasoning) reached the user."""
        return bool(self.text or self.reasoning)

    def feed(self, chunk: dict[str, Any]) -> list[StreamEvent]:
        """The events ``chunk`` adds (its usage is read by the caller)."""
        self.model = chunk.get("model") or self.model
        if self.response_id is None:
            self.response_id = _text_or_none(chunk.get("id"))
        choices = chunk.get("choices")
        if not choices:
            return []
        self.choices += 1
        choice = choices[0]
        delta = choice.get("delta") or {}
        events: list[StreamEvent] = []
        thought = delta.get("reasoning_content") or delta.get("reasoning")
        if thought:
            self.reasoning.append(thought)
            events.append(ReasoningDelta(thought))
        content = delta.get("content")
        if content:
            self.text.append(content)
            events.append(TextDelta(content))
        for item in delta.get("tool_calls") or ():
            events.extend(self.calls.feed_events(item))
        if choice.get("finish_reason"):
            self.finish_reason = choice["finish_reason"]
        return events

    def reply(self) -> Reply:
        """The assembled answer."""
        return Reply(
            content="".join(self.text) or None,
            tool_calls=self.calls.calls,
            reasoning="".join(self.reasoning) or None,
            usage=self.usage,
            finish_reason=self.finish_reason,
            model=self.model,
            response_id=self.response_id,
        )


def _release_on_close(response: httpx.Response) -> None:
    """Make closing ``response`` finish even when the task that closes it is cancelled.

    httpcore gives a connection back to its pool in ``_response_closed``, after an anyio checkpoint
    that shields only from anyio's own cancellation. A plain ``Task.cancel()`` landing there (a
    ``serve`` client that went away, Ctrl+C, a timeout) stopped it half-way: the connection stayed
    ``ACTIVE`` in the pool for good, holding its socket, until the pool's limit was reached and every
    request waited for a connection that never came (issue 23). The close now runs in a task of its
    own, which a cancellation of the caller does not stop.
    """
    response.stream = _ReleasedStream(response.stream)


class _ReleasedStream(httpx.AsyncByteStream):
    """A response body whose ``aclose`` runs to its end in its own task (``_release_on_close``)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._inner.__aiter__()

    async def aclose(self) -> None:
        await asyncio.shield(self._inner.aclose())


async def _sse_data(response: httpx.Response, end: _StreamEnd) -> AsyncGenerator[bytes, None]:
    """The ``data:`` payloads of a server-sent event stream, up to ``[DONE]`` (noted in ``end``).

    Lines are split from the raw bytes (cheaper than decoding text line by line; JSON parses from
    UTF-8 bytes). What follows ``[DONE]`` (normally only the body's end) is read too, so the
    connection can be reused: a response closed before its end takes its connection with it. A
    server that keeps the stream open after ``[DONE]`` costs at most ``_DRAIN_S``.
    """
    body = cast(AsyncGenerator[bytes, None], response.aiter_bytes())  # an async generator
    async with contextlib.aclosing(body) as chunks:
        pending = b""
        async for block in chunks:
            end.data = True
            *lines, pending = (pending + block).split(b"\n")
            for line in lines:
                if not line.startswith(b"data:"):
                    continue
                data = line[5:].strip()
                if data == b"[DONE]":
                    end.done = True
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(_DRAIN_S):
                            async for _ in chunks:
                                pass
                    return
                yield data
    tail = pending.strip()
    if tail.startswith(b"data:"):
        if tail[5:].strip() == b"[DONE]":
            end.done = True
        else:
            yield tail[5:].strip()


def _arguments_text(arguments: Any) -> str:
    if arguments is None or arguments == "":
        return "{}"
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def _error_fields(error: Any) -> tuple[str, int | None]:
    if isinstance(error, dict):
        message = error.get("message") or error.get("detail") or json.dumps(error)[:300]
        code = error.get("code")
        return str(message), code if isinstance(code, int) else None
    return str(error), None


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _text_or_none(value: Any) -> str | None:
    """A provider's id field as text (None when it sent none, or not a string)."""
    return value if isinstance(value, str) and value else None
