"""litellm's exceptions as ``ModelError``s that say what happened, in one place.

litellm wraps what went wrong several times (a provider's HTTP error in its own class, a dropped
stream in ``MidStreamFallbackError`` that repeats the text as "Original exception"), invents a
status where there was none (``HTTP 500`` for a reset connection, ``500`` for Anthropic's ``529``)
and adds advice for its programmers ("Handle with litellm.InternalServerError"). Here the chain
is walked to the original: the HTTP response the server really sent (its status, its own error
message, its ``Retry-After``), or else the transport failure, told in words. This module does not
import litellm; it reads classes by name and attributes, so it works on any litellm version.
"""

from __future__ import annotations

import re
from typing import Any

from runner.errors import ModelError
from runner.models.base import StreamingUnsupported, says_streaming_unsupported
from runner.models.faults import (
    clean,
    incomplete_stream,
    provider_message,
    retry_after_s,
    retryable_status,
)

__all__ = ["map_litellm_error"]

_RETRYABLE = frozenset(
    {
        "RateLimitError",
        "InternalServerError",
        "ServiceUnavailableError",
        "BadGatewayError",
        "APIConnectionError",
    }
)
_REFUSED = frozenset({"ConnectError", "ClientConnectorError", "ConnectionRefusedError"})
_CONNECTION = frozenset(
    {
        "APIConnectionError",
        "ConnectionError",
        "RemoteProtocolError",
        "ReadError",
        "WriteError",
        "ServerDisconnectedError",
        "ClientPayloadError",
        "ClientOSError",
        "ClientConnectionError",
        "TransferEncodingError",
        "IncompleteRead",
        "ConnectionResetError",
    }
)
_TIMEOUT = frozenset({"Timeout", "APITimeoutError", "TimeoutException", "TimeoutError"})
_HTTP_ERRORS = frozenset({"HTTPStatusError", "APIStatusError"})
_ADDRESS = re.compile(r"\s*\(['\"][^'\"]*['\"],\s*\d+(,[^)]*)?\)")  # ('127.0.0.1', 8000) in an OS error
_STREAM_CUT = "Stream ended before a finish_reason"
_HINTS = {
    "AuthenticationError": "check model.api_key (or the provider's usual API key variable)",
    "PermissionDeniedError": "check model.api_key (or the provider's usual API key variable)",
    "NotFoundError": "check model.id and model.api_base",
    "ContextWindowExceededError": "the conversation is too long for the model; set limits.context_tokens",
}
_STATUS_HINTS = {
    401: _HINTS["AuthenticationError"],
    403: _HINTS["AuthenticationError"],
    404: _HINTS["NotFoundError"],
}


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and what it wraps (``original_exception``, causes, contexts), outermost first."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not other for other in seen) and len(seen) < 12:
        seen.append(current)
        original = getattr(current, "original_exception", None)
        current = (
            original if isinstance(original, BaseException) else current.__cause__ or current.__context__
        )
    return seen


def _names(chain: list[BaseException]) -> set[str]:
    return {cls.__name__ for error in chain for cls in type(error).__mro__}


def _http_response(chain: list[BaseException]) -> Any:
    """The HTTP response a server really sent, from the innermost HTTP status error; None if none.

    litellm's own exceptions derive from the openai SDK's ``APIStatusError`` and carry made-up
    responses (a ``500`` for a reset connection): only httpx's and the provider SDKs' count.
    """
    for error in reversed(chain):
        if type(error).__module__.startswith("litellm"):
            continue
        if _HTTP_ERRORS & {cls.__name__ for cls in type(error).__mro__}:
            response = getattr(error, "response", None)
            if isinstance(getattr(response, "status_code", None), int):
                return response
    return None


def _request_url(chain: list[BaseException]) -> str | None:
    """The URL of the request that failed, from the first error of the chain that carries it."""
    for error in chain:
        try:
            request = getattr(error, "request", None)  # httpx raises RuntimeError when it has none
        except RuntimeError:
            continue
        url = getattr(request, "url", None)
        if url is not None:
            text = str(url)
            return text.removesuffix("/chat/completions")
    return None


