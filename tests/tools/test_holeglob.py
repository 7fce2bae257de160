"""Globs over texts with holes: without holes they are fnmatch; with holes, could and must match."""

from __future__ import annotations

import fnmatch

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runner.tools.holeglob import could_match, must_match
from runner.tools.shellparse import HOLE

_GLOB_CHARS = st.text(alphabet="ab *?[]!-/", max_size=8)
_TEXT = st.text(alphabet="ab -/[]*", max_size=8)


@given(_GLOB_CHARS, _TEXT)
def test_without_holes_both_are_fnmatchcase(glob: str, text: str) -> None:
    expected = fnmatch.fnmatchcase(text, glob)
    assert could_match(glob, (text,)) == expected
    assert must_match(glob, (text,)) == expected


@given(_GLOB_CHARS, _TEXT, _TEXT, _TEXT)
def test_a_filling_that_matches_means_could_and_one_that_fails_means_not_must(
    glob: str, before: str, filling: str, after: str
) -> None:
    matches = fnmatch.fnmatchcase(before + filling + after, glob)
    if matches:
        assert could_match(glob, (before, HOLE, after))
    else:
        assert not must_match(glob, (before, HOLE, after))


@pytest.mark.parametrize(
    ("glob", "text", "could", "must"),
    [
        ("rm *", (HOLE, " -f V"), True, False),
        ("rm *", ("echo ", HOLE), False, False),
        ("git *", ("git log ", HOLE), True, True),
        ("git status", ("git status ", HOLE), False, False),
        ("git status", ("git status", HOLE), True, False),
        ("git st*", ("git ", HOLE), True, False),
        ("git log", ("git", HOLE), True, False),
        ("*", (HOLE,), True, True),
    ],
)
def test_holes(glob: str, text: tuple[object, ...], could: bool, must: bool) -> None:
    assert could_match(glob, text) == could  # type: ignore[arg-type]
    assert must_match(glob, text) == must  # type: ignore[arg-type]
