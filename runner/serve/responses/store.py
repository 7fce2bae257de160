"""Stored responses: one JSON file per response under ``RUNNER_HOME/serve/responses``.

A record holds the response object, the input items of its request, the digest of the API key
that created it (``conversations.owner_tag``, never the key), the session whose transcript the run
wrote (``RUNNER_HOME/sessions``: ``runner sessions list/show`` see it) and **the whole conversation
at that response** as chat messages. Continuing by ``previous_response_id`` therefore reads one
file, whatever the chain's depth (nothing is replayed), and two requests that continue the same
response each start from that state: two branches, neither touching the other's file.

- A record is written atomically (a temporary file renamed over it): a kill -9 leaves the old
  file or none, and a leftover ``.tmp`` is never read.
- Every miss — an id of the wrong shape, unknown, deleted, or created with another key — is the
  same ``ResponseNotFound`` (the door answers 404 without saying whether the id exists).
- A record that cannot be read (corrupt, cut short by hand) is ``StoredResponseUnreadable``; the
  other records are untouched.
- The records read or written last are kept in memory (``RecentResponses``: up to 8 MiB of their
  files), each with the identity of its file (inode, size, mtime): a continuation right after its
  response neither reads nor parses it again, and a file replaced, edited or deleted behind the
  server's back is read again (or missed) as before. What the door derives from a record (its
  checked, converted conversation) is kept with it (``StoredResponse.derived``).
- A record can be findable before it is on disk: ``stage`` puts it among the records being
  written, which ``recall``, ``load`` and ``delete`` consult first, and ``save`` (in a worker
  thread, after the answer went out) moves it to ``recent`` once its file is there. A ``delete``
  meanwhile leaves a mark: the write's file is removed when it lands, and the id misses until
  then. A write that fails drops the record (its id then misses as an unknown one).
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from runner.errors import RunnerError, StorageError
from runner.serve.conversations import owner_tag
from runner.store.disk import replace_atomically

__all__ = ["ResponseNotFound", "ResponseStore", "StoredResponse", "StoredResponseUnreadable"]

_ID = re.compile(r"resp_[0-9a-f]{32}")


class ResponseNotFound(RunnerError):
    """No stored response a caller may read under that id."""


class StoredResponseUnreadable(RunnerError):
    """The stored response exists but its file cannot be read (corrupt, cut short)."""


@dataclass(frozen=True)
class StoredResponse:
    """One stored response: what ``GET`` answers and what ``previous_response_id`` continues."""

    response: dict[str, Any]
    input_items: list[dict[str, Any]]
    #: The conversation at this response (chat messages, this answer included).
    messages: list[dict[str, Any]]
    session_id: str | None
    owner: str
    #: The user texts of the conversation as the agent's user template rendered them (by text), and
    #: the agent file's version they were rendered for: a continuation renders only its new texts.
    rendered: dict[str, dict[str, Any]] | None = None
    rendered_key: str | None = None
    #: The size of its file (what a continuation weighs: a small one is parsed on the event loop).
    size: int = 0
    #: What the door derived from it, kept with it while it stays in memory (never written).
    derived: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def record(self) -> dict[str, Any]:
        return {
            "version": 1,
            "id": self.response["id"],
            "owner": self.owner,
            "session_id": self.session_id,
            "response": self.response,
            "input_items": self.input_items,
            "messages": self.messages,
            "rendered": {"key": self.rendered_key, "texts": self.rendered or {}},
        }


#: The stored records kept in memory, counted by the size of their files (the parsed objects weigh
#: a few times more): a conversation of a few hundred turns is 20-100 KB.
RECENT_BYTES = 8 * 1024 * 1024

_Stamp = tuple[int, int, int]


def _stamp(path: Path) -> _Stamp | None:
    """The identity of a record's file (None: there is none): a replaced or edited file differs."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_ino, info.st_size, info.st_mtime_ns)


