"""A conversation's state, apart from any configuration: history, system prompt, queue, turns, undo.

Everything appended goes to the transcript as it happens. The system prompt is composed by the
runtime's ``Prompts`` from the conversation's first input the first time a turn needs it, for a new
conversation and a restored one alike; a conversation read back from a transcript keeps the prompt
it recorded (a resume sends exactly what the session sent before).

A history restored into many sessions (a stored response's conversation, continued again and
again) is made ready once as a ``Restored`` (``restored_part``: its texts checked, its transcript
records encoded but for their time, its size, tool names, turns and unanswered calls counted);
``Conversation.restore_parts`` loads parts so made with one write and no walk of their messages;
a part marked ``shared`` also has its messages encoded once for the model's requests
(``encoded_run``; the fast path splices them in while they still hold).
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from itertools import chain
from typing import Any

from runner.models.base import EncodedRun
from runner.session import context as ctxmod
from runner.store.message_lines import record_tails
from runner.store.transcript import TranscriptWriter
from runner.text import valid_record

__all__ = ["NOTE_PREFIX", "Conversation", "Restored", "is_note", "joined", "restored_part", "shared"]

#: The start of every message the runner itself adds to the history (a turn stopped early, ...).
NOTE_PREFIX = "[runner] "
UNFINISHED = "Not executed: the runner stopped before this call finished."


def is_note(message: dict[str, Any]) -> bool:
    """Whether a message is a note the runner added (not a user's input)."""
    content = message.get("content")
    return isinstance(content, str) and content.startswith(NOTE_PREFIX)


Record = tuple[dict[str, Any], dict[str, Any]]


@dataclass(frozen=True)
class Restored:
    """Messages ready to restore (every text valid), with what restoring them needs worked out
    once: a history restored into many sessions (a stored response's conversation, continued again
    and again) is checked, encoded and counted once, not in every session (``restored_part``)."""

    messages: tuple[dict[str, Any], ...] = ()
    #: Each message with the extra fields of its transcript record (a tool result's tool name).
    records: tuple[Record, ...] = ()
    #: Their transcript records encoded but for the time (``message_lines.record_tails``); None
    #: when they cannot be cut so (then they are encoded when written).
    tails: tuple[str, ...] | None = ()
    chars: int = 0
    #: The tool name of each call the messages make.
    names: Mapping[str, str] = field(default_factory=dict)
    #: The user inputs among them (notes not counted).
    turns: int = 0
    #: The calls (id, tool name) no result among them answers, in order.
    pending: tuple[tuple[str, str], ...] = ()
    #: The call ids their tool results answer.
    answered: frozenset[str] = frozenset()
    #: Restored again and again (a stored conversation's): its messages are encoded once for the
    #: model's requests too (``wire``).
    shared: bool = False

    @cached_property
    def wire(self) -> str:
        """The messages as a request's JSON holds them (compact, no brackets), made on first need:
        a joined part's from its parts' (a chain's next base: its older part encoded already)."""
        parts = self.__dict__.pop("_wire_from", None)
        if parts is not None:
            return ",".join(part.wire for part in parts if part.messages)
        return json.dumps(list(self.messages), ensure_ascii=False, separators=(",", ":"))[1:-1]


def _encoded(records: list[Record]) -> tuple[str, ...] | None:
    """The records' tails (``record_tails``); ``UnicodeEncodeError`` when a text holds a lone
    surrogate (checked by encoding them, not by walking them)."""
    tails = record_tails(records)
    if tails is None:
        json.dumps([m for m, _ in records], ensure_ascii=False, default=str).encode("utf-8")
        return None
    "".join(tails).encode("utf-8")
    return tuple(tails)


def restored_part(messages: Iterable[dict[str, Any]], names: Mapping[str, str]) -> Restored:
    """``messages`` as a ``Restored`` (a text holding a lone surrogate made valid, ``runner.text``);
    ``names``: the tool name of each call id, for the results' transcript records."""

    def records(of: list[dict[str, Any]]) -> list[Record]:
        named = ((m, names.get(m.get("tool_call_id") or "")) for m in of)
        return [(m, {"name": name} if name else {}) for m, name in named]

    history = list(messages)
    made = records(history)
    try:
        tails = _encoded(made)
    except UnicodeEncodeError:  # rare: only a history holding a lone surrogate is walked
        history = [valid_record(message) for message in history]
        made = records(history)
        tails = _encoded(made)
    answered = frozenset(m["tool_call_id"] for m in history if m.get("role") == "tool")
    calls = [(c["id"], c["function"]["name"]) for m in history for c in m.get("tool_calls") or ()]
    return Restored(
        messages=tuple(history),
        records=tuple(made),
        tails=tails,
        chars=sum(ctxmod.message_chars(m) for m in history),
        names=dict(calls),
        turns=sum(1 for m in history if m.get("role") == "user" and not is_note(m)),
        pending=tuple(call for call in calls if call[0] not in answered),
        answered=answered,
    )


def joined(parts: Sequence[Restored]) -> Restored:
    """The ``Restored`` of the parts' messages one after the other."""
    if len(parts) == 1:
        return parts[0]
    answered = frozenset().union(*(part.answered for part in parts))
    tails = [part.tails for part in parts]
    made = Restored(
        messages=tuple(chain.from_iterable(part.messages for part in parts)),
        records=tuple(chain.from_iterable(part.records for part in parts)),
        tails=None if None in tails else tuple(chain.from_iterable(each or () for each in tails)),
        chars=sum(part.chars for part in parts),
        names={name: tool for part in parts for name, tool in part.names.items()},
        turns=sum(part.turns for part in parts),
        pending=tuple(call for part in parts for call in part.pending if call[0] not in answered),
        answered=answered,
        shared=any(part.shared for part in parts),
    )
    made.__dict__["_wire_from"] = tuple(parts)  # dropped once its ``wire`` is made
    return made


def shared(part: Restored) -> Restored:
    """``part`` marked as restored again and again (``Restored.shared``)."""
    if part.shared:
        return part
    made = replace(part, shared=True)
    made.__dict__.update({k: v for k, v in part.__dict__.items() if k in ("wire", "_wire_from")})
    return made


#: How many messages a shared part holds before its encoded form is worth splicing in.
_SPLICED_FROM = 16


class Conversation:
    """One conversation: what was said, what is queued, and how many turns it ran."""

    def __init__(self, transcript: TranscriptWriter | None = None) -> None:
        self.transcript = transcript
        self.history: list[dict[str, Any]] = []
        self.system: dict[str, Any] | None = None
        #: The input the system prompt is rendered with (the conversation's first); None until known.
        self.first_input: str | None = None
        self.queue: deque[str] = deque()
        self.turn = 0
        self.chars = 0
        #: Call ids of error results (context compression never replaces those).
        self.errors: set[str] = set()
        #: The tool name of every call id in the history.
        self.names: dict[str, str] = {}
        #: Where a shared restored part sits in the history (its messages encoded once).
        self._shared: tuple[int, Restored] | None = None

    # ----------------------------------------------------------------- records

    def append(self, message: dict[str, Any], **extra: Any) -> None:
        """Add a message to the history and to the transcript (its text made valid: ``runner.text``)."""
        message = valid_record(message)
        self._add(message)
        if self.transcript is not None:
            self.transcript.message(message, **extra)

    def _add(self, message: dict[str, Any]) -> None:
        self.history.append(message)
        self.chars += ctxmod.message_chars(message)
        for call in message.get("tool_calls") or ():
            self.names[call["id"]] = call["function"]["name"]

    def cut_last(self, limit: int, why: str) -> int:
        """Cut the text of the last message to ``limit`` characters in the history, saying so; the
        transcript keeps it whole. How many characters were cut (0: it was short enough)."""
        last = self.history[-1] if self.history else None
        content = last.get("content") if last is not None else None
        if not isinstance(content, str) or len(content) <= limit:
            return 0
        assert last is not None
        cut = len(content) - limit
        before = ctxmod.message_chars(last)
        # a new dict: a message is never changed in place (it may be a stored conversation's)
        last = self.history[-1] = {
            **last,
            "content": f"{content[:limit]}\n[{why}: {cut:,} more characters cut]",
        }
        self.chars += ctxmod.message_chars(last) - before
        return cut

    def event(self, name: str, **data: Any) -> None:
        """Write an event record to the transcript."""
        if self.transcript is not None:
            self.transcript.event(name, **data)

    def set_system(self, system: dict[str, Any] | None) -> None:
        """Use ``system`` as the system prompt from the next request on (recorded as the prompt)."""
        self.system = system = valid_record(system)
        if system is not None and self.transcript is not None:
            self.transcript.prompt(system)

    # ----------------------------------------------------------------- restoring

    def restore(
        self,
        history: Iterable[dict[str, Any]],
        *,
        system: dict[str, Any] | None = None,
        first_input: str | None = None,
        errors: Iterable[str] = (),
        turns: int | None = None,
        names: dict[str, str] | None = None,
        record: bool = False,
    ) -> None:
        """Load an earlier history (a transcript, or a client's messages).

        ``system`` keeps a recorded prompt; without one the prompt is composed from ``first_input``
        when the next turn needs it. ``turns`` is how many turns the conversation ran (else its user
        inputs are counted). With ``record`` the messages also go to the transcript (a client sent
        them). Every call left without a result is answered (a crash mid-execution).
        """
        if system is not None:
            if record:
                self.set_system(system)
            else:
                self.system = system
        self.errors |= set(errors)
        if record:  # counted and answered as the parts are
            self.restore_parts([restored_part(history, names or {})], first_input=first_input)
            self.turn = self.turn if turns is None else turns
            return
        self.first_input = first_input
        for message in history:
            self._add(message)
        if turns is None:
            turns = sum(1 for m in self.history if m.get("role") == "user" and not is_note(m))
        self.turn = turns
        self._answer_dangling_calls()

    def restore_parts(
        self, parts: Sequence[Restored], *, first_input: str | None = None, copy: bool = True
    ) -> None:
        """Load a history made of ``parts`` (a client's messages, made ready once: ``Restored``)
        and write it to the transcript in one write; the system prompt is composed from
        ``first_input`` when the next turn needs it. Each message is copied, so that a part can be
        restored again unchanged whatever is done to the history; ``copy=False`` when nothing can
        change a message in place (``Runtime.shares_messages``: the conversation itself replaces
        a message it changes). Calls left without a result are answered."""
        self.first_input = first_input
        if self.transcript is not None:
            records = chain.from_iterable(part.records for part in parts)
            if all(part.tails is not None for part in parts):
                tails = list(chain.from_iterable(part.tails or () for part in parts))
                self.transcript.message_lines(tails, records)  # the records only if it redacts
            else:
                self.transcript.messages(list(records))
        counted = sum(1 for m in self.history if m.get("role") == "user" and not is_note(m))
        for part in parts:
            if part.shared and part.messages and self._shared is None:
                self._shared = (len(self.history), part)
            self.history.extend(map(dict, part.messages) if copy else part.messages)
            self.chars += part.chars
            self.names.update(part.names)
            counted += part.turns
        self.turn = counted
        answered = frozenset().union(*(part.answered for part in parts))
        for call_id, name in (call for part in parts for call in part.pending):
            if call_id not in answered:
                self.append({"role": "tool", "tool_call_id": call_id, "content": UNFINISHED}, name=name)

    def _answer_dangling_calls(self) -> None:
        answered = {m.get("tool_call_id") for m in self.history if m.get("role") == "tool"}
        for message in list(self.history):
            for call in message.get("tool_calls") or ():
                if call["id"] not in answered:
                    self.append(
                        {"role": "tool", "tool_call_id": call["id"], "content": UNFINISHED},
                        name=call["function"]["name"],
                    )

    def needs_continuation(self) -> bool:
        """Whether the history ends waiting for the model (a user message or tool results).

        A runner note (a turn stopped by Ctrl+C, a limit or a hook) is not a question for the model:
        after one, the conversation waits for new input instead of generating at once.
        """
        if not self.history:
            return False
        last = self.history[-1]
        if last.get("role") == "user" and is_note(last):
            return False
        return last.get("role") in ("user", "tool")

    # ----------------------------------------------------------------- changing it

    def undo(self) -> int:
        """Drop the last turn (from its user input on); how many messages were removed."""
        for index in range(len(self.history) - 1, -1, -1):
            message = self.history[index]
            if message.get("role") == "user" and not is_note(message):
                removed = len(self.history) - index
                del self.history[index:]
                self.chars = sum(ctxmod.message_chars(m) for m in self.history)
                self.turn = max(0, self.turn - 1)
                keep = len(self.history) + (1 if self.system is not None else 0)
                self.event("undo", keep=keep, removed=removed, turn=self.turn)
                return removed
        return 0

    def compress(self, *, limit_tokens: int, fixed_chars: int) -> list[ctxmod.Compressed]:
        """Replace old tool outputs until the prompt fits ``limit_tokens`` (SPEC section 7)."""
        total = self.chars + fixed_chars
        budget_chars = limit_tokens * ctxmod.CHARS_PER_TOKEN
        if total <= budget_chars:
            return []
        starts = ctxmod.step_starts(self.history)
        protected = starts[-2] if len(starts) >= 2 else (starts[0] if starts else len(self.history))
        done = ctxmod.compress(
            self.history,
            over_chars=total - budget_chars,
            protected_from=protected,
            errors=self.errors,
            names=self.names,
        )
        if done:
            self.chars = sum(ctxmod.message_chars(m) for m in self.history)
        return done

    def encoded_run(self) -> EncodedRun | None:
        """The shared restored part's messages encoded, where ``messages()`` has them (None: no
        such part). Valid while they are unchanged: the model checks (``EncodedRun.holds``)."""
        if self._shared is None or len(self._shared[1].messages) < _SPLICED_FROM:
            return None  # a few messages are encoded faster than checked and spliced
        index, part = self._shared
        start = index + (1 if self.system is not None else 0)
        return EncodedRun(start, part.messages, part.wire)

    def messages(self, status: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """A request's messages: the system prompt, the history, then ``status`` (never stored)."""
        messages = [self.system, *self.history] if self.system is not None else list(self.history)
        if status is not None:
            messages.append(status)
        return messages

    def drop_queue(self) -> Sequence[str]:
        """Empty the prompt queue; what it held."""
        dropped = list(self.queue)
        self.queue.clear()
        return dropped
