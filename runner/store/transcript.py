"""Transcripts: ``$RUNNER_HOME/sessions/<id>.jsonl``, one JSON record per line (SPEC section 12).

Line 1 is the header (session, agent file and its sha256, git commit and dirty flag, runner
version, model, start time); then ``message`` and ``event`` records, each appended and flushed
as it happens (and fsynced when asked), so a ``kill -9`` loses at most the message being
generated. Secrets are replaced by ``***`` before anything is written.

Two events shape how the history is read back: ``prompt`` marks the system message record that
follows it as the system prompt (a later one replaces it), and ``tool_start`` records a call whose
tool started while its reply was still streaming, so that a crash before the reply was complete
still leaves that call in the history (a resume answers it).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import secrets as _secrets
import subprocess
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.agentfile.revisions import revision_of
from runner.errors import RunnerError
from runner.redact import REDACTED, Redactor
from runner.store.disk import LineFile, storage_error
from runner.store.json_lines import json_lines
from runner.store.message_lines import lines_at, message_record
from runner.text import utf8
from runner.version import __version__

__all__ = [
    "MESSAGE_KEYS",
    "REDACTED",
    "Redactor",
    "Transcript",
    "TranscriptWriter",
    "file_sha256",
    "find_transcript",
    "git_signature",
    "git_state",
    "list_transcripts",
    "new_session_id",
    "now_iso",
    "read_transcript",
    "read_what_can_be_read",
    "sessions_dir",
]


def new_session_id() -> str:
    """A sortable, unique session id: UTC time plus 48 random bits (no collision at thousands a second)."""
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{_secrets.token_hex(6)}"


def now_iso() -> str:
    """The current UTC time in ISO 8601 with milliseconds."""
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="milliseconds")


def file_sha256(path: Path) -> str:
    """The sha256 of a file's bytes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def git_state(path: Path) -> dict[str, Any] | None:
    """The commit of the repository holding ``path`` and whether that file is dirty; None outside git.

    A file of a revision's tree (``--rev``, ``git+``) is that revision's commit, never dirty.
    """
    revision = revision_of(path)
    if revision is not None:
        return {"commit": revision.commit, "dirty": False}
    try:
        directory = str(path.parent)
        commit = subprocess.run(
            ["git", "-C", directory, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5
        )
        if commit.returncode != 0:
            return None
        status = subprocess.run(
            ["git", "-C", directory, "status", "--porcelain", "--", str(path)],
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": commit.stdout.strip(), "dirty": bool(status.stdout.strip())}


def git_signature(path: Path) -> tuple[int, ...]:
    """Cheap stand-in for ``git_state``: the mtimes of the files a commit or a checkout rewrites.

    Found by walking up from ``path`` to a ``.git`` folder: ``HEAD``, ``index``, the branch ref HEAD
    names and ``packed-refs`` (0 for any that is missing). Equal signatures mean ``git_state`` would
    most likely answer the same; ``()`` outside a repository (or in a worktree's ``.git`` file).
    """
    for folder in (path.parent, *path.parent.parents):
        git_dir = folder / ".git"
        if git_dir.exists():
            break
    else:
        return ()
    if not git_dir.is_dir():  # a worktree or submodule: its .git is a file pointing elsewhere
        return ()
    names = ["HEAD", "index", "packed-refs"]
    try:
        head = (git_dir / "HEAD").read_text(encoding="utf-8").strip()
    except OSError:
        head = ""
    if head.startswith("ref: "):
        names.append(head[5:])
    signature = []
    for name in names:
        try:
            signature.append((git_dir / name).stat().st_mtime_ns)
        except OSError:
            signature.append(0)
    return tuple(signature)


@dataclass
class TranscriptWriter:
    """Appends records to one session's JSONL file."""

    path: Path
    redact: Redactor = field(default_factory=lambda: Redactor(()))
    fsync: bool = False
    _file: LineFile | None = None

    def open(self) -> None:
        """Open for appending (creating folders as needed); a disk error is a ``StorageError``."""
        self._file = LineFile(self.path, what="the transcript", fsync=self.fsync)
        try:
            cut = _cut_torn_line(self.path)
        except OSError as exc:
            raise storage_error(exc, self.path, what="the transcript") from None
        self._file.open()
        if cut:  # never write after a fragment: it would make the next line unreadable too
            self.write({"type": "event", "event": "repaired", "time": now_iso(), "data": {"cut_bytes": cut}})

    def write(self, record: dict[str, Any]) -> None:
        """Append one record and flush it to the OS (and to disk with ``fsync``).

        A record is written whole or not at all: on a full disk or a read-only folder this raises
        ``StorageError`` naming the file, and a transcript that got no line is removed.
        """
        if self._file is None:
            self.open()
        assert self._file is not None
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str)
        if self.redact.found_in(line):  # rare: only then walk the record's strings one by one
            line = json.dumps(
                self.redact.record(record), ensure_ascii=False, separators=(",", ":"), default=str
            )
            line = self.redact(line)  # again: values only ``default=str`` could show
        self._file.write(utf8(line + "\n"))

    def write_many(self, records: list[dict[str, Any]], *, strict: bool = False) -> None:
        """Append ``records`` in one write (all or none): a restored history of hundreds of
        messages costs one system call, not one each. ``strict``: a text holding a lone surrogate
        raises ``UnicodeEncodeError`` before anything is written (else it is written as U+FFFD)."""
        if not records:
            return
        blob = "\n".join(json_lines(records)) + "\n"
        self._append(blob, blob.encode("utf-8") if strict else utf8(blob), lambda: records)

    def _append(self, blob: str, data: bytes, records: Callable[[], Iterable[dict[str, Any]]]) -> None:
        """Append ``data`` (``blob`` encoded) in one write; when ``blob`` holds a secret, each of
        ``records()`` on its own instead, redacted (rare)."""
        if self.redact.found_in(blob):
            for record in records():
                self.write(record)
            return
        if self._file is None:
            self.open()
        assert self._file is not None
        self._file.write(data)

    def header(self, **fields: Any) -> None:
        """Write the header record (line 1)."""
        self.write(
            {"type": "header", "format": 1, "runner_version": __version__, "started_at": now_iso(), **fields}
        )

    def message(self, message: dict[str, Any], **extra: Any) -> None:
        """Write a message record: the OpenAI message fields plus time (and usage, reasoning...)."""
        self.write(message_record(message, now_iso(), extra))

    def messages(
        self, messages: list[tuple[dict[str, Any], dict[str, Any]]], *, strict: bool = False
    ) -> None:
        """Write message records (each message with its extra fields) in one write, at one time
        (``strict`` as ``write_many``)."""
        time = now_iso()
        self.write_many([message_record(message, time, extra) for message, extra in messages], strict=strict)

    def message_lines(
        self, tails: Sequence[str], records: Iterable[tuple[dict[str, Any], dict[str, Any]]]
    ) -> None:
        """Write message records encoded already (``message_lines.record_tails`` of ``records``,
        valid UTF-8) in one write, at one time: what ``messages(records)`` writes, without
        encoding them again."""
        time = now_iso()
        blob = lines_at(tails, time)
        if not blob:
            return

        def made() -> Iterator[dict[str, Any]]:
            return (message_record(message, time, extra) for message, extra in records)

        self._append(blob, blob.encode("utf-8"), made)

    def prompt(self, message: dict[str, Any]) -> None:
        """Write the system prompt: a ``prompt`` event marking the system message record that follows.

        The mark tells the prompt apart from system messages that hooks add to the history; a
        prompt rendered again (new variables, a reload) replaces the earlier one when read back.
        """
        self.event("prompt")
        self.message(message)

    def event(self, name: str, **data: Any) -> None:
        """Write an event record (reload, compress, limit, hook, error, interrupt, ...)."""
        self.write({"type": "event", "event": name, "time": now_iso(), "data": data})

    def close(self) -> None:
        """Close the file."""
        file, self._file = self._file, None
        if file is not None:
            file.close()


MESSAGE_KEYS = ("role", "content", "tool_calls", "tool_call_id", "name")
#: The events that decide a session's status: a turn that starts, and the ways one ends early.
_TURN_STATUS = {"turn": "done", "error": "failed", "interrupt": "interrupted", "limit": "limit"}


@dataclass
class Transcript:
    """A transcript read back: header, messages in OpenAI form, and events."""

    path: Path
    header: dict[str, Any]
    records: list[dict[str, Any]]

    @property
    def session_id(self) -> str:
        return str(self.header.get("session_id", self.path.stem))

    def messages(self) -> list[dict[str, Any]]:
        """The conversation as the model saw it: the system prompt (if any), then the history."""
        prompt, history, _ = self._replay()
        return [prompt, *history] if prompt is not None else history

    def system_prompt(self) -> dict[str, Any] | None:
        """The system prompt the session used last, or None."""
        return self._replay()[0]

    def history(self) -> list[dict[str, Any]]:
        """The history without the system prompt (undone turns removed)."""
        return self._replay()[1]

    def error_call_ids(self) -> set[str]:
        """The call ids of tool results recorded as errors (context compression keeps those)."""
        return self._replay()[2]

    def turns(self) -> int | None:
        """How many turns the session counted last (``turn`` and ``undo`` events), or None if unrecorded."""
        count: int | None = None
        for record in self.events():
            data = record.get("data") or {}
            if record.get("event") in ("turn", "undo") and "turn" in data:
                count = int(data["turn"])
        return count

    def _replay(self) -> tuple[dict[str, Any] | None, list[dict[str, Any]], set[str]]:
        marked = any(r.get("type") == "event" and r.get("event") == "prompt" for r in self.records)
        prompt: dict[str, Any] | None = None
        history: list[dict[str, Any]] = []
        errors: set[str] = set()
        next_is_prompt = False
        started: list[dict[str, Any]] = []  # calls whose tools started while their reply streamed
        for record in self.records:
            if record.get("type") == "message":
                started = []
                message = {k: record[k] for k in MESSAGE_KEYS if k in record}
                if message.get("role") == "tool":
                    message.pop("name", None)  # recorded for readers; never sent back
                # Without prompt marks (older files), a leading system message is the prompt.
                legacy = not marked and prompt is None and not history and message.get("role") == "system"
                if next_is_prompt or legacy:
                    prompt, next_is_prompt = message, False
                    continue
                history.append(message)
                if record.get("is_error") and record.get("tool_call_id"):
                    errors.add(str(record["tool_call_id"]))
            elif record.get("type") == "event":
                name = record.get("event")
                if name == "prompt":
                    next_is_prompt = True
                elif name == "tool_start" and isinstance((record.get("data") or {}).get("call"), dict):
                    started.append(record["data"]["call"])
                elif name == "undo":
                    # ``keep`` counts the prompt (when there is one) and the history kept.
                    data = record.get("data") or {}
                    keep = int(data.get("keep", len(history) + (prompt is not None)))
                    del history[max(0, keep - (prompt is not None)) :]
        if started:
            # The process died while the reply was streaming, after these tools had started: the
            # history keeps their calls (a resume answers them) so the model knows they may have run.
            history.append({"role": "assistant", "content": None, "tool_calls": started})
        return prompt, history, errors

    def status(self) -> str:
        """How the session's last turn ended: ``done``, ``failed``, ``interrupted`` or ``limit``.

        A turn is ``done`` only when it ended: a ``turn_end`` event (or, in files older than that
        event, a history that does not wait for the model). ``interrupted`` covers a process that died
        mid-turn, in its first model call too (its history waits for the model). A workflow's
        transcript says how its last run ended (``workflow_end``), ``interrupted`` when none ended it.
        """
        if "workflow" in self.header:
            ends = [
                r.get("data") or {} for r in self.events() if r.get("event") in ("workflow_end", "resume")
            ]
            if not ends or "status" not in ends[-1]:
                return "interrupted"
            return {"ok": "done", "error": "failed"}.get(str(ends[-1]["status"]), str(ends[-1]["status"]))
        status, unended = "done", False
        for record in self.events():
            name = record.get("event")
            if name in _TURN_STATUS:
                status, unended = _TURN_STATUS[name], name == "turn"
            elif name == "turn_end":
                unended = False
        if status == "done":
            messages = self.messages()
            last = messages[-1] if messages else {}
            waits = last.get("role") == "tool" or bool(last.get("tool_calls"))
            if waits or (unended and last.get("role") == "user"):  # killed before the model answered
                status = "interrupted"
        return status

    def events(self) -> Iterator[dict[str, Any]]:
        """Event records in order."""
        return (r for r in self.records if r.get("type") == "event")


def _cut_torn_line(path: Path) -> int:
    """Cut a last line left without its newline (a process killed mid-write); the bytes cut."""
    try:
        with path.open("rb+") as file:
            size = file.seek(0, os.SEEK_END)
            if size == 0:
                return 0
            file.seek(size - 1)
            if file.read(1) == b"\n":
                return 0
            end = size
            while end > 0:  # back to the last newline, a block at a time
                start = max(0, end - 65536)
                file.seek(start)
                block = file.read(end - start)
                newline = block.rfind(b"\n")
                if newline >= 0:
                    keep = start + newline + 1
                    break
                end = start
            else:
                keep = 0
            file.truncate(keep)
            return size - keep
    except FileNotFoundError:
        return 0


def read_transcript(path: Path) -> Transcript:
    """Read a transcript; a torn last line (a crash mid-write) is ignored."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise RunnerError(f"no transcript at {path}") from None
    records = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            if number == len(lines):
                break  # the record being written when the process died
            raise RunnerError(f"{path}:{number}: corrupt transcript line") from None
    if not records or records[0].get("type") != "header":
        raise RunnerError(f"{path}: not a runner transcript (no header line)")
    return Transcript(path, records[0], records[1:])


_UNREADABLE = object()


def _parsed(line: str) -> Any:
    try:
        return json.loads(line)
    except (ValueError, RecursionError):
        return _UNREADABLE


def read_what_can_be_read(path: Path) -> tuple[Transcript, list[str]]:
    """A transcript read as far as it goes, and what was skipped (for pages that show what they can).

    Unlike ``read_transcript``, a corrupt line in the middle, a line that is not a record, a missing
    header or another format version are not errors: each is skipped (or taken as it is) and named.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise RunnerError(f"no transcript at {path}") from None
    except OSError as exc:
        raise storage_error(exc, path, what="the transcript") from None
    skipped: list[str] = []
    records: list[dict[str, Any]] = []
    text = data.decode("utf-8", errors="replace")
    lines = text.split("\n")
    torn = bool(lines and lines[-1].strip())  # no newline after the last line: a write cut short
    numbered = [(number, line) for number, line in enumerate(lines, 1) if line.strip()]
    try:  # every line at once (a long session reads in a fraction of the time); else line by line
        parsed: list[Any] = json.loads("[" + ",".join(line for _, line in numbered) + "]")
    except (ValueError, RecursionError):
        parsed = [_parsed(line) for _, line in numbered]
    if len(parsed) != len(numbered):  # a line held two values (``1,2``): read them one by one
        parsed = [_parsed(line) for _, line in numbered]
    for (number, _), record in zip(numbered, parsed, strict=True):
        if record is _UNREADABLE:
            last = torn and number == len(lines)
            skipped.append(f"line {number}: " + ("a torn last line (cut mid-write)" if last else "not JSON"))
            continue
        if not isinstance(record, dict) or record.get("type") not in ("header", "message", "event"):
            skipped.append(f"line {number}: not a transcript record")
            continue
        records.append(record)
    header: dict[str, Any] = {}
    if records and records[0].get("type") == "header":
        header = records.pop(0)
        if header.get("format", 1) != 1:
            skipped.append(
                f"header: format {header.get('format')!r} (this runner reads format 1; shown as is)"
            )
    else:
        skipped.append("no header line: a partial file or not a runner transcript")
    return Transcript(path, header, records), skipped


def sessions_dir(home: Path) -> Path:
    """Where transcripts live under ``RUNNER_HOME``."""
    return home / "sessions"


#: How many of the sessions an ambiguous id prefix matches the error lists (the newest).
AMBIGUOUS_SHOWN = 5


def find_transcript(home: Path, session_id: str) -> Path:
    """The transcript of ``session_id`` (a unique prefix is enough)."""
    folder = sessions_dir(home)
    exact = folder / f"{session_id}.jsonl"
    if exact.is_file():
        return exact
    matches = sorted(folder.glob(f"{session_id}*.jsonl")) if folder.is_dir() else []
    if len(matches) == 1:
        return matches[0]
    if matches:
        newest = [p.stem for p in reversed(matches[-AMBIGUOUS_SHOWN:])]
        more = len(matches) - len(newest)
        lines = [
            f"session id '{session_id}' is ambiguous: {len(matches)} sessions begin with it"
            + (f"; the {len(newest)} newest:" if more else ":"),
            *(f"  {stem}" for stem in newest),
            *([f"  ... and {more} more"] if more else []),
            "give more of the id (runner sessions list shows them)",
        ]
        raise RunnerError("\n".join(lines))
    raise RunnerError(f"no session '{session_id}' in {folder}", hint="runner sessions list")


def list_transcripts(home: Path) -> list[Path]:
    """Every transcript, oldest first (ids begin with their start time)."""
    folder = sessions_dir(home)
    return sorted(folder.glob("*.jsonl")) if folder.is_dir() else []
