"""``json_lines`` writes exactly what ``json.dumps`` writes for each record, with the C encoder made
once and without it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runner.store import json_lines as module

RECORDS: list[dict[str, Any]] = [
    {"type": "message", "role": "user", "content": 'héllo \u2603 "quoted"\n'},
    {"n": 1.5, "big": 10**30, "nan": float("nan"), "none": None, "flags": [True, False]},
    {"nested": {"a": [{"b": "c"}]}, "odd": object(), "tuple": (1, "x")},
]


def _expected() -> list[str]:
    return [json.dumps(r, ensure_ascii=False, separators=(",", ":"), default=str) for r in RECORDS]


def test_each_line_is_what_json_dumps_writes() -> None:
    lines = module.json_lines(RECORDS)
    expected = _expected()
    assert lines[:2] == expected[:2]
    assert lines[2].startswith('{"nested":{"a":[{"b":"c"}]},"odd":"<object object at ')
    assert lines[2].endswith(',"tuple":[1,"x"]}') and len(lines) == 3


def test_without_the_c_encoder_the_plain_one_writes_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    fast = module.json_lines(RECORDS[:2])
    monkeypatch.setattr(module, "_LINE_ENCODER", None)
    assert module.json_lines(RECORDS[:2]) == fast == _expected()[:2]