class RecentResponses:
    """The records read or written last, by id, each with its file's stamp; the least recently
    used go first once they weigh more than ``limit`` bytes. Thread-safe (loads and saves run in
    worker threads too)."""

    def __init__(self, limit: int = RECENT_BYTES) -> None:
        self.limit = limit
        self._entries: OrderedDict[str, tuple[_Stamp, StoredResponse]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, response_id: str, stamp: _Stamp) -> StoredResponse | None:
        with self._lock:
            entry = self._entries.get(response_id)
            if entry is None or entry[0] != stamp:
                return None
            self._entries.move_to_end(response_id)
            return entry[1]

    def put(self, response_id: str, stamp: _Stamp, stored: StoredResponse) -> None:
        with self._lock:
            self._drop(response_id)
            if stamp[1] > self.limit:
                return
            self._entries[response_id] = (stamp, stored)
            self._bytes += stamp[1]
            while self._bytes > self.limit:
                self._drop(next(iter(self._entries)))

    def forget(self, response_id: str) -> None:
        with self._lock:
            self._drop(response_id)

    def _drop(self, response_id: str) -> None:
        entry = self._entries.pop(response_id, None)
        if entry is not None:
            self._bytes -= entry[0][1]

    def __len__(self) -> int:
        return len(self._entries)


