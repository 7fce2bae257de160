"""Writing the runner's own files without leaving them half-written, and disk errors as one sentence.

A full disk, a read-only folder or a missing permission is not a bug of the runner: it is a
``StorageError`` naming the path and what was written there (``storage_error``), so every door
shows it as one line with exit 1. What this module writes is whole or not there:

- ``LineFile`` grows a file by whole lines (transcripts, a batch's output): a line that cannot be
  written whole is taken back (the file is cut to where it was), and a file it created without
  getting a line into it is removed;
- ``replace_atomically`` writes a temporary file beside the target and renames it over; when
  anything fails the temporary file is removed and the target is as it was;
- ``check_writable`` creates, writes and removes a small file in a folder, so that a command can
  refuse a folder it will not be able to write before it spends anything (a model call).
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from runner.errors import StorageError

__all__ = ["LineFile", "check_writable", "replace_atomically", "storage_error"]

_REASONS = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "the disk quota is exceeded",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "not permitted (an immutable file or folder?)",
    errno.ENOTDIR: "a part of the path is not a folder",
    errno.EISDIR: "it is a folder",
    errno.EEXIST: "a file is in the way of a folder",
    errno.EFBIG: "the file is too large",
    errno.EIO: "an input/output error of the device",
}
_HINTS = {
    errno.ENOSPC: "free some space (or point it elsewhere), then run the command again",
    errno.EDQUOT: "free some space (or point it elsewhere), then run the command again",
}


def storage_error(exc: OSError, path: Path | str, *, what: str, verb: str = "write") -> StorageError:
    """``exc`` (raised writing ``path``) as a ``StorageError``: ``cannot VERB WHAT PATH: REASON``."""
    reason = _REASONS.get(exc.errno or 0) or exc.strerror or type(exc).__name__
    where = exc.filename if isinstance(exc.filename, str) and exc.filename != str(path) else None
    detail = f"{reason} ({where})" if where else reason
    hint = _HINTS.get(exc.errno or 0)
    return StorageError(f"cannot {verb} {what} {path}: {detail}", path=str(path), hint=hint)


def check_writable(folder: Path, *, what: str) -> None:
    """Raise ``StorageError`` unless a file can be created and written in ``folder`` (made if missing).

    A few bytes are written and the file removed: a full disk refuses even those.
    """
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle, name = tempfile.mkstemp(prefix=".runner-probe-", dir=folder)
        try:
            os.write(handle, b"runner\n")
        finally:
            os.close(handle)
            os.unlink(name)
    except OSError as exc:
        raise storage_error(exc, folder, what=what) from None


class LineFile:
    """A file that grows by whole lines, appended (one ``write`` call each; fsynced with ``fsync``)."""

    def __init__(self, path: Path, *, what: str, fsync: bool = False) -> None:
        self.path = path
        self.what = what
        """What the file is, for the error message (``the transcript``, ``the batch output``)."""
        self.fsync = fsync
        self._fd: int | None = None
        self._size = 0
        self._created = False

    @property
    def is_open(self) -> bool:
        return self._fd is not None

    def open(self) -> None:
        """Open for appending, creating the file (and its folders) when missing."""
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            try:
                self._fd = os.open(self.path, flags | os.O_EXCL, 0o666)
                self._created = True
            except FileExistsError:
                self._fd = os.open(self.path, flags)
            self._size = os.fstat(self._fd).st_size
        except OSError as exc:
            self._drop()
            raise storage_error(exc, self.path, what=self.what) from None

    def write(self, data: bytes) -> None:
        """Append ``data`` (whole lines) or nothing: on a failure it is taken back and this raises."""
        if self._fd is None:
            self.open()
        assert self._fd is not None
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view) :]
            if self.fsync:
                os.fsync(self._fd)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, self._size)
            if self._size == 0 and self._created:
                self._drop()
            raise storage_error(exc, self.path, what=self.what) from None
        self._size += len(data)

    def close(self) -> None:
        """Close the file (fsynced first with ``fsync``)."""
        handle, self._fd = self._fd, None
        if handle is None:
            return
        try:
            if self.fsync:
                os.fsync(handle)
        except OSError as exc:
            raise storage_error(exc, self.path, what=self.what) from None
        finally:
            os.close(handle)

    def _drop(self) -> None:
        """Close, and remove the file when this created it (nothing of anyone's is in it)."""
        handle, self._fd = self._fd, None
        if handle is not None:
            os.close(handle)
        if self._created:
            self._created = False
            with contextlib.suppress(OSError):
                self.path.unlink()


def replace_atomically(path: Path, chunks: Iterable[bytes], *, what: str, fsync: bool = False) -> None:
    """Make ``path`` hold ``chunks``: written to ``path.tmp`` beside it, then renamed over it.

    On any failure the temporary file is removed, ``path`` is as it was, and a disk error raises
    ``StorageError``.
    """
    temporary = path.with_name(path.name + ".tmp")
    try:
        with temporary.open("wb") as file:
            for chunk in chunks:
                file.write(chunk)
            file.flush()
            if fsync:
                os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            temporary.unlink()
        if isinstance(exc, OSError):
            raise storage_error(exc, path, what=what) from None
        raise
