"""``files_search``'s matching: RE2 (linear time, no backtracking), bounded pieces, a time limit.

Why RE2 (``google-re2``): Python's ``re`` backtracks (``(a+)+$`` over a line of ``a``'s runs for
ages) and holds the GIL while it does, so a tool timeout cannot even fire and every other task of
the process (``serve``'s other clients) waits. RE2 matches in time linear in the text, refuses
repeat counts over 1000 (``(a{1000}){1000}`` cannot make a huge program), and releases the GIL while
it matches. Its syntax is Python's without backreferences (``\\1``), look-around (``(?=``, ``(?<=``)
and possessive or atomic groups; ``\\w``, ``\\d``, ``\\b`` are ASCII, ``\\pL``-style classes are
Unicode.

Linear is still slow for a huge program over a huge line, so every bound is explicit:

- a pattern whose compiled program exceeds ``MAX_PROGRAM`` instructions is refused;
- lines are read in pieces of at most ``piece_bytes`` (``WORK_PER_CALL`` divided by the program
  size, between ``MIN_PIECE_BYTES`` and ``MAX_PIECE_BYTES``): one RE2 call does a bounded amount of
  work, so a 400 MB line is never held whole and a stopped search ends within one piece. Each piece
  is matched with a byte of context on each side, so ``^``, ``$`` and ``\\b`` still mean the line's
  edges; a match spanning two pieces of one long line is not found;
- the search stops at its deadline (``search_timeout_s``) or when its caller abandoned it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.errors import ToolError

__all__ = [
    "MAX_PIECE_BYTES",
    "MAX_PROGRAM",
    "MIN_PIECE_BYTES",
    "WORK_PER_CALL",
    "Matcher",
    "SearchStopped",
    "compile_query",
]

#: The largest compiled pattern accepted, in RE2 program instructions.
MAX_PROGRAM = 20_000
#: Program instructions × bytes one RE2 call may cost (about 0.25 s in the worst case measured).
WORK_PER_CALL = 20_000_000
MIN_PIECE_BYTES = 4096
MAX_PIECE_BYTES = 1 << 20


class SearchStopped(Exception):
    """The search reached its deadline or was abandoned; ``where`` is the file it was in."""

    def __init__(self, where: Path, *, abandoned: bool) -> None:
        super().__init__(str(where))
        self.where = where
        self.abandoned = abandoned


@dataclass(frozen=True)
class Matcher:
    """A compiled query and the piece size that bounds one call of it."""

    regexp: Any
    piece_bytes: int

    def matching_lines(
        self, path: Path, *, deadline: float, stop: threading.Event | None
    ) -> Iterator[tuple[int, str]]:
        """``(line number, text to show)`` for each matching line of ``path``, read piece by piece.

        Each piece is matched with one byte of context on each side within its line, so ``^``,
        ``$`` and ``\\b`` see the line, not the piece's edges.
        """
        number, before, matched = 1, b"", False
        with path.open("rb") as handle:
            while piece := handle.readline(self.piece_bytes):
                if (stop is not None and stop.is_set()) or time.monotonic() > deadline:
                    raise SearchStopped(path, abandoned=stop is not None and stop.is_set())
                ends_line = piece.endswith(b"\n")
                if not matched:
                    body = piece.rstrip(b"\r\n") if ends_line else piece
                    after = b"" if ends_line else _context_after(handle.peek(2)[:2])
                    if self.regexp.search(before + body + after, len(before), len(before) + len(body)):
                        matched = True
                        yield number, _shown(piece, continued=bool(before))
                if ends_line:
                    number, before, matched = number + 1, b"", False
                else:
                    before = piece[-1:]


def _context_after(following: bytes) -> bytes:
    """The byte after a piece as context; none when the line ends there (``$`` matches)."""
    return b"" if following[:1] == b"\n" or following == b"\r\n" else following[:1]


def _shown(piece: bytes, *, continued: bool) -> str:
    """The start of a matching piece as valid text (a long line's later piece starts with '...')."""
    text = piece[:1024].decode("utf-8", errors="replace").strip()
    return f"...{text}" if continued else text


def compile_query(query: str, *, regex: bool, case_sensitive: bool) -> Matcher:
    """``query`` compiled by RE2 (as a literal unless ``regex``); a clear ``ToolError`` otherwise."""
    import re2  # lazy: a C++ extension only searches need

    options = re2.Options()
    options.log_errors = False  # RE2 would print parse errors on stderr
    options.never_capture = True  # only "does it match" is asked
    options.case_sensitive = case_sensitive
    options.literal = not regex
    try:
        regexp = re2.compile(query, options)
    except UnicodeEncodeError:
        raise ToolError(f"The query {query!r} contains a lone surrogate; send valid text.") from None
    except re2.error as exc:
        reason = (
            exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else exc
        )
        raise ToolError(
            f"Invalid regular expression {query!r}: {reason}. files_search uses RE2 syntax: Python's "
            "without backreferences, look-around or possessive repeats; repeat counts at most 1000."
        ) from None
    program = _program_size(regexp)
    if program > MAX_PROGRAM:
        raise ToolError(
            f"The regular expression {query!r} is too large ({program} RE2 instructions; the limit is "
            f"{MAX_PROGRAM}); use a shorter pattern or fewer or smaller repeat counts."
        )
    piece = max(MIN_PIECE_BYTES, min(MAX_PIECE_BYTES, WORK_PER_CALL // max(program, 1)))
    return Matcher(regexp, piece)


def _program_size(regexp: Any) -> int:
    """RE2's program size (forward or reverse, the larger); MAX_PROGRAM when it cannot be asked."""
    compiled: Any = getattr(regexp, "_regexp", None)
    try:
        return max(int(compiled.ProgramSize()), int(compiled.ReverseProgramSize()))
    except (AttributeError, TypeError, ValueError):
        return MAX_PROGRAM  # a google-re2 without these: assume the worst, the smallest pieces
