"""A conversation's state, apart from any configuration: history, system prompt, queue, turns, undo.

Everything appended goes to the transcript as it happens. The system prompt is composed by the
runtime's ``Prompts`` from the conversation's first input the first time a turn needs it, for a new
conversation and a restored one alike; a conversation read back from a transcript keeps the prompt
it recorded (a resume sends exactly what the session sent before).
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any

from runner.session import context as ctxmod
from runner.store.transcript import TranscriptWriter
from runner.text import valid_record

__all__ = ["NOTE_PREFIX", "Conversation", "is_note"]

#: The start of every message the runner itself adds to the history (a turn stopped early, ...).
NOTE_PREFIX = "[runner] "
UNFINISHED = "Not executed: the runner stopped before this call finished."


def is_note(message: dict[str, Any]) -> bool:
    """Whether a message is a note the runner added (not a user's input)."""
    content = message.get("content")
    return isinstance(content, str) and content.startswith(NOTE_PREFIX)


def _all_valid(messages: list[dict[str, Any]]) -> bool:
    """Whether every text of ``messages`` is valid already (one encoding pass, not a walk)."""
    try:
        json.dumps(messages, ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError, UnicodeEncodeError):
        return False
    return True


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
        last["content"] = f"{content[:limit]}\n[{why}: {cut:,} more characters cut]"
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
        self.first_input = first_input
        if record:
            history = self._record(list(history), names or {})
        for message in history:
            self._add(message)
        self.errors |= set(errors)
        if turns is None:
            turns = sum(1 for m in self.history if m.get("role") == "user" and not is_note(m))
        self.turn = turns
        self._answer_dangling_calls()

    def _record(self, history: list[dict[str, Any]], names: dict[str, str]) -> list[dict[str, Any]]:
        """Write ``history`` to the transcript in one write; the history with every text valid
        (checked by that write's encoding: only a history holding a lone surrogate is walked)."""

        def records(messages: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
            named = ((m, names.get(m.get("tool_call_id") or "")) for m in messages)
            return [(m, {"name": name} if name else {}) for m, name in named]

        if self.transcript is None:
            return history if _all_valid(history) else [valid_record(m) for m in history]
        try:
            self.transcript.messages(records(history), strict=True)
        except UnicodeEncodeError:
            history = [valid_record(message) for message in history]
            self.transcript.messages(records(history))
        return history

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