class ResponseStore:
    """The responses one server stored, under ``home``."""

    def __init__(self, home: Path, *, recent_bytes: int = RECENT_BYTES) -> None:
        self.folder = home / "serve" / "responses"
        self._made = False
        self.recent = RecentResponses(recent_bytes)
        #: The records staged and not yet written, by id (None: deleted while it was written).
        self._pending: dict[str, StoredResponse | None] = {}
        self._lock = threading.Lock()

    def _path(self, response_id: str) -> Path | None:
        return self.folder / f"{response_id}.json" if _ID.fullmatch(response_id) else None

    def stage(self, stored: StoredResponse) -> None:
        """Make ``stored`` findable at once (``recall``, ``load``, ``delete``) before ``save``
        writes it; its ``size`` is not known until then (0)."""
        with self._lock:
            self._pending[stored.response["id"]] = stored

    def staged(self) -> list[StoredResponse]:
        """The records staged whose write has not ended (deleted ones left out)."""
        with self._lock:
            return [stored for stored in self._pending.values() if stored is not None]

    def _staged(self, response_id: str, key: str | None) -> StoredResponse | None:
        """The staged record of ``response_id`` (None: not staged; ``ResponseNotFound`` when it was
        deleted meanwhile or is another key's). Called with the lock held."""
        if response_id not in self._pending:
            return None
        stored = self._pending[response_id]
        if stored is None or stored.owner != owner_tag(key):
            raise ResponseNotFound(f"Response with id '{response_id[:80]}' not found.")
        return stored

    def save(self, stored: StoredResponse) -> None:
        """Write ``stored`` (atomically); ``StorageError`` when the disk refuses (a staged record
        is dropped then). A staged record deleted meanwhile is removed again once written."""
        response_id = stored.response["id"]
        try:
            path, size = self._write(stored)
        except BaseException:
            with self._lock:
                self._pending.pop(response_id, None)
            raise
        stamp = _stamp(path)
        with self._lock:
            deleted = response_id in self._pending and self._pending[response_id] is None
            if not deleted:
                self._pending.pop(response_id, None)
                if stamp is not None:  # as a load would find it (its size is its file's)
                    self.recent.put(response_id, stamp, replace(stored, size=size))
                return
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:  # the mark stays: the id misses for as long as this server runs
            raise StorageError(f"cannot delete {path}: {exc.strerror or exc}") from None
        with self._lock:
            self._pending.pop(response_id, None)

    def _write(self, stored: StoredResponse) -> tuple[Path, int]:
        path = self._path(stored.response["id"])
        assert path is not None
        if not self._made:
            try:
                self.folder.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StorageError(f"cannot create {self.folder}: {exc.strerror or exc}") from None
            self._made = True
        data = json.dumps(stored.record(), ensure_ascii=False, separators=(",", ":"))
        encoded = data.encode("utf-8", "replace")
        try:
            replace_atomically(path, [encoded], what="the stored response")
        except StorageError:
            self._made = False  # the folder may be gone: the next write makes it again
            raise
        return path, len(encoded)

    def recall(self, response_id: str, key: str | None) -> StoredResponse | None:
        """The record of ``response_id`` if it is in memory and its file unchanged (one ``stat``);
        None when it has to be read (``ResponseNotFound`` as ``load`` for another key's)."""
        with self._lock:
            staged = self._staged(response_id, key)
        if staged is not None:
            return staged
        path = self._path(response_id)
        stamp = _stamp(path) if path is not None else None
        stored = self.recent.get(response_id, stamp) if stamp is not None else None
        if stored is not None and stored.owner != owner_tag(key):
            raise ResponseNotFound(f"Response with id '{response_id[:80]}' not found.")
        return stored

    def is_small(self, response_id: str, limit: int) -> bool:
        """Whether the record of ``response_id`` is at most ``limit`` bytes (or missing: a miss is
        answered at once), so that reading it costs less than a thread hand-off."""
        path = self._path(response_id)
        if path is None:
            return True
        try:
            return path.stat().st_size <= limit
        except OSError:
            return True

    def load(self, response_id: str, key: str | None) -> StoredResponse:
        """The response ``key`` stored as ``response_id``; ``ResponseNotFound`` for every miss."""
        with self._lock:
            staged = self._staged(response_id, key)
        if staged is not None:
            return staged
        missing = ResponseNotFound(f"Response with id '{response_id[:80]}' not found.")
        path = self._path(response_id)
        stamp = _stamp(path) if path is not None else None
        if path is None or stamp is None:
            raise missing
        kept = self.recent.get(response_id, stamp)
        if kept is not None:
            if kept.owner != owner_tag(key):
                raise missing
            return kept
        try:
            raw = path.read_bytes()
        except OSError:
            raise missing from None
        try:
            record = json.loads(raw)
            rendered = record.get("rendered") or {}
            stored = StoredResponse(
                response=record["response"],
                input_items=record["input_items"],
                messages=record["messages"],
                session_id=record.get("session_id"),
                owner=record["owner"],
                rendered=rendered.get("texts"),
                rendered_key=rendered.get("key"),
                size=len(raw),
            )
            valid = (
                isinstance(stored.rendered, dict | None)
                and isinstance(stored.response, dict)
                and isinstance(stored.messages, list)
                and isinstance(stored.input_items, list)
            )
        except (ValueError, KeyError, TypeError):
            valid = False
        if not valid:
            raise StoredResponseUnreadable(
                f"the stored response '{response_id}' cannot be read (its file is damaged); "
                "other responses are not affected"
            )
        if len(raw) == stamp[1]:  # else it changed while it was read: the next load reads it again
            self.recent.put(response_id, stamp, stored)
        if stored.owner != owner_tag(key):
            raise missing
        return stored

    def delete(self, response_id: str, key: str | None) -> None:
        """Remove the response ``key`` stored (``ResponseNotFound`` as ``load``); one still being
        written is marked, and its file removed as soon as it is written (``save``)."""
        with self._lock:
            if self._staged(response_id, key) is not None:
                self._pending[response_id] = None
                return
        try:
            self.load(response_id, key)
        except StoredResponseUnreadable:
            if key is not None:  # its owner cannot be read: only a server without keys deletes it
                raise ResponseNotFound(f"Response with id '{response_id[:80]}' not found.") from None
        path = self._path(response_id)
        assert path is not None
        self.recent.forget(response_id)
        try:
            path.unlink()
        except FileNotFoundError:
            raise ResponseNotFound(f"Response with id '{response_id[:80]}' not found.") from None
        except OSError as exc:
            raise StorageError(f"cannot delete {path}: {exc.strerror or exc}") from None
