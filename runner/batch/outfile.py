"""The output file of a batch: what a rerun may skip, what it refuses, appending, putting it in order.

One JSON line per item (``ItemResult.as_record``). Lines are appended as items finish, each one
flushed (and fsynced with ``RUNNER_FSYNC``), so a ``kill -9`` loses only the items that were running.
When the batch ends, the file is put in input order by one atomic rewrite (unless unordered).

A rerun (``OutFile.resume``) reads the file first:

- an ``ok`` line whose id, input hash and agent hash match the input is kept, and its item skipped;
- a line that did not end ok (``error``, ``limit``) is dropped whatever input or agent file it was
  run with, and its item (if the input still has its id) runs again: fix a line, rerun, no
  ``force`` needed;
- a torn last line (a kill mid-write) is dropped;
- an ``ok`` line from another agent file, of an id the input does not have, or with another input
  under its id, means the file belongs to another batch (its paid answers would be lost): refused
  (``ConfigError``, exit 2), unless ``force``, which drops those lines.

Dropping is one rewrite to a temporary file and ``os.replace``: at every moment the file on disk
holds at most one line per item, and never loses an ``ok`` one.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from runner.batch.inputs import BatchItem, item_key
from runner.batch.item_result import ItemResult
from runner.errors import ConfigError
from runner.store.disk import LineFile, check_writable, replace_atomically, storage_error
from runner.text import utf8, valid_record

__all__ = ["InputIndex", "OutFile", "read_results"]


@dataclass(frozen=True, slots=True)
class InputIndex:
    """Each input item's line and hash, by id (what a resumed output file is checked against)."""

    entries: Mapping[str, tuple[int, str]]

    def order(self, record: Mapping[str, Any]) -> int:
        entry = self.entries.get(item_key(record.get("id")))
        return entry[0] if entry is not None else 1 << 62


@dataclass
class OutFile:
    """The batch's output file, opened for appending after ``resume`` checked what it holds."""

    path: Path
    fsync: bool = False
    redact: Callable[[Any], Any] | None = None
    """Applied to each record before it is written (the agent's secrets, as in its transcripts)."""
    done: dict[str, str] = field(default_factory=dict)
    """The items already ``ok`` in the file: id → input hash."""
    kept: int = 0
    dropped: int = 0
    """Lines dropped by ``resume`` (failed or limited items, a torn line, lines ``force`` set aside)."""
    _file: LineFile | None = None

    def skip(self, item: BatchItem) -> bool:
        """Whether ``item`` is already ``ok`` in the file (same id, same input)."""
        return self.done.get(item_key(item.id)) == item.sha256

    # ----------------------------------------------------------------- resuming

    def resume(self, index: InputIndex, *, agent_sha256: str, force: bool = False) -> None:
        """Read what the file holds; refuse one of another batch; drop what will run again."""
        try:
            self._resume(index, agent_sha256=agent_sha256, force=force)
        except OSError as exc:  # unreadable (a write fails as StorageError already)
            raise storage_error(exc, self.path, what="the batch output", verb="read") from None

    def _resume(self, index: InputIndex, *, agent_sha256: str, force: bool) -> None:
        if not self.path.exists() or self.path.stat().st_size == 0:
            return
        keep: set[int] = set()  # the numbers of the lines kept (their text stays in the file)
        foreign: list[str] = []
        total = 0
        for number, _, record in _lines(self.path):
            total += 1
            if _did_not_end_ok(record):
                continue  # dropped whatever it was run with: fix-and-rerun needs no --force
            why = _foreign(record, index, agent_sha256)
            if why is not None:
                foreign.append(f"line {number}: {why}")
                continue
            assert record is not None
            key = item_key(record["id"])
            if record.get("status") in ENDED_OK and key not in self.done:
                self.done[key] = record["input_sha256"]
                keep.add(number)
        if foreign and not force:
            more = f" (and {len(foreign) - 1} more)" if len(foreign) > 1 else ""
            raise ConfigError(
                f"{self.path} is the output of another batch: {foreign[0]}{more}",
                hint="give another -o, or --force to drop those lines and run their items again (with "
                "their input as it is now)",
            )
        self.kept = len(keep)
        if total != len(keep) or not _ends_with_newline(self.path):
            self.dropped = total - len(keep)
            lines = (line for number, line, _ in _lines(self.path) if number in keep)
            _replace(self.path, lines, fsync=self.fsync)

    # ----------------------------------------------------------------- writing

    def check(self) -> None:
        """Refuse (``StorageError``) an output file that cannot be written, before anything runs:
        its folder must take a new file (the ordered rewrite needs one beside it) and the file
        itself must open for appending."""
        check_writable(self.path.parent, what="the batch output's folder")
        if self.path.exists():
            probe = LineFile(self.path, what="the batch output")
            probe.open()
            probe.close()

    def open(self) -> None:
        self._file = LineFile(self.path, what="the batch output", fsync=self.fsync)
        self._file.open()

    def write(self, result: ItemResult) -> None:
        """Append one item's line, flushed (fsynced with ``fsync``); whole or not at all."""
        assert self._file is not None
        record = valid_record(result.as_record())
        if self.redact is not None:
            record = self.redact(record)
        self._file.write(utf8(json.dumps(record, ensure_ascii=False, default=str) + "\n"))

    def close(self) -> None:
        file, self._file = self._file, None
        if file is not None:
            file.close()

    def put_in_order(self, index: InputIndex) -> bool:
        """Rewrite the file in input order if it is not (one atomic replace); whether it did.

        Only each line's place and length are held, not its text: memory stays small for any size.
        """
        spans: list[tuple[int, int, int]] = []  # (input order, offset, length)
        with self.path.open("rb") as file:
            offset = 0
            for raw in file:
                if raw.strip():
                    spans.append((index.order(_record(raw)), offset, len(raw)))
                offset += len(raw)
        if all(a[0] <= b[0] for a, b in itertools.pairwise(spans)):
            return False
        with self.path.open("rb") as source:
            replace_atomically(
                self.path, _spans(source, sorted(spans)), what="the batch output", fsync=self.fsync
            )
        return True


