"""The output file of a batch: what a rerun may skip, what it refuses, appending, putting it in order.

One JSON line per item (``ItemResult.as_record``). Lines are appended as items finish, each one
flushed (and fsynced with ``RUNNER_FSYNC``), so a ``kill -9`` loses only the items that were running.
When the batch ends, the file is put in input order by one atomic rewrite (unless unordered).

A rerun (``OutFile.resume``) reads the file first:

- an ``ok`` line whose id, input hash and agent hash match the input is kept, and its item skipped;
- any other line of an input item (``error``, ``limit``) is dropped: that item runs again;
- a torn last line (a kill mid-write) is dropped;
- a line from another agent file, of an id the input does not have, or with another input under
  its id, means the file belongs to another batch: refused (``ConfigError``, exit 2), unless
  ``force``, which drops those lines.

Dropping is one rewrite to a temporary file and ``os.replace``: at every moment the file on disk
holds at most one line per item, and never loses an ``ok`` one.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from runner.batch.inputs import BatchItem, item_key
from runner.batch.record import ItemResult
from runner.errors import ConfigError
from runner.text import valid_record

__all__ = ["InputIndex", "OutFile"]


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
    done: dict[str, str] = field(default_factory=dict)
    """The items already ``ok`` in the file: id → input hash."""
    kept: int = 0
    dropped: int = 0
    """Lines dropped by ``resume`` (failed or limited items, a torn line, lines ``force`` set aside)."""
    _file: IO[str] | None = None

    def skip(self, item: BatchItem) -> bool:
        """Whether ``item`` is already ``ok`` in the file (same id, same input)."""
        return self.done.get(item_key(item.id)) == item.sha256

    # ----------------------------------------------------------------- resuming

    def resume(self, index: InputIndex, *, agent_sha256: str, force: bool = False) -> None:
        """Read what the file holds; refuse one of another batch; drop what will run again."""
        if not self.path.exists() or self.path.stat().st_size == 0:
            return
        keep: list[str] = []
        foreign: list[str] = []
        for number, line, record in _lines(self.path):
            why = _foreign(record, index, agent_sha256)
            if why is not None:
                foreign.append(f"line {number}: {why}")
                continue
            assert record is not None
            key = item_key(record["id"])
            if record.get("status") == "ok" and key not in self.done:
                self.done[key] = record["input_sha256"]
                keep.append(line)
        if foreign and not force:
            more = f" (and {len(foreign) - 1} more)" if len(foreign) > 1 else ""
            raise ConfigError(
                f"{self.path} is the output of another batch: {foreign[0]}{more}",
                hint="give another -o, or --force to run those items again and drop the lines that "
                "do not belong",
            )
        self.kept = len(keep)
        total = sum(1 for _ in _lines(self.path))
        if total != len(keep) or not _ends_with_newline(self.path):
            self.dropped = total - len(keep)
            _replace(self.path, keep, fsync=self.fsync)

    # ----------------------------------------------------------------- writing

    def open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.path.open("a", encoding="utf-8")

    def write(self, result: ItemResult) -> None:
        """Append one item's line, flushed (fsynced with ``fsync``)."""
        assert self._file is not None
        record = valid_record(result.as_record())
        self._file.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
        self._file.flush()
        if self.fsync:
            os.fsync(self._file.fileno())

    def close(self) -> None:
        if self._file is not None:
            if self.fsync:
                os.fsync(self._file.fileno())
            self._file.close()
            self._file = None

    def put_in_order(self, index: InputIndex) -> bool:
        """Rewrite the file in input order if it is not (one atomic replace); whether it did."""
        orders = [(index.order(record or {}), number) for number, _, record in _lines(self.path)]
        if all(a <= b for a, b in itertools.pairwise(orders)):
            return False
        lines = {number: line for number, line, _ in _lines(self.path)}
        _replace(self.path, [lines[number] for _, number in sorted(orders)], fsync=self.fsync)
        return True


def _lines(path: Path) -> Iterator[tuple[int, str, dict[str, Any] | None]]:
    """Each non-blank line: its number, its text (with newline), its record (None: not JSON)."""
    with path.open(encoding="utf-8", errors="surrogateescape") as file:
        for number, line in enumerate(file, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                record = None
            if record is None and not line.endswith("\n"):
                return  # a torn last line: what a kill mid-write leaves
            yield number, line if line.endswith("\n") else line + "\n", record


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
        return f"id {record['id']!r} has another input now (input line {entry[0]})"
    return None


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as file:
        file.seek(-1, os.SEEK_END)
        return file.read(1) == b"\n"


def _replace(path: Path, lines: list[str], *, fsync: bool) -> None:
    temporary = path.with_name(path.name + ".tmp")
    with temporary.open("w", encoding="utf-8", errors="surrogateescape") as file:
        file.writelines(lines)
        file.flush()
        if fsync:
            os.fsync(file.fileno())
    os.replace(temporary, path)
