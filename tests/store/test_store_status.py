"""``Transcript.status``: how a session's last turn ended, read from its records (issue 23, item 27)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runner.store.transcript import Transcript

HEADER = {"type": "header", "session_id": "s", "agent": "a"}


def _event(name: str, **data: Any) -> dict[str, Any]:
    return {"type": "event", "event": name, "time": "2026-01-01T00:00:00.000Z", "data": data}


def _message(role: str, content: str, **extra: Any) -> dict[str, Any]:
    return {"type": "message", "time": "2026-01-01T00:00:00.000Z", "role": role, "content": content, **extra}


def _status(*records: dict[str, Any]) -> str:
    return Transcript(Path("s.jsonl"), HEADER, list(records)).status()


TURN = _event("turn", turn=1, config="c")
ASKED = _message("user", "Is water wet?")
ANSWERED = _message("assistant", "Yes.")


@pytest.mark.parametrize(
    ("records", "status"),
    [
        ((TURN, ASKED), "interrupted"),  # killed during the first model call
        ((TURN, ASKED, ANSWERED, _event("turn_end", turn=1, reason="done")), "done"),
        ((TURN, ASKED, ANSWERED), "done"),  # a file from before turn_end: the answer is there
        ((TURN, ASKED, _event("turn_end", turn=1, reason="hook")), "done"),  # turn_pre stopped it
        ((TURN, ASKED, _event("error", error="ModelError", message="x")), "failed"),
        ((TURN, ASKED, _event("interrupt")), "interrupted"),
        ((TURN, ASKED, _event("limit", reason="limit", note="x")), "limit"),
        (
            (
                TURN,
                ASKED,
                ANSWERED,
                _event("turn_end", turn=1, reason="done"),
                _event("turn", turn=2),
                _message("user", "And ice?"),
            ),
            "interrupted",
        ),  # the second turn was killed
        ((TURN, ASKED, _message("assistant", "", tool_calls=[{"id": "c"}])), "interrupted"),
    ],
)
def test_a_turn_is_done_only_when_it_ended(records: tuple[dict[str, Any], ...], status: str) -> None:
    assert _status(*records) == status
