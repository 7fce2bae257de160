"""Message records encoded once but for their time.

A served conversation continued by ``previous_response_id`` restores the same hundreds of messages
into every continuation's new transcript; their records differ only in the time written (one time
for the whole restored batch). ``record_tails`` encodes each record once without its time, and
``lines_at`` joins them at a time: the same bytes ``json.dumps`` of each record would give
(``tests/store/test_message_lines.py`` compares the two). Imports nothing but ``json_lines``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from runner.store.json_lines import json_lines

__all__ = ["lines_at", "message_record", "record_tails"]

#: How every message record starts when encoded with an empty time.
_HEAD = '{"type":"message","time":""'


def message_record(message: dict[str, Any], time: str, extra: dict[str, Any]) -> dict[str, Any]:
    """A message's transcript record: the OpenAI message fields plus time and ``extra`` (most have
    none: then one dict display, a third of the time of the updates)."""
    if not extra:
        return {"type": "message", "time": time, **message}
    record: dict[str, Any] = {"type": "message", "time": time}
    record.update(message)
    record.update({k: v for k, v in extra.items() if v is not None})
    return record


def record_tails(records: Sequence[tuple[dict[str, Any], dict[str, Any]]]) -> list[str] | None:
    """Each (message, extra)'s record encoded without its time: what follows ``"time":"..."`` up to
    the end of its line. None when a message holds a ``type`` or ``time`` field of its own (none
    that the runner makes does: its record cannot be cut so)."""
    lines = json_lines([message_record(message, "", extra) for message, extra in records])
    cut = len(_HEAD)
    if not all(line.startswith(_HEAD) for line in lines):
        return None
    return [line[cut:] for line in lines]


def lines_at(tails: Sequence[str], time: str) -> str:
    """The records of ``tails`` at ``time`` (an ISO time: nothing to escape), one line each, each
    ended by a newline ("" for none)."""
    if not tails:
        return ""
    head = f'{{"type":"message","time":"{time}"'
    return head + ("\n" + head).join(tails) + "\n"
