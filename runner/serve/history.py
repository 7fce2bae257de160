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
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from runner.serve.details import ToolBlock, split_content
from runner.serve.protocol import ApiError
from runner.session.conversation import Restored, joined, restored_part
from runner.session.conversation import shared as as_shared

__all__ = ["ChatHistory", "SharedHistory", "parse_conversation", "too_many"]

UNANSWERED = "Not executed: the client sent no result for this call."

_serial = itertools.count(1)


Item = tuple[dict[str, Any], bool]
Renders = dict[str, dict[str, Any]]


class SharedHistory:
    """The converted history of a stored conversation, shared by every request that continues it
    (its messages are never changed: a session restores copies), and its restored form
    (``Restored``: checked, encoded, counted) for the agent file's version that restored it last,
    with the renders of its user texts: continuing it again restores it without that work."""

    def __init__(self, items: tuple[Item, ...] = ()) -> None:
        self.items = items
        self._kept: tuple[str, Restored, Renders] | None = None

    def restored(self, key: str) -> tuple[Restored, Renders] | None:
        """Its restored form and renders for the agent file of ``key``, if made."""
        kept = self._kept
        return (kept[1], kept[2]) if kept is not None and kept[0] == key else None

    def keep(self, key: str, restored: Restored, renders: Renders) -> None:
        self._kept = (key, restored, renders)


@dataclass
class ChatHistory:
    """The history to restore (user texts still to wrap) and the input of the new turn."""

    items: list[Item] = field(default_factory=list)
    text: str | None = None
    #: The conversation's first user text: the ``input`` its system prompt is rendered with.
    first_input: str = ""
    #: The tool name of each call id, for the tool results' transcript records.
    names: dict[str, str] = field(default_factory=dict)
    #: User texts as the user template rendered them, by text (a stored conversation's, kept so a
    #: continuation does not render its whole history again), for the agent file of ``rendered_key``.
    rendered: Renders = field(default_factory=dict)
    rendered_key: str | None = None
    #: A stored conversation's history this one continues, shared with the other requests that
    #: continue it: it comes after ``items[:base_at]`` (the request's instructions) and before
    #: the rest of ``items``.
    base: SharedHistory | None = None
    base_at: int = 0
    #: The history its answer's record will continue (``base`` then ``items[base_at:]``): given
    #: its restored form when this one is restored, so continuing that record does not make it.
    then: SharedHistory | None = None

    def all_items(self) -> list[Item]:
        """Every item in order (the base's among them)."""
        if self.base is None:
            return self.items
        return [*self.items[: self.base_at], *self.base.items, *self.items[self.base_at :]]

    def _keyed(self, key: str | None) -> bool:
        """Use the renders kept for ``key`` (else none); whether they were for another."""
        if key is None or key != self.rendered_key:
            self.rendered, self.rendered_key = {}, key
            return True
        return False

    def _render(
        self, items: Iterable[Item], wrap_user: Callable[[str], dict[str, Any]]
    ) -> list[dict[str, Any]]:
        rendered = self.rendered
        out = []
        for message, wrap in items:
            if wrap:
                text = message["content"]
                done = rendered.get(text)
                if done is None:
                    done = rendered[text] = wrap_user(text)
                message = done
            out.append(message)
        return out

    def history(
        self, wrap_user: Callable[[str], dict[str, Any]], *, key: str | None = None
    ) -> list[dict[str, Any]]:
        """The messages (copies), with each plain user text passed through ``wrap_user`` (the user
        template); ``key`` names the agent file's version: renders kept for another are not used."""
        self._keyed(key)
        return [dict(message) for message in self._render(self.all_items(), wrap_user)]

    def parts(self, wrap_user: Callable[[str], dict[str, Any]], *, key: str | None = None) -> list[Restored]:
        """The history as ``Conversation.restore_parts`` takes it (rendered as ``history``): the
        base's part made once per agent file version (``key``; None: made every time)."""
        other = self._keyed(key)
        lead, rest = self.items[: self.base_at], self.items[self.base_at :]
        parts = [restored_part(self._render(lead, wrap_user), self.names)] if lead else []
        shared: list[Restored] = []
        if self.base is not None and self.base.items:
            known = self.base.restored(key) if key is not None else None
            if known is not None:
                shared.append(known[0])
                if other:  # the renders came for another version: the base's are these
                    self.rendered.update(known[1])
            else:
                made = restored_part(self._render(self.base.items, wrap_user), self.names)
                shared.append(made if key is None else as_shared(made))
                if key is not None:
                    self.base.keep(key, shared[0], self.rendered)
        shared.append(restored_part(self._render(rest, wrap_user), self.names))
        if self.then is not None and key is not None:
            self.then.keep(key, as_shared(joined(shared)), self.rendered)
        return [*parts, *shared]


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
