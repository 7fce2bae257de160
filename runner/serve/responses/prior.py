"""A stored conversation ready to continue: checked and converted once, not at every continuation.

Continuing by ``previous_response_id`` runs the stored conversation plus the request's input. What
the stored part becomes — checked by the chat door's validator, its earlier answers turned back
into the steps that produced them, each call paired with its result (``history.parse_conversation``)
— is the same for every continuation of it, so it is done once and kept with the record while the
record stays in memory (``StoredResponse.derived``). A request converts only the stored
conversation's last turn and its own input, and its answer's record gets its ``Prepared`` at once
(``Continuing.next``): a chain continued turn after turn never converts its history again.

The split is the conversation's last user text message: the pairing of calls with results starts
afresh at a user message, so the parts converted apart join to what converting the whole gives
(``tests/serve_responses/test_responses_prior.py`` compares the two).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from runner.serve.history import ChatHistory, SharedHistory, parse_conversation, too_many
from runner.serve.protocol import ApiError, parse_chat_request
from runner.serve.responses.store import StoredResponse

__all__ = ["EMPTY", "Continuing", "Prepared", "continue_conversation", "prepared"]

Item = tuple[dict[str, Any], bool]


@dataclass(frozen=True)
class Prepared:
    """The converted history of a conversation's messages before ``split`` (shared by the requests
    that continue it, never changed: a session restores copies), with what converting it found."""

    shared: SharedHistory = field(default_factory=SharedHistory)
    #: How many of the conversation's messages ``items`` stand for.
    split: int = 0
    names: dict[str, str] = field(default_factory=dict)
    #: The conversation's first user text ("" when the part before ``split`` has none).
    first_input: str = ""
    #: Every call id the whole conversation holds (a ``function_call_output`` must answer one).
    issued: frozenset[str] = frozenset()

    @property
    def items(self) -> tuple[Item, ...]:
        return self.shared.items


EMPTY = Prepared()


def _calls(messages: list[dict[str, Any]]) -> set[str]:
    return {call["id"] for message in messages for call in message.get("tool_calls") or ()}


def _is_user_text(message: dict[str, Any]) -> bool:
    content = message.get("content")
    if message.get("role") != "user":
        return False
    if content is None or isinstance(content, str):
        return True
    return all(isinstance(part, dict) and part.get("type") == "text" for part in content)


def prepared(stored: StoredResponse) -> Prepared:
    """The ``Prepared`` of ``stored``'s conversation, made on first need and kept with it; an
    ``ApiError`` (400) when the stored messages do not pass the chat door's checks."""
    known = stored.derived.get("prepared")
    if isinstance(known, Prepared):
        return known
    messages = stored.messages
    if messages:  # checked as a client's messages would be: a record edited by hand is not trusted
        parse_chat_request({"model": "stored", "messages": messages})
    split = next((i for i in range(len(messages) - 1, -1, -1) if _is_user_text(messages[i])), 0)
    if split == 0:
        made = Prepared(issued=frozenset(_calls(messages)))
    else:
        head = parse_conversation(messages[: split + 1])  # the user text at ``split`` is its input
        made = Prepared(
            shared=SharedHistory(tuple(head.items)),
            split=split,
            names=head.names,
            first_input=head.first_input,
            issued=frozenset(_calls(messages)),
        )
    stored.derived["prepared"] = made
    return made


@dataclass(frozen=True)
class Continuing:
    """A request's history to run, and what its answer's record will hold prepared already."""

    history: ChatHistory
    #: The ``Prepared`` of the conversation this request's answer ends (None: its input ended with
    #: tool results, so the split is not known yet, or its answer is not stored; the record is
    #: prepared on first need then).
    next: Prepared | None


def continue_conversation(
    base: Prepared,
    stored: list[dict[str, Any]],
    new: list[dict[str, Any]],
    *,
    instructions: str | None = None,
    max_messages: int | None = None,
    keep: bool = True,
) -> Continuing:
    """The history of ``stored`` (prepared as ``base``, shared) followed by ``new``, as
    ``parse_conversation`` gives it for ``[instructions, *stored, *new]`` (``ApiError`` as it);
    ``keep``: its answer will be stored (so ``next`` is worth preparing)."""
    lead: list[Item] = [({"role": "system", "content": instructions}, False)] if instructions else []
    fixed = len(lead) + len(base.items)
    try:
        rest = parse_conversation(
            [*stored[base.split :], *new], max_messages=None if max_messages is None else max_messages - fixed
        )
    except ApiError as error:
        if error.code == "too_many_messages" and max_messages is not None:  # the whole one's limit
            raise too_many(max_messages) from None
        raise
    names = {**base.names, **rest.names}
    first = base.first_input or rest.first_input
    following = None
    if rest.text is not None and keep:  # it ended with a user text: the next split is that message
        following = Prepared(
            shared=SharedHistory((*base.items, *rest.items)),
            split=len(stored) + len(new) - 1,
            names=names,
            first_input=first,
            issued=base.issued | _calls(new),
        )
    history = ChatHistory(
        items=[*lead, *rest.items],
        text=rest.text,
        names=names,
        first_input=first,
        base=base.shared if base.items else None,
        base_at=len(lead),
        then=following.shared if following is not None else None,
    )
    return Continuing(history, following)
