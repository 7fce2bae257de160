"""A request body, from bytes to the history a session restores, bounded whatever the client sends.

Runs off the event loop (``app.py`` calls it in a worker thread): a 4 MB body takes a fraction of
a second, and other clients (``/health`` included) are answered meanwhile. What it guarantees:

- the text is valid Unicode: bytes that are not UTF-8 and lone surrogates (``"\\udcff"``, which
  JSON allows as an escape) become U+FFFD, so nothing downstream (the transcript, the model
  request, the answer) fails to encode them;
- nesting deeper than ``MAX_DEPTH`` is a 400 (it never reaches a recursive encoder or validator,
  and a body nested past the interpreter's limit is a 400, not a ``RecursionError``);
- a conversation of more than ``max_messages`` messages, counted after the tool blocks of earlier
  answers are turned back into messages, is a 413: with the body limit, this bounds what one
  request can make the server write (its transcript) and hold.
"""

from __future__ import annotations

import json
import re
from typing import Any

from runner.serve.history import ChatHistory, parse_conversation
from runner.serve.protocol import ApiError, ChatRequest, parse_chat_request
from runner.text import valid_text

__all__ = ["DEFAULT_MAX_MESSAGES", "MAX_DEPTH", "decode_json", "read_chat"]

#: How deeply arrays and objects may nest in a body (tool schemas rarely pass ten).
MAX_DEPTH = 100
DEFAULT_MAX_MESSAGES = 5000

_SURROGATE = re.compile("[\ud800-\udfff]")  # a key to mend (``valid_text`` mends it)
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _too_deep() -> ApiError:
    return ApiError(
        400, f"the request body nests arrays and objects deeper than {MAX_DEPTH} levels", code="invalid_json"
    )


def _mend(value: Any, *, fix_text: bool) -> Any:
    """Check the nesting depth of ``value`` and (``fix_text``) make its strings valid, without recursion."""
    if fix_text and isinstance(value, str):
        return valid_text(value)
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise _too_deep()
        if isinstance(node, list):
            for index, item in enumerate(node):
                if isinstance(item, list | dict):
                    stack.append((item, depth + 1))
                elif fix_text and isinstance(item, str):
                    node[index] = valid_text(item)
        elif isinstance(node, dict):
            if fix_text and any(_SURROGATE.search(key) for key in node):
                items = [(valid_text(key), item) for key, item in node.items()]
                node.clear()
                node.update(items)
            for key, item in node.items():
                if isinstance(item, list | dict):
                    stack.append((item, depth + 1))
                elif fix_text and isinstance(item, str):
                    node[key] = valid_text(item)
    return value


def decode_json(raw: bytes) -> Any:
    """The body's JSON value, valid text and bounded depth; ``ApiError`` 400 otherwise."""
    text = raw.decode("utf-8", errors="replace")
    try:
        value = json.loads(text)
    except RecursionError:
        raise _too_deep() from None
    except ValueError as exc:
        raise ApiError(400, f"the request body is not valid JSON: {exc}", code="invalid_json") from None
    return _mend(value, fix_text=_SURROGATE_ESCAPE.search(raw) is not None)


def _too_many(count: int, limit: int) -> ApiError:
    return ApiError(
        413,
        f"the conversation has {count} messages; this server takes at most {limit} "
        "(RUNNER_SERVE_MAX_MESSAGES)",
        param="messages",
        code="too_many_messages",
    )


def read_chat(raw: bytes, *, max_messages: int = DEFAULT_MAX_MESSAGES) -> tuple[ChatRequest, ChatHistory]:
    """The validated request and its conversation as history (``ApiError`` 400 or 413)."""
    chat = parse_chat_request(decode_json(raw))
    if len(chat.messages) > max_messages:
        raise _too_many(len(chat.messages), max_messages)
    return chat, parse_conversation(chat.messages, max_messages=max_messages)
