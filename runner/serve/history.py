"""The request's messages as the history a session restores (the OpenAI API is stateless).

- The agent's system prompt always comes first, rendered with the conversation's first user text
  as ``input`` in every request, as one session would have it. A client's ``system`` or
  ``developer`` message stays where the client put it, as a ``system`` message: the usual leading
  one therefore comes right after the agent's own prompt (SPEC section 11), and never replaces it.
- Earlier user messages are wrapped in the agent's user template again, as they were when they
  were first sent, so the model sees the same history (and the provider's prompt cache hits).
- An assistant message whose content holds ``<details type="tool_calls">`` blocks (earlier answers
  of this server) becomes what the model really produced: assistant messages with tool calls, each
  followed by its tool result (unescaped). Calls the message carries in ``tool_calls`` (client
  tools) join the calls of its last step, and the client's ``role: tool`` messages answer them.
- Every call ends up with exactly one result right after its message, in call order; a call the
  client left unanswered is answered "Not executed".
- The last message is the new turn's input: a user message's text (run with the user template),
  or, when the conversation ends with tool results (or a user message with images), nothing: the
  session continues the history as it is.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from runner.serve.details import ToolBlock, split_content
from runner.serve.protocol import ApiError

__all__ = ["ChatHistory", "parse_conversation", "too_many"]

UNANSWERED = "Not executed: the client sent no result for this call."

_serial = itertools.count(1)


@dataclass
class ChatHistory:
    """The history to restore (user texts still to wrap) and the input of the new turn."""

    items: list[tuple[dict[str, Any], bool]] = field(default_factory=list)
    text: str | None = None
    #: The conversation's first user text: the ``input`` its system prompt is rendered with.
    first_input: str = ""
    #: The tool name of each call id, for the tool results' transcript records.
    names: dict[str, str] = field(default_factory=dict)
    #: User texts as the user template rendered them, by text (a stored conversation's, kept so a
    #: continuation does not render its whole history again), for the agent file of ``rendered_key``.
    rendered: dict[str, dict[str, Any]] = field(default_factory=dict)
    rendered_key: str | None = None

    def history(
        self, wrap_user: Callable[[str], dict[str, Any]], *, key: str | None = None
    ) -> list[dict[str, Any]]:
        """The messages, with each plain user text passed through ``wrap_user`` (the user template);
        ``key`` names the agent file's version: renders kept for another are not used."""
        if key is None or key != self.rendered_key:
            self.rendered, self.rendered_key = {}, key
        rendered = self.rendered
        out = []
        for message, wrap in self.items:
            if wrap:
                text = message["content"]
                done = rendered.get(text)
                if done is None:
                    done = rendered[text] = wrap_user(text)
                message = dict(done)
            out.append(message)
        return out


