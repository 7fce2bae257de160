"""``files_read`` in bounded memory: a file is read in chunks and only what will be shown is kept.

A file is decoded as UTF-8 chunk by chunk (``errors="replace"``: invalid bytes, and surrogates
encoded in the file, become U+FFFD, so the text is always valid); lines are split at ``\\n``. Lines
before the range are decoded and dropped; once the character limit is reached or the range has
ended, the rest of the file is only counted (newlines in raw bytes), never decoded or kept. A single
400 MB line therefore costs one chunk of memory, not the line.
"""

from __future__ import annotations

import codecs
import threading
from dataclasses import dataclass
from pathlib import Path

from runner.errors import ToolError

__all__ = ["CHUNK_BYTES", "Excerpt", "read_excerpt"]

#: How much of a file is read at a time.
CHUNK_BYTES = 1 << 20


@dataclass(frozen=True)
class Excerpt:
    """The part of a file ``files_read`` shows, and what it needs to describe the rest."""

    text: str
    """The lines shown (valid text; the beginning of one line when ``partial_line``)."""
    last: int
    """The number of the last line shown (0: none)."""
    total: int
    """How many lines the file has."""
    size: int
    """The file's size in bytes."""
    cut: bool
    """The character limit stopped the excerpt before the end of the range."""
    partial_line: bool
    """The first line of the range alone is longer than the limit: only its beginning is shown."""


class _Collector:
    """Keeps the lines start..end of decoded text fed to it, up to ``limit`` characters."""

    def __init__(self, *, start: int, end: int | None, limit: int) -> None:
        self.start, self.end, self.limit = start, end, limit
        self.shown: list[str] = []
        self.size = 0
        self.line = 1
        self.last = 0
        self.pending: list[str] = []  # the line under way, while it is in the range
        self.pending_size = 0
        self.cut = False
        self.partial_line = False

    def feed(self, text: str) -> bool:
        """Take ``text``; False once nothing more will be kept (limit reached, range ended)."""
        position = 0
        while position < len(text):
            newline = text.find("\n", position)
            stop = len(text) if newline < 0 else newline + 1
            if self.end is not None and self.line > self.end:
                return False
            if self.line >= self.start and not self._keep(text[position:stop]):
                return False
            if newline >= 0:
                self._finish_line()
            position = stop
        return True

    def finish(self) -> None:
        """The file ended: a last line without a newline counts as shown."""
        if self.pending:
            self._finish_line()

    def _keep(self, piece: str) -> bool:
        room = self.limit - self.size - self.pending_size
        if len(piece) <= room:
            self.pending.append(piece)
            self.pending_size += len(piece)
            return True
        self.cut = True
        if not self.shown:  # the first line of the range is longer than the limit: show its beginning
            self.pending.append(piece[:room])
            self.partial_line = True
            self._finish_line()
        return False

    def _finish_line(self) -> None:
        if self.pending:
            self.shown.extend(self.pending)
            self.size += self.pending_size
            self.pending, self.pending_size = [], 0
            self.last = self.line
        self.line += 1


def read_excerpt(
    path: Path, *, start: int, end: int | None, limit: int, stop: threading.Event | None = None
) -> Excerpt:
    """Lines ``start``..``end`` of ``path``, at most ``limit`` characters of them, read in chunks.

    ``stop`` set (the call was abandoned) ends the reading with a ``ToolError``.
    """
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    collector = _Collector(start=start, end=end, limit=limit)
    collecting = True
    newlines = size = 0
    last_byte = b""
    try:
        with path.open("rb") as handle:
            while chunk := handle.read(CHUNK_BYTES):
                if stop is not None and stop.is_set():
                    raise ToolError("files_read was abandoned before it finished.")
                newlines += chunk.count(b"\n")
                size += len(chunk)
                last_byte = chunk[-1:]
                if collecting:
                    collecting = collector.feed(decoder.decode(chunk))
            if collecting and collector.feed(decoder.decode(b"", final=True)):
                collector.finish()
    except OSError as exc:
        raise ToolError(f"Cannot read {path.name!r}: {exc.strerror}") from None
    total = newlines + (1 if size and last_byte != b"\n" else 0)
    return Excerpt(
        text="".join(collector.shown),
        last=collector.last,
        total=total,
        size=size,
        cut=collector.cut,
        partial_line=collector.partial_line,
    )