def _spans(source: IO[bytes], spans: Iterable[tuple[int, int, int]]) -> Iterator[bytes]:
    """The lines of ``source`` at ``spans`` ``(order, offset, length)``, each ending with a newline."""
    for _, start, length in spans:
        source.seek(start)
        line = source.read(length)
        yield line if line.endswith(b"\n") else line + b"\n"


def _record(raw: bytes) -> dict[str, Any]:
    try:
        record = json.loads(raw)
    except (ValueError, RecursionError):  # not JSON, not UTF-8, a number too long, too deep
        return {}
    return record if isinstance(record, dict) else {}


def _lines(path: Path) -> Iterator[tuple[int, str, dict[str, Any] | None]]:
    """Each non-blank line: its number, its text (with newline), its record (None: not JSON)."""
    with path.open(encoding="utf-8", errors="surrogateescape") as file:
        for number, line in enumerate(file, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except (ValueError, RecursionError):  # not JSON, a number too long, too deep
                record = None
            if record is None and not line.endswith("\n"):
                return  # a torn last line: what a kill mid-write leaves
            yield number, line if line.endswith("\n") else line + "\n", record


#: The statuses of a line that is done (a hook's ``stop`` is the agent's own end: not run again).
ENDED_OK = ("ok", "stopped")


def _did_not_end_ok(record: dict[str, Any] | None) -> bool:
    """A batch line of an item that did not end ``ok``: nothing of value is lost when it goes."""
    if not isinstance(record, dict) or "id" not in record or "input_sha256" not in record:
        return False
    return record.get("status") not in ENDED_OK


def _foreign(record: dict[str, Any] | None, index: InputIndex, agent_sha256: str) -> str | None:
    """Why a line does not belong to this batch; None when it does."""
    if not isinstance(record, dict) or "id" not in record or "input_sha256" not in record:
        return "not a line of a batch output"
    if record.get("agent_sha256") != agent_sha256:
        return "written by another agent file (its sha256 differs)"
    entry = index.entries.get(item_key(record["id"]))
    if entry is None:
        return f"id {record['id']!r} is not in the input"
    if entry[1] != record["input_sha256"]:
        return f"id {record['id']!r} ended ok with another input (input line {entry[0]} changed since)"
    return None


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as file:
        file.seek(-1, os.SEEK_END)
        return file.read(1) == b"\n"


def _replace(path: Path, lines: Iterable[str], *, fsync: bool) -> None:
    chunks = (line.encode("utf-8", "surrogateescape") for line in lines)
    replace_atomically(path, chunks, what="the batch output", fsync=fsync)


def read_results(path: Path) -> tuple[list[ItemResult], list[str]]:
    """The items of an output file as far as it can be read, and what was skipped (line by line)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise ConfigError(f"no batch output file at {path}") from None
    except OSError as exc:
        raise storage_error(exc, path, what="the batch output file", verb="read") from None
    results: list[ItemResult] = []
    skipped: list[str] = []
    lines = text.split("\n")
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            torn = number == len(lines)  # no newline after it: a kill mid-write
            skipped.append(f"line {number}: " + ("a torn last line (cut mid-write)" if torn else "not JSON"))
            continue
        if not isinstance(record, dict) or "id" not in record or "status" not in record:
            skipped.append(f"line {number}: not a batch result (no id and status)")
            continue
        try:
            results.append(ItemResult.from_record(record))
        except TypeError:
            skipped.append(f"line {number}: not a batch result (missing fields)")
    return results, skipped
