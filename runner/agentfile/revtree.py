"""A commit's files on disk: written from git's objects, and checked to be exactly them before use.

``snapshot`` is what a commit's tree must hold: every file (path, mode, blob id) and every symbolic
link that stays inside it, all read from objects checked against their ids (``gitobjects``).
``write_tree`` writes it, streaming each blob in bounded pieces (a 400 MB blob costs one piece of
memory, not the blob). ``difference`` walks a tree on disk and says how it differs from the snapshot:
an added, missing or changed file, folder or link, a file whose content does not hash to its blob id,
a changed mode, a hard link (its content could change from outside the tree). Nothing about the
files' sizes or times is trusted: every byte is hashed, like ``git hash-object``.

Python writes ``__pycache__`` folders next to the modules it imports; a ``__pycache__`` the commit does
not have is removed rather than counted as a difference (a planted ``.pyc`` would otherwise be run
instead of the committed source).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from runner.agentfile.gitobjects import (
    EXECUTABLE,
    LINK,
    Entry,
    ObjectReader,
    blob_id,
    kept_links,
    listing,
)

__all__ = ["Snapshot", "difference", "snapshot", "write_tree"]

_PYCACHE = "__pycache__"
_MAX_LINK_BYTES = 4096


@dataclass(frozen=True)
class Snapshot:
    """A commit's tree as it must appear on disk."""

    commit: str
    files: dict[str, Entry]
    #: The symbolic links kept (path -> target); links leading out of the tree are left out.
    links: dict[str, str]

    def folders(self) -> set[str]:
        """Every folder that holds a file or a link (git has no empty folders)."""
        return {
            path.rsplit("/", depth)[0]
            for path in [*self.files, *self.links]
            for depth in range(1, path.count("/") + 1)
        }


def snapshot(objects: ObjectReader, commit: str) -> Snapshot:
    """The files and links of ``commit``, from checked objects."""
    files: dict[str, Entry] = {}
    links: dict[str, str] = {}
    for path, entry in listing(objects, commit).items():
        if entry.mode != LINK:
            files[path] = entry
            continue
        target = objects.read(entry.sha, want="blob", limit=_MAX_LINK_BYTES)
        if target:  # a link too long for any system leads nowhere: left out
            links[path] = os.fsdecode(target)
    return Snapshot(commit, files, kept_links(links))


def _mode(entry: Entry) -> int:
    return 0o555 if entry.mode == EXECUTABLE else 0o444


def write_tree(objects: ObjectReader, snap: Snapshot, root: Path) -> None:
    """Write ``snap`` below ``root`` (a new folder), blob by blob in bounded pieces."""
    root.mkdir(parents=True)
    for path, entry in snap.files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("xb") as handle:
            objects.stream(entry.sha, want="blob", sink=handle.write)
        target.chmod(_mode(entry))
    for path, link in snap.links.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to(link)


def difference(root: Path, snap: Snapshot) -> str | None:
    """How the tree at ``root`` differs from ``snap`` (the first difference found); None when it is
    exactly the commit's content."""
    if root.is_symlink() or not root.is_dir():
        return "the tree folder is missing or is a link"
    folders = snap.folders()
    seen: set[str] = set()
    pending = [""]
    while pending:
        folder = pending.pop()
        try:
            entries = list(os.scandir(root / folder if folder else root))
        except OSError as exc:
            return f"cannot read {folder or '.'}: {exc.strerror}"
        for entry in entries:
            path = f"{folder}/{entry.name}" if folder else entry.name
            if entry.is_symlink():
                if snap.links.get(path) != os.readlink(entry.path):
                    return f"{path}: a link the commit does not have"
            elif entry.is_dir():
                if path in folders:
                    pending.append(path)
                elif entry.name == _PYCACHE:
                    shutil.rmtree(entry.path, ignore_errors=True)
                    continue
                else:
                    return f"{path}/: a folder the commit does not have"
            elif (problem := _file_difference(path, entry, snap)) is not None:
                return problem
            seen.add(path)
    missing = sorted((snap.files.keys() | snap.links.keys()) - seen)
    return f"{missing[0]}: missing" if missing else None


def _file_difference(path: str, entry: os.DirEntry[str], snap: Snapshot) -> str | None:
    expected = snap.files.get(path)
    if expected is None:
        return f"{path}: a file the commit does not have"
    if not entry.is_file(follow_symlinks=False):
        return f"{path}: not a regular file"
    try:
        fd = os.open(entry.path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        return f"{path}: {exc.strerror}"
    try:
        status = os.fstat(fd)
        if status.st_mode & 0o7777 != _mode(expected) or status.st_nlink != 1:
            return f"{path}: its mode or links changed"
        if blob_id(fd, status.st_size, like=snap.commit) != expected.sha:
            return f"{path}: its content changed"
    except OSError as exc:
        return f"{path}: {exc.strerror}"
    finally:
        os.close(fd)
    return None
