"""Conversations a door continues by id (an MCP ``session_id``, an A2A ``contextId``, ...).

A served conversation is a session like any other: its transcript under ``RUNNER_HOME/sessions``
(so ``runner sessions list/show`` see it), resumed with ``Session(resume=...)``. This module adds
what a network door needs on top of that:

- **ownership**: ``claim`` records which API key started a conversation (a SHA-256 of the key, never
  the key) as one line appended to ``RUNNER_HOME/serve/owners.jsonl``; ``open`` refuses any other
  key. Without keys every (loopback) caller is the same owner. An append costs microseconds where a
  file per conversation cost a file creation (0.1-0.7 ms on a loaded disk, per new A2A
  ``contextId``); the log is read once, then only what was appended since (another door's, another
  process's); a record of the earlier layout (``owners/ID.json``) still counts. The log grows by
  about 130 bytes per conversation, and each server keeps the owners it has read in memory (about
  as much again per conversation).
- **exact ids**: ``open`` takes a whole session id of the store's shape, never a prefix, so an id
  cannot be guessed piecemeal;
- **one answer for every miss**: an unknown id, another key's id, an id the door never claimed and
  an expired one all raise the same ``ConversationNotFound`` (a door answers its protocol's 404 and
  says nothing about whether the id exists);
- **idle expiry**: with ``idle_s`` (``idle_seconds()``: ``RUNNER_SERVE_CONVERSATION_IDLE_S``, a day
  by default, 0 for never), a conversation whose transcript was last written longer ago is
  not continued (its transcript stays for ``runner sessions``);
- **one turn at a time**: ``lock(id)`` serializes requests that continue the same conversation.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path

from runner.errors import ConfigError, RunnerError, StorageError
from runner.store.transcript import Transcript, read_transcript, sessions_dir

__all__ = ["DEFAULT_IDLE_S", "IDLE_ENV", "ConversationNotFound", "Conversations", "idle_seconds", "owner_tag"]

#: The idle time after which a door no longer continues a conversation (an A2A ``contextId``, an
#: MCP ``session_id``); its transcript stays for ``runner sessions``.
IDLE_ENV = "RUNNER_SERVE_CONVERSATION_IDLE_S"
DEFAULT_IDLE_S = 24 * 3600.0

#: A session id as ``new_session_id`` makes them: UTC stamp and 48 random bits.
_SESSION_ID = re.compile(r"\d{8}-\d{6}-[0-9a-f]{12}")


class ConversationNotFound(RunnerError):
    """No conversation a caller may continue under that id (unknown, another key's, or expired)."""


def idle_seconds(env: dict[str, str] | os._Environ[str] = os.environ) -> float | None:
    """The conversation idle time (``RUNNER_SERVE_CONVERSATION_IDLE_S``; 0: never expires)."""
    raw = env.get(IDLE_ENV, "").strip()
    if not raw:
        return DEFAULT_IDLE_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise ConfigError(f"{IDLE_ENV} must be a number of seconds (0: never), not {raw[:40]!r}")
    return value or None


def owner_tag(key: str | None) -> str:
    """What is stored of the key that started a conversation: its SHA-256, or "" without keys."""
    return hashlib.sha256(key.encode()).hexdigest() if key else ""


class Conversations:
    """The conversations one server's doors continue, under ``home``."""

    def __init__(self, home: Path, *, idle_s: float | None = None, clock: Callable[[], float] = time.time):
        self.home = home
        self.idle_s = idle_s
        self._clock = clock
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()
        self._log = home / "serve" / "owners.jsonl"
        self._owners: dict[str, object] = {}  # session id -> owner tag, as far as the log was read
        self._read_to = 0  # the log's bytes taken in (whole lines)
        self._reading = threading.Lock()  # one reader at a time, whichever thread a door reads from

    def _owner_file(self, session_id: str) -> Path:
        """Where the earlier layout kept one conversation's owner (still read, no longer written)."""
        return self.home / "serve" / "owners" / f"{session_id}.json"

    def claim(self, session_id: str, key: str | None, *, door: str) -> None:
        """Record that ``key`` started ``session_id`` through ``door`` (before its first turn ends)."""
        if not _SESSION_ID.fullmatch(session_id):
            raise RunnerError(f"not a session id: {session_id!r}")
        tag = owner_tag(key)
        record = json.dumps({"session_id": session_id, "owner": tag, "door": door}).encode()
        line = b"\n" + record + b"\n"  # the first newline ends a line a full disk cut short
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
        try:
            try:
                handle = os.open(self._log, flags, 0o600)
            except FileNotFoundError:
                self._log.parent.mkdir(parents=True, exist_ok=True)
                handle = os.open(self._log, flags, 0o600)
            try:
                written = os.write(handle, line)  # one write: two writers' lines never interleave
            finally:
                os.close(handle)
        except OSError as exc:
            raise StorageError(f"cannot write {self._log}: {exc.strerror or exc}") from None
        if written != len(line):
            raise StorageError(f"cannot write {self._log}: the disk took {written} of {len(line)} bytes")
        self._owners[session_id] = tag

    def _owner(self, session_id: str) -> object:
        """The owner tag recorded for ``session_id`` (``None``: none): known, appended to the log
        since it was last read, or in the earlier layout's file."""
        if session_id not in self._owners:
            self._read_log()
        if session_id in self._owners:
            return self._owners[session_id]
        try:
            record = json.loads(self._owner_file(session_id).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return record.get("owner") if isinstance(record, dict) else None

    def _read_log(self) -> None:
        """Take in the log's lines appended since it was last read (a line not ended yet waits)."""
        with self._reading:
            try:
                with self._log.open("rb") as file:
                    file.seek(self._read_to)
                    added = file.read()
            except OSError:
                return
            end = added.rfind(b"\n") + 1
            self._read_to += end
            for raw in added[:end].splitlines():
                try:
                    record = json.loads(raw)
                except ValueError:
                    continue  # a blank line, or one cut short: that conversation is not continued
                if isinstance(record, dict) and isinstance(record.get("session_id"), str):
                    self._owners[record["session_id"]] = record.get("owner")

    def owns(self, session_id: str, key: str | None) -> bool:
        """Whether ``key`` may continue ``session_id`` (claimed by it, and not expired)."""
        if not _SESSION_ID.fullmatch(session_id):
            return False
        if self._owner(session_id) != owner_tag(key):
            return False
        if self.idle_s is None:
            return True
        try:
            written = self._transcript(session_id).stat().st_mtime
        except OSError:
            return False
        return self._clock() - written <= self.idle_s

    def open(self, session_id: str, key: str | None) -> Transcript:
        """The transcript to resume ``session_id`` from; ``ConversationNotFound`` if ``key`` may not."""
        missing = ConversationNotFound(f"no conversation '{session_id[:80]}'")
        if not self.owns(session_id, key):
            raise missing
        try:
            return read_transcript(self._transcript(session_id))
        except RunnerError:
            raise missing from None

    def lock(self, session_id: str) -> asyncio.Lock:
        """The lock that serializes turns of ``session_id`` (held while one runs)."""
        lock = self._locks.get(session_id)
        if lock is None:
            lock = asyncio.Lock()
            self._locks[session_id] = lock
        return lock

    def _transcript(self, session_id: str) -> Path:
        return sessions_dir(self.home) / f"{session_id}.jsonl"
