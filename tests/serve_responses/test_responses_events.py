"""The Responses door's event encoding: the opening events, made from one encoding of the response,
are the bytes each event encoded on its own would be."""

from __future__ import annotations

import json

from runner.serve.engine import TextPiece
from runner.serve.responses.events import ResponseBuilder, encode_event, encode_events


def _builder() -> ResponseBuilder:
    skeleton = {
        "id": "resp_" + "0" * 32,
        "object": "response",
        "status": "in_progress",
        "instructions": "Réponds en français \u2014 \ud800 (a lone surrogate)",
        "metadata": {"k": "v"},
        "output": [],
        "usage": None,
    }
    return ResponseBuilder(skeleton, label="bench", namespaces={})


def test_the_opening_events_are_the_bytes_of_each_event_encoded_alone() -> None:
    builder = _builder()
    snapshot = builder._snapshot()
    expected = [
        encode_event({"type": "response.created", "sequence_number": 0, "response": snapshot}),
        encode_event({"type": "response.in_progress", "sequence_number": 1, "response": snapshot}),
    ]
    made = builder.start()
    assert made == expected
    assert encode_events(made) == b"".join(expected)
    data = [json.loads(part.split(b"\ndata: ", 1)[1]) for part in expected]
    assert [d["sequence_number"] for d in data] == [0, 1]
    assert data[0]["response"]["instructions"].endswith("\ufffd (a lone surrogate)")


def test_events_after_the_opening_ones_go_on_numbering() -> None:
    builder = _builder()
    builder.start()
    events = builder.feed(TextPiece("hi"))
    assert [e["sequence_number"] for e in events if isinstance(e, dict)] == [2, 3, 4]
    assert encode_events(events).count(b"event: ") == 3