def _refusal(chain: list[BaseException]) -> str:
    """``: <why>`` from the innermost connection error (the operating system's words), or nothing."""
    for error in reversed(chain):
        if _REFUSED & {cls.__name__ for cls in type(error).__mro__} or isinstance(error, OSError):
            text = _ADDRESS.sub("", clean(str(error)))  # the URL says where; serve hides it
            if text and "litellm" not in text.lower():
                return f": {text}"
    return ""


def _body_message(response: Any) -> str | None:
    try:
        content = response.content  # a streamed response that was never read raises here
    except Exception:
        return None
    return provider_message(content)


def map_litellm_error(
    exc: BaseException,
    model: str,
    *,
    streaming: bool = False,
    shown: bool = False,
    in_tool_call: bool = False,
    timeout_s: float | None = None,
    api_base: str | None = None,
) -> ModelError:
    """Turn any exception raised by litellm into a ``ModelError`` (retryable for 429, 5xx, network).

    ``shown`` says whether some of a streamed answer already reached the user (a dropped stream is
    then "dropped in the middle of the answer"). A refused connection names ``api_base`` (else the
    URL the request went to), as the fast path does.
    """
    if isinstance(exc, ModelError):
        return exc
    chain = _chain(exc)
    names = _names(chain)
    texts = " ".join(str(error) for error in chain)
    if names & _TIMEOUT:
        within = f" within {timeout_s:g} s" if timeout_s else ""
        return ModelError(
            f"{model}: no answer{within} (timed out)",
            retryable=True,
            hint="raise model.timeout_s if the model is slow",
        )
    if _STREAM_CUT in texts:
        return incomplete_stream(model, shown=shown, in_tool_call=in_tool_call)
    response = _http_response(chain)
    if response is not None:
        return _status_error(exc, model, response, names, streaming=streaming)
    if "JSONDecodeError" in names:
        return ModelError(
            f"{model}: the server sent a stream event that is not valid JSON",
            retryable=True,
            hint="the server or a proxy corrupted the stream; try again",
        )
    if names & _REFUSED:
        where = api_base or _request_url(chain) or "the model's endpoint"
        return ModelError(
            f"{model}: cannot connect to {where}{_refusal(chain)}",
            retryable=True,
            hint="is the server running?" if api_base else "is the model's endpoint reachable?",
        )
    if names & _CONNECTION:
        what = "dropped in the middle of the answer" if shown else "was closed before an answer arrived"
        return ModelError(
            f"{model}: the connection to the server {what}",
            retryable=True,
            hint="the server or a proxy closed it; try again",
        )
    detail = clean(str(exc)) or type(exc).__name__
    hint = next((_HINTS[name] for name in _HINTS if name in names), None)
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and 400 <= status < 600:
        # No HTTP error below it, no transport failure either: a provider SDK litellm does not chain
        # (its status is the provider's), so say it as litellm did, without litellm's wrapping.
        if streaming and status in (400, 404, 422, 501) and says_streaming_unsupported(detail):
            return StreamingUnsupported(f"{model}: HTTP {status}: {detail}", status=status)
        return ModelError(
            f"{model}: HTTP {status}: {detail}",
            status=status,
            retryable=bool(names & _RETRYABLE) or retryable_status(status),
            hint=hint or _STATUS_HINTS.get(status),
        )
    return ModelError(f"{model}: {detail}", retryable=bool(names & _RETRYABLE), hint=hint)


def _status_error(
    exc: BaseException, model: str, response: Any, names: set[str], *, streaming: bool
) -> ModelError:
    status: int = response.status_code
    detail = _body_message(response) or clean(str(exc))
    message = f"{model}: HTTP {status}: {clean(detail)}" if detail else f"{model}: HTTP {status}"
    if streaming and status in (400, 404, 422, 501) and says_streaming_unsupported(detail):
        return StreamingUnsupported(message, status=status)
    hint = next((_HINTS[name] for name in _HINTS if name in names), None) or _STATUS_HINTS.get(status)
    headers = getattr(response, "headers", None)
    return ModelError(
        message,
        status=status,
        retryable=retryable_status(status),
        hint=hint,
        retry_after=retry_after_s(headers) if headers is not None else None,
    )