def _text_of(content: Any) -> str | None:
    """The text of a content value; None when it holds parts other than text (images, audio)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    texts = []
    for part in content:
        if part.get("type") != "text":
            return None
        texts.append(part.get("text", ""))
    return "".join(texts)


def _loose_text(content: Any) -> str:
    """The text parts of a content value, whatever else it holds."""
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content or () if p.get("type") == "text")


def _call_from_block(block: ToolBlock) -> dict[str, Any]:
    call_id = block.call_id or f"call_{uuid.uuid4().hex[:12]}_{next(_serial)}"
    return {"id": call_id, "type": "function", "function": {"name": block.name, "arguments": block.arguments}}


def _assistant(
    message: dict[str, Any], names: dict[str, str], max_blocks: int | None
) -> list[dict[str, Any]]:
    """One assistant message of the request as the steps that produced it (up to ``max_blocks`` + 1 calls)."""
    whole = _loose_text(message.get("content"))
    if not message.get("tool_calls") and "<details" not in whole:  # most answers: no steps to read
        return [{"role": "assistant", "content": whole.strip()}]
    out: list[dict[str, Any]] = []
    text: list[str] = []
    calls: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []

    def flush(final: bool) -> None:
        content = "".join(text).strip()
        if calls:
            out.append({"role": "assistant", "content": content or None, "tool_calls": list(calls)})
            out.extend(results)
        elif content or (final and not out):
            out.append({"role": "assistant", "content": content})
        text.clear()
        calls.clear()
        results.clear()

    for part in split_content(whole, max_blocks=max_blocks):
        if isinstance(part, str):
            if calls:
                flush(False)
            text.append(part)
            continue
        call = _call_from_block(part)
        names[call["id"]] = part.name
        calls.append(call)
        results.append({"role": "tool", "tool_call_id": call["id"], "content": part.result})
    for call in message.get("tool_calls") or ():
        function = call["function"]
        names[call["id"]] = function["name"]
        calls.append(
            {
                "id": call["id"],
                "type": "function",
                "function": {"name": function["name"], "arguments": function.get("arguments") or "{}"},
            }
        )
    flush(True)
    return out


def _convert(
    message: dict[str, Any], names: dict[str, str], max_blocks: int | None = None
) -> list[tuple[dict[str, Any], bool]]:
    role = message["role"]
    content = message.get("content")
    if role in ("system", "developer"):
        return [({"role": "system", "content": _loose_text(content)}, False)]
    if role == "user":
        text = _text_of(content)
        if text is None:
            return [({"role": "user", "content": content}, False)]
        return [({"role": "user", "content": text}, True)]
    if role == "tool":
        return [
            (
                {"role": "tool", "tool_call_id": message["tool_call_id"], "content": _loose_text(content)},
                False,
            )
        ]
    return [(m, False) for m in _assistant(message, names, max_blocks)]


def _pair_results(items: list[tuple[dict[str, Any], bool]]) -> list[tuple[dict[str, Any], bool]]:
    """Each call's result right after its message, in call order; unanswered calls answered."""
    out: list[tuple[dict[str, Any], bool]] = []
    index = 0
    while index < len(items):
        message = items[index][0]
        if message["role"] == "tool":
            raise ApiError(
                400,
                f"a tool message (tool_call_id '{message['tool_call_id']}') follows no assistant "
                "message that made this call",
                param="messages",
            )
        out.append(items[index])
        index += 1
        calls = message.get("tool_calls") or []
        if not calls:
            continue
        answers: dict[str, dict[str, Any]] = {}
        while index < len(items) and items[index][0]["role"] == "tool":
            result = items[index][0]
            answers.setdefault(result["tool_call_id"], result)
            index += 1
        for call in calls:
            answer = answers.pop(call["id"], None)
            out.append((answer or {"role": "tool", "tool_call_id": call["id"], "content": UNANSWERED}, False))
        if answers:
            stray = ", ".join(sorted(answers))
            raise ApiError(
                400, f"tool results for calls the assistant message did not make: {stray}", param="messages"
            )
    return out


def too_many(limit: int) -> ApiError:
    """The 413 of a history over ``limit`` messages."""
    return ApiError(
        413,
        f"the conversation has more than {limit} messages once the tool calls of its earlier answers "
        "are counted (RUNNER_SERVE_MAX_MESSAGES)",
        param="messages",
        code="too_many_messages",
    )


def parse_conversation(messages: list[dict[str, Any]], *, max_messages: int | None = None) -> ChatHistory:
    """Split validated request messages into the history and the new turn's input (``ApiError`` 400).

    With ``max_messages``, a history that would hold more messages (each tool block of an earlier
    answer becomes two) is refused with a 413 as soon as that is known.
    """
    last = messages[-1]
    body = messages
    text: str | None = None
    if last["role"] == "user":
        text = _text_of(last.get("content"))
        if text is not None:
            body = messages[:-1]
    elif last["role"] != "tool":
        raise ApiError(
            400,
            f"the last message must be a user message or tool results, not '{last['role']}'",
            param=f"messages[{len(messages) - 1}].role",
        )
    names: dict[str, str] = {}
    items: list[tuple[dict[str, Any], bool]] = []
    for message in body:
        remaining = None if max_messages is None else max_messages - len(items)
        items.extend(_convert(message, names, remaining))
        if max_messages is not None and len(items) > max_messages:
            raise too_many(max_messages)
    first = next((t for m in messages if m["role"] == "user" and (t := _text_of(m.get("content")))), "")
    items = _pair_results(items)  # unanswered calls get a result
    if max_messages is not None and len(items) > max_messages:
        raise too_many(max_messages)
    return ChatHistory(items=items, text=text, names=names, first_input=first)
