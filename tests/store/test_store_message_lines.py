"""Message records encoded once but for their time (``store.message_lines``): the lines written are
exactly what encoding each record at that time writes, redaction included."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runner.store import transcript as transcript_module
from runner.store.message_lines import lines_at, message_record, record_tails
from runner.store.transcript import Redactor, TranscriptWriter

RECORDS: list[tuple[dict[str, Any], dict[str, Any]]] = [
    ({"role": "user", "content": 'héllo \u2603 "quoted"\n'}, {}),
    (
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}}
            ],
        },
        {},
    ),
    ({"role": "tool", "tool_call_id": "c1", "content": "2"}, {"name": "add", "usage": None}),
    ({"role": "user", "content": [{"type": "text", "text": "parts"}]}, {}),
    ({}, {}),
]
TIME = "2026-12-03T14:00:00.123+00:00"


def _dumped(records: list[tuple[dict[str, Any], dict[str, Any]]], time: str) -> str:
    return "".join(
        json.dumps(message_record(m, time, e), ensure_ascii=False, separators=(",", ":"), default=str) + "\n"
        for m, e in records
    )


def test_the_lines_at_a_time_are_the_records_encoded_at_that_time() -> None:
    tails = record_tails(RECORDS)
    assert tails is not None
    assert lines_at(tails, TIME) == _dumped(RECORDS, TIME)
    assert lines_at(tails, "another time") == _dumped(RECORDS, "another time")
    assert lines_at([], TIME) == ""


def test_a_message_with_a_time_of_its_own_cannot_be_cut() -> None:
    assert record_tails([({"role": "user", "content": "x", "time": "mine"}, {})]) is None
    assert record_tails([({"type": "odd", "role": "user"}, {})]) is None


@pytest.mark.parametrize("secret", [None, "s3cret-value"])
def test_the_writer_writes_the_same_bytes_as_encoding_each_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, secret: str | None
) -> None:
    monkeypatch.setattr(transcript_module, "now_iso", lambda: TIME)
    records = [*RECORDS, ({"role": "user", "content": f"the key is {secret}"}, {})] if secret else RECORDS
    redact = Redactor([secret] if secret else [])
    encoded, each = tmp_path / "encoded.jsonl", tmp_path / "each.jsonl"
    writer = TranscriptWriter(encoded, redact=redact)
    tails = record_tails(records)
    assert tails is not None
    writer.message_lines(tails, records)
    writer.close()
    plain = TranscriptWriter(each, redact=redact)
    plain.messages(records)
    plain.close()
    assert encoded.read_bytes() == each.read_bytes()
    if secret:
        assert secret not in encoded.read_text() and "the key is ***" in encoded.read_text()
