"""What went wrong with a model call, said the way a user needs it: shared by both model paths.

- ``retry_after_s``: the wait a server asked for (``Retry-After`` in seconds or as an HTTP date,
  or ``retry-after-ms``), from response headers.
- ``provider_message``: the provider's own error message out of an error body (OpenAI, Anthropic
  and Gemini shapes), or out of a ``b'...'`` bytes repr another library put around it.
- ``clean``: one line without what is meant for programmers: object reprs (``<... object at
  0x...>``), "Handle with litellm.X", repeated "Original exception" text.
- ``IncompleteStream``: a stream that ended without a finish reason and without ``[DONE]``.

This module imports no HTTP library: headers are any mapping.
"""

from __future__ import annotations

import ast
import datetime as _dt
import email.utils
import json
import re
from collections.abc import Mapping
from typing import Any

from runner.errors import ModelError

__all__ = [
    "RETRYABLE_STATUS",
    "IncompleteStream",
    "clean",
    "incomplete_stream",
    "no_choices",
    "provider_message",
    "retry_after_s",
    "retryable_status",
]

#: Statuses worth retrying besides 5xx (529 "overloaded" is a 5xx).
RETRYABLE_STATUS = frozenset({408, 409, 425, 429})


def retryable_status(status: int | None) -> bool:
    """Whether an HTTP status is transient (408, 409, 425, 429, 5xx)."""
    return status is not None and (status in RETRYABLE_STATUS or status >= 500)


class IncompleteStream(ModelError):
    """The stream ended without a finish reason and without its end marker: the answer is cut short.

    Retryable: ``ResilientModel`` asks again when nothing of the answer was shown yet; once some
    was shown the error ends the turn, and the partial answer is not added to the history.
    """


def incomplete_stream(model: str, *, shown: bool, in_tool_call: bool) -> IncompleteStream:
    """The error for a stream that stopped early (``shown``: some text already reached the user)."""
    where = " inside a tool call's arguments" if in_tool_call else ""
    kept = "; the partial answer was not kept" if shown else ""
    return IncompleteStream(
        f"{model}: the answer stopped before its end{where} (the stream closed without a finish "
        f"reason){kept}",
        hint="the server or a proxy cut the stream; try again",
        retryable=True,
    )


def no_choices(model: str) -> ModelError:
    """The error for a stream whose chunks all had ``choices: []``: no answer, as a whole answer
    without ``choices[0]`` is (not retried: the server answered, with nothing)."""
    return ModelError(
        f"{model}: the server's answer has no choices (its stream sent only chunks with `choices: []`)",
        hint="check model.id, and the server's log for why it answered nothing",
    )


def retry_after_s(headers: Mapping[str, str] | None, *, now: _dt.datetime | None = None) -> float | None:
    """The seconds ``headers`` ask a client to wait, or None (absent or unreadable)."""
    if not headers:
        return None
    lowered = {str(key).lower(): str(value) for key, value in headers.items()}
    millis = lowered.get("retry-after-ms")
    if millis is not None:
        try:
            value = float(millis) / 1000.0
        except ValueError:
            value = -1.0
        if value >= 0:
            return value
    text = lowered.get("retry-after", "").strip()
    if not text:
        return None
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        return seconds if seconds >= 0 else None
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=_dt.UTC)
    current = now or _dt.datetime.now(_dt.UTC)
    return max(0.0, (when - current).total_seconds())


def provider_message(body: Any) -> str | None:
    """The ``message`` of an error body (a dict, JSON text, or bytes), or None when it has none."""
    if isinstance(body, (bytes, bytearray)):
        body = bytes(body).decode("utf-8", errors="replace")
    if isinstance(body, str):
        try:
            body = json.loads(body)
        except ValueError:
            return None
    if isinstance(body, list) and body:
        body = body[0]  # Gemini sometimes answers with a list of one error
    if not isinstance(body, dict):
        return None
    error = body.get("error", body)
    if isinstance(error, str):
        return error.strip() or None
    if isinstance(error, dict):
        for key in ("message", "detail", "msg"):
            value = error.get(key)
            if isinstance(value, str) and value.strip():
                return value.strip()
    detail = body.get("detail") or body.get("message")
    return detail.strip() if isinstance(detail, str) and detail.strip() else None


_OBJECT_REPR = re.compile(r"<([\w.]+) object at 0x[0-9a-fA-F]+>")
_HANDLE_WITH = re.compile(r"\.?\s*Handle with `?litellm\.\w+`?\.?", re.IGNORECASE)
_ORIGINAL = re.compile(r"\s*Original exception:.*$", re.DOTALL)
_LITELLM_PREFIXES = re.compile(
    r"^(?:\s*(?:litellm\.\w+:|\w+Error:|\w+Exception\s*-|\w+Error\s*-)\s*)+", re.IGNORECASE
)
_BYTES_REPR = re.compile(r"""b(['"])(.*)\1""", re.DOTALL)
_DEBUG_BANNER = re.compile(r"(Give Feedback / Get Help|LiteLLM\.Info|Provider List):.*", re.IGNORECASE)


def clean(text: str, *, limit: int = 400) -> str:
    """``text`` as one readable line: no object reprs, no library advice, no repeats, no bytes repr."""
    text = _ORIGINAL.sub("", text)
    text = _DEBUG_BANNER.sub("", text)
    text = _HANDLE_WITH.sub("", text)
    text = _LITELLM_PREFIXES.sub("", text.strip())
    match = _BYTES_REPR.search(text)
    if match:
        try:
            raw = ast.literal_eval(match.group(0))
        except (ValueError, SyntaxError):
            raw = None
        message = provider_message(raw) if isinstance(raw, bytes) else None
        if message is None and isinstance(raw, bytes):
            message = raw.decode("utf-8", errors="replace")
        if message is not None:
            text = text[: match.start()] + message + text[match.end() :]
    text = _OBJECT_REPR.sub(lambda m: m.group(1).rsplit(".", 1)[-1], text)
    text = " ".join(text.split())
    text = text.lstrip(" .:-").rstrip(" :-")
    if len(text) > limit:
        text = text[: limit - 1].rstrip() + "…"
    return text
