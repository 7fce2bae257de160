"""A commit's files read from git's object store, each object checked against its name.

git names every object by the hash of its content, so a commit id pins the whole tree below it.
``ObjectReader`` talks to one ``git cat-file --batch`` process and checks that hash for every object
it hands out: the commit, each tree (parsed here, not by ``ls-tree``) and each blob (streamed in
``CHUNK_BYTES`` pieces, hashed as it goes). An object store someone planted (a bare clone under
``RUNNER_HOME`` with forged loose objects) therefore cannot pass for the commit it claims to be.

``listing`` is a commit's files (path -> mode and blob id), ``kept_links`` the symbolic links that stay
inside the tree (decided from the listing alone, so writing and verifying agree), and ``file_blob_id``
``blob_id`` the blob id of a file's content (``git hash-object``).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from runner.errors import ConfigError

__all__ = ["CHUNK_BYTES", "Entry", "ObjectReader", "blob_id", "git_env", "kept_links", "listing", "reader"]

#: How much of a blob is held at a time while it is copied or hashed.
CHUNK_BYTES = 1 << 20
FILE, EXECUTABLE, LINK, FOLDER, SUBMODULE = "100644", "100755", "120000", "40000", "160000"
_MAX_LINK_HOPS = 40


@dataclass(frozen=True)
class Entry:
    """One blob of a commit's tree: its git mode and object id."""

    mode: str
    sha: str


def git_env() -> dict[str, str]:
    """The environment git runs in: no prompts, no locale, no optional locks."""
    return {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", "GIT_OPTIONAL_LOCKS": "0"}


def _hasher(sha: str) -> hashlib._Hash:
    return hashlib.sha256() if len(sha) == 64 else hashlib.sha1()


def _object_hasher(kind: str, size: int, sha: str) -> hashlib._Hash:
    hasher = _hasher(sha)
    hasher.update(f"{kind} {size}\0".encode())
    return hasher


def blob_id(fd: int, size: int, *, like: str) -> str:
    """``git hash-object``: the blob id of the ``size`` bytes the open file ``fd`` holds, in the hash
    of ``like`` (SHA-1 or SHA-256 by its length); a file that turns out longer or shorter gets none."""
    hasher = _object_hasher("blob", size, like)
    while chunk := os.read(fd, CHUNK_BYTES):
        hasher.update(chunk)
        size -= len(chunk)
    return hasher.hexdigest() if size == 0 else ""


class ObjectReader:
    """Objects of one repository through ``git cat-file --batch``, each checked against its id."""

    def __init__(self, git_dir: Path, *, commit: str) -> None:
        self.commit = commit
        try:
            self._process = subprocess.Popen(
                ["git", "cat-file", "--batch"],
                cwd=git_dir,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=git_env(),
            )
        except FileNotFoundError:
            raise ConfigError(
                "git is not installed", hint="install git to use --rev and git+ references"
            ) from None
        assert self._process.stdin is not None and self._process.stdout is not None
        self._in: IO[bytes] = self._process.stdin
        self._out: IO[bytes] = self._process.stdout

    def close(self) -> None:
        """End the git process (it exits when its input closes)."""
        for stream in (self._in, self._out):
            with contextlib.suppress(OSError):
                stream.close()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()

    def _ask(self, sha: str) -> tuple[str, int]:
        try:
            self._in.write(f"{sha}\n".encode())
            self._in.flush()
        except OSError:
            raise self._broken(sha) from None
        header = self._out.readline().split()
        if len(header) != 3 or header[0].decode() != sha:
            raise self._broken(sha)
        return header[1].decode(), int(header[2])

    def _broken(self, sha: str) -> ConfigError:
        return ConfigError(
            f"cannot read object {sha[:12]} of commit {self.commit[:12]} from the repository",
            hint="the repository is incomplete or damaged (git fsck)",
        )

    def _forged(self, sha: str) -> ConfigError:
        return ConfigError(
            f"object {sha[:12]} of commit {self.commit[:12]} does not hash to its id: "
            "the repository's object store was altered",
            hint="delete the cached clone under $RUNNER_HOME/git/repos and fetch again",
        )

    def stream(self, sha: str, *, want: str, sink: Callable[[bytes], object]) -> None:
        """The content of object ``sha`` (of type ``want``) passed to ``sink`` piece by piece; a
        ConfigError, after the last piece, when it does not hash to ``sha``."""
        kind, size = self._ask(sha)
        if kind != want:
            raise ConfigError(f"object {sha[:12]} of commit {self.commit[:12]} is a {kind}, not a {want}")
        hasher = _object_hasher(kind, size, sha)
        left = size
        while left:
            chunk = self._out.read(min(left, CHUNK_BYTES))
            if not chunk:
                raise self._broken(sha)
            hasher.update(chunk)
            sink(chunk)
            left -= len(chunk)
        if self._out.read(1) != b"\n":
            raise self._broken(sha)
        if hasher.hexdigest() != sha:
            raise self._forged(sha)

    def read(self, sha: str, *, want: str, limit: int | None = None) -> bytes | None:
        """The whole content of a small object (a commit, a tree, a link's target); None when it is
        longer than ``limit`` bytes."""
        parts: list[bytes] = []
        size = 0

        def keep(chunk: bytes) -> None:
            nonlocal size
            size += len(chunk)
            if limit is None or size <= limit:
                parts.append(chunk)

        self.stream(sha, want=want, sink=keep)
        return b"".join(parts) if limit is None or size <= limit else None


@contextmanager
def reader(git_dir: Path, commit: str) -> Iterator[ObjectReader]:
    """An ``ObjectReader`` for the objects of ``commit``, closed afterwards."""
    opened = ObjectReader(git_dir, commit=commit)
    try:
        yield opened
    finally:
        opened.close()


def _safe(name: bytes) -> bool:
    return name not in (b"", b".", b"..") and b"/" not in name and b"\0" not in name


def listing(objects: ObjectReader, commit: str) -> dict[str, Entry]:
    """Every blob of ``commit`` by its ``/``-separated path, from trees checked against their ids.

    Submodules are left out (their commits are not in this repository); a name no checkout could
    have (``..``, with a ``/``) is left out with everything below it.
    """
    body = objects.read(commit, want="commit") or b""
    first = body.split(b"\n", 1)[0].split()
    if len(first) != 2 or first[0] != b"tree":
        raise ConfigError(f"commit {commit[:12]} has no tree")
    width = len(commit) // 2
    found: dict[str, Entry] = {}
    pending = [("", first[1].decode())]
    while pending:
        prefix, tree = pending.pop()
        data, at = objects.read(tree, want="tree") or b"", 0
        while at < len(data):
            space = data.index(b" ", at)
            nul = data.index(b"\0", space)
            mode, name = data[at:space].decode(), data[space + 1 : nul]
            sha = data[nul + 1 : nul + 1 + width].hex()
            at = nul + 1 + width
            if not _safe(name):
                continue
            path = prefix + os.fsdecode(name)
            if mode == FOLDER:
                pending.append((path + "/", sha))
            elif mode in (FILE, EXECUTABLE, LINK):
                found[path] = Entry(mode, sha)
            elif mode != SUBMODULE:  # git writes old modes such as 100664 as plain files
                found[path] = Entry(FILE, sha)
    return dict(sorted(found.items()))


def kept_links(links: dict[str, str]) -> dict[str, str]:
    """The links (path -> target) that resolve, through the tree's own links, to a place inside it;
    the rest lead out of the commit and are left out of the materialized tree."""
    return {path: target for path, target in links.items() if _stays_inside(path, links)}


def _stays_inside(path: str, links: dict[str, str]) -> bool:
    """Whether following the link at ``path`` never leaves the tree (a virtual ``realpath``)."""
    parts: list[str] = []
    todo = [*reversed(path.split("/"))]
    hops = 0
    while todo:
        part = todo.pop()
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                return False
            parts.pop()
            continue
        here = "/".join([*parts, part])
        if here in links:
            hops += 1
            target = links[here]
            if hops > _MAX_LINK_HOPS or target.startswith("/"):
                return False
            todo.extend(reversed(target.split("/")))
            continue
        parts.append(part)  # a name the tree lacks is taken as a folder, as realpath does
    return True
