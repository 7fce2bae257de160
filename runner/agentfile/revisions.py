"""Agent files as they were at a git revision: ``--rev REV`` and ``git+URL#REV:path`` references.

A revision is read from git's objects only (``git cat-file --batch``, every object checked against
its id by ``gitobjects``: no checkout, no archive attributes, the work tree and the index untouched)
into a cache keyed by commit, ``$RUNNER_HOME/git/trees/<commit>/tree`` (files 0444, written to a
temporary folder, then renamed). Every use checks that tree against the commit (``revtree``: every
path, mode and content hash, nothing added) and writes it again when it differs, so a file planted
or changed there, or a whole tree shipped in a checkout's ``.runner/``, never runs; ``in_cache`` tells
tools where they may not write. The agent is then loaded from the same relative path inside it, so
its ``extends`` chain, templates and Python modules are all those of the revision. A remote
repository is a bare clone under ``$RUNNER_HOME/git/repos/``, keyed by URL.

A file below a materialized tree knows its revision (``revision_of``): the loader refuses paths that
leave the tree (``confine``), provenance records the revision, imports refuse work-tree modules.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from runner.agentfile import gitobjects, revtree
from runner.errors import ConfigError

__all__ = [
    "GitRef",
    "Revision",
    "at_revision",
    "commit_at",
    "confine",
    "from_reference",
    "in_cache",
    "parse_reference",
    "revision_of",
    "runner_home",
]

TREE = "tree"
MARKER = "commit.json"
_HEX40 = re.compile(r"[0-9a-f]{40}")
#: The REV each tree root was asked for in this process (a tree is shared by every REV naming its commit).
_GIVEN: dict[Path, tuple[str, str]] = {}


@dataclass(frozen=True)
class Revision:
    """Where a materialized agent file came from."""

    repository: str
    rev: str
    commit: str
    #: The file's path in the repository (``/``-separated), or "" for the tree itself.
    path: str
    root: Path
    #: The work tree the revision was taken from (None for a remote repository).
    work_tree: Path | None

    def record(self) -> dict[str, str]:
        """What a transcript header says about it."""
        return {"repository": self.repository, "rev": self.rev, "commit": self.commit, "path": self.path}


@dataclass(frozen=True)
class GitRef:
    """A parsed ``git+URL#REV:path`` reference."""

    url: str
    rev: str
    path: str


def runner_home() -> Path:
    """``RUNNER_HOME`` without importing the settings (pydantic): the variable, ``./.env``, ``.runner``."""
    value = os.environ.get("RUNNER_HOME")
    if value is None:
        try:
            for line in Path(".env").read_text(encoding="utf-8").splitlines():
                key, sep, rest = line.strip().removeprefix("export ").partition("=")
                if sep and key.strip() == "RUNNER_HOME":
                    value = rest.strip().strip("\"'")
        except (OSError, UnicodeDecodeError):
            pass
    return Path(value or ".runner").expanduser()


def _git(
    args: list[str], *, cwd: Path | None = None, stdin: bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(
            ["git", *args],
            cwd=cwd,
            input=stdin,
            capture_output=True,
            env=gitobjects.git_env(),
            timeout=300,
            check=False,
        )
    except FileNotFoundError:
        raise ConfigError(
            "git is not installed", hint="install git to use --rev and git+ references"
        ) from None
    except subprocess.TimeoutExpired:
        raise ConfigError(f"git {args[0]} did not finish in 300 s") from None


def _out(result: subprocess.CompletedProcess[bytes]) -> str:
    return result.stdout.decode("utf-8", "replace").strip()


def _err(result: subprocess.CompletedProcess[bytes]) -> str:
    lines = result.stderr.decode("utf-8", "replace").strip().splitlines()
    return lines[-1].removeprefix("fatal: ") if lines else f"git exited with {result.returncode}"


def _commit_of(git_dir: Path, rev: str, *, where: str) -> str:
    """``rev`` as a commit of the repository at ``git_dir``; a clear error when there is none."""
    if rev.startswith("-") or not rev.strip():
        raise ConfigError(f"'{rev}' is not a revision")
    found = _git(["rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"], cwd=git_dir)
    if found.returncode == 0:
        return _out(found)
    shallow = _out(_git(["rev-parse", "--is-shallow-repository"], cwd=git_dir)) == "true"
    hint = "see `git log --oneline` for the revisions there"
    if shallow:
        hint = f"{where} is a shallow clone: the revision may be in the history it left out"
        hint += " (git fetch --unshallow)"
    raise ConfigError(f"no revision '{rev}' in {where}", hint=hint)


def _check_path(git_dir: Path, commit: str, path: str, *, rev: str) -> None:
    if _git(["cat-file", "-e", f"{commit}:{path}"], cwd=git_dir).returncode != 0:
        raise ConfigError(
            f"'{path}' does not exist at revision '{rev}' ({commit[:12]})",
            hint=f"see `git ls-tree -r --name-only {commit[:12]}`",
        )


def _materialize(git_dir: Path, commit: str, *, repository: str, rev: str, home: Path | None) -> Path:
    """The tree of ``commit`` under ``RUNNER_HOME``, checked to be exactly the commit's files (and
    written again when it is not, or is missing); returns its root."""
    trees = (home or runner_home()).resolve() / "git" / "trees"
    final = trees / commit
    with gitobjects.reader(git_dir, commit) as objects:
        snap = revtree.snapshot(objects, commit)
        if _intact(final, snap):
            return final / TREE
        try:
            _rebuild(objects, snap, trees, marker={"commit": commit, "repository": repository, "rev": rev})
        except OSError as exc:
            where = f" ({exc.filename})" if exc.filename else ""
            raise ConfigError(
                f"cannot write the files of {commit[:12]} into {trees}: {exc.strerror}{where}"
            ) from None
    return final / TREE


def _rebuild(
    objects: gitobjects.ObjectReader, snap: revtree.Snapshot, trees: Path, *, marker: dict[str, str]
) -> None:
    """Write the commit's tree into a temporary folder, then put it in place of ``trees/<commit>``."""
    trees.mkdir(parents=True, exist_ok=True)
    temp = Path(tempfile.mkdtemp(prefix=f".{snap.commit[:12]}-", dir=trees))
    try:
        revtree.write_tree(objects, snap, temp / TREE)
        (temp / MARKER).write_text(json.dumps(marker), encoding="utf-8")
        _install(temp, trees / snap.commit, snap)
    finally:
        shutil.rmtree(temp, ignore_errors=True)


def _intact(final: Path, snap: revtree.Snapshot) -> bool:
    """Whether the cached tree at ``final`` is the commit's, its marker naming the same commit."""
    if final.is_symlink() or not (final / MARKER).is_file() or (final / MARKER).is_symlink():
        return False
    try:
        marker = json.loads((final / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(marker, dict) or marker.get("commit") != snap.commit:
        return False
    return revtree.difference(final / TREE, snap) is None


def _install(temp: Path, final: Path, snap: revtree.Snapshot) -> None:
    """Move the freshly written ``temp`` to ``final``, replacing a tree that is not the commit's."""
    for _attempt in range(3):
        try:
            temp.rename(final)
            return
        except OSError:
            if _intact(final, snap):  # another process wrote it first: theirs is the same tree
                return
        stale = final.with_name(f".{final.name[:12]}-stale-{os.getpid()}-{_attempt}")
        try:
            final.rename(stale)
        except OSError:
            continue  # gone already (another process is replacing it): try again
        if stale.is_symlink():
            stale.unlink()
        else:
            shutil.rmtree(stale, ignore_errors=True)
    raise ConfigError(f"cannot write the revision cache {final}: it keeps changing")


def at_revision(path: Path, rev: str, *, home: Path | None = None) -> Path:
    """The agent file ``path`` of the work tree as it was at ``rev``: its path inside the tree."""
    path = Path(path).absolute()
    folder, name = (path, "") if path.is_dir() else (path.parent, path.name)
    while not folder.is_dir() and folder != folder.parent:
        folder = folder.parent
    top = _git(["rev-parse", "--show-toplevel"], cwd=folder)
    if top.returncode != 0:
        raise ConfigError(
            f"--rev needs a file in a git repository: {path} is not in one",
            hint="run it without --rev, or use a git+URL#REV:path reference",
        )
    work_tree = Path(_out(top)).resolve()
    try:
        relative = (folder.resolve() / name).relative_to(work_tree).as_posix().removeprefix(".")
    except ValueError:
        raise ConfigError(f"--rev: {path} is not inside the repository {work_tree}") from None
    where = f"the repository {work_tree}"
    commit = _commit_of(work_tree, rev, where=where)
    _check_path(work_tree, commit, relative, rev=rev)
    root = _materialize(work_tree, commit, repository=str(work_tree), rev=rev, home=home)
    _GIVEN[root] = (str(work_tree), rev)
    return root / relative


def parse_reference(ref: str) -> GitRef | None:
    """``git+URL#REV:path`` as its parts; None for anything that is not a ``git+`` reference."""
    if not ref.startswith("git+"):
        return None
    url, sep, rest = ref[4:].rpartition("#")
    rev, colon, path = rest.partition(":")
    if not sep or not url or not colon or not rev or not path.strip("/"):
        raise ConfigError(
            f"cannot read the reference '{ref}'",
            hint="write git+URL#REV:path/agent.yaml, e.g. git+https://host/repo.git#main:agents/a.yaml",
        )
    if ".." in Path(path).parts or path.startswith("/"):
        raise ConfigError(f"the path '{path}' of '{ref}' leaves the repository")
    return GitRef(url, rev, path.strip("/"))


def _bare_clone(url: str, home: Path | None) -> Path:
    """Where the runner keeps its bare clone of ``url``."""
    return (
        (home or runner_home()).resolve()
        / "git"
        / "repos"
        / f"{hashlib.sha256(url.encode()).hexdigest()[:24]}.git"
    )


def _clone(url: str, home: Path | None) -> Path:
    bare = _bare_clone(url, home)
    repos = bare.parent
    if bare.is_dir():
        return bare
    repos.mkdir(parents=True, exist_ok=True)
    temp = Path(tempfile.mkdtemp(prefix=".clone-", dir=repos))
    try:
        done = _git(["clone", "--bare", "--quiet", "--no-tags", "--", url, str(temp / "repo.git")])
        if done.returncode != 0:
            raise ConfigError(f"cannot fetch the repository {url}: {_err(done)}")
        try:
            (temp / "repo.git").rename(bare)
        except OSError:
            if not bare.is_dir():
                raise
    finally:
        shutil.rmtree(temp, ignore_errors=True)
    return bare


def _fetch(bare: Path, url: str, rev: str) -> str:
    """``rev`` of the repository at ``url``: fetched unless it is a commit the cache already holds."""
    if _HEX40.fullmatch(rev) and _git(["cat-file", "-e", f"{rev}^{{commit}}"], cwd=bare).returncode == 0:
        return rev
    fetched = _git(["fetch", "--quiet", "--no-tags", "--", url, rev], cwd=bare)
    if fetched.returncode == 0:
        return _commit_of(bare, "FETCH_HEAD", where=url)
    every = _git(["fetch", "--quiet", "--no-tags", "--", url, "+refs/*:refs/*"], cwd=bare)
    if every.returncode != 0:
        raise ConfigError(f"cannot fetch the repository {url}: {_err(every)}")
    return _commit_of(bare, rev, where=url)


def from_reference(ref: GitRef, *, home: Path | None = None) -> Path:
    """The agent file a ``git+`` reference names, fetched and materialized; its path in the tree."""
    bare = _clone(ref.url, home)
    commit = _fetch(bare, ref.url, ref.rev)
    _check_path(bare, commit, ref.path, rev=ref.rev)
    root = _materialize(bare, commit, repository=ref.url, rev=ref.rev, home=home)
    _GIVEN[root] = (ref.url, ref.rev)
    return root / ref.path


def commit_at(repository: str, rev: str, *, home: Path | None = None) -> str | None:
    """The commit ``rev`` names now in ``repository`` as a header records it, or None.

    ``repository`` is a folder (a work tree, or any folder inside one) or a ``git+`` reference's URL:
    a ``file:`` URL is read in its folder, any other URL in the runner's bare clone of it under
    ``home`` (never fetched: what the last run fetched). None where ``rev`` names no commit there.
    """
    if not rev.strip() or rev.startswith("-"):
        return None
    parts = urlsplit(repository)
    folder = Path(unquote(parts.path)) if parts.scheme.lower() == "file" else Path(repository or ".")
    if not folder.is_dir():  # a URL (or a repository gone since): the clone the runner fetched into
        folder = _bare_clone(repository, home)
        if not folder.is_dir():
            return None
    try:
        found = _git(
            ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"], cwd=folder
        )
    except ConfigError:
        return None
    return (_out(found) or None) if found.returncode == 0 else None


def revision_of(path: Path) -> Revision | None:
    """The revision a file below a materialized tree belongs to; None for any other file."""
    path = Path(path).absolute()
    for folder in path.parents:
        if folder.name == TREE and (folder.parent / MARKER).is_file():
            break
    else:
        return None
    try:
        marker: dict[str, Any] = json.loads((folder.parent / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    repository, rev = _GIVEN.get(folder, (str(marker.get("repository", "")), str(marker.get("rev", ""))))
    work_tree = Path(repository) if Path(repository).is_absolute() and Path(repository).is_dir() else None
    try:
        inside = path.relative_to(folder).as_posix()
    except ValueError:
        inside = ""
    return Revision(repository, rev, str(marker.get("commit", "")), inside, folder, work_tree)


def in_cache(path: Path) -> bool:
    """Whether ``path`` (resolved) is inside the runner's git cache: ``$RUNNER_HOME/git``, the cache
    of any tree this process materialized, or any materialized tree. No tool may write there."""
    target = Path(path).resolve()
    caches = {(runner_home() / "git").resolve(), *(root.parents[2] for root in list(_GIVEN))}
    return any(target.is_relative_to(cache) for cache in caches) or revision_of(target) is not None


def confine(origin: Path, target: Path, *, what: str) -> None:
    """Refuse ``target`` (resolved) when ``origin`` is at a revision and ``target`` leaves its tree."""
    revision = revision_of(origin)
    if revision is None:
        return
    try:
        Path(target).resolve().relative_to(revision.root.resolve())
    except ValueError:
        raise ConfigError(
            f"{what} '{target}' is outside the repository at revision '{revision.rev}' "
            f"({revision.commit[:12]})",
            hint="at a revision an agent may use only files committed in the same repository",
        ) from None
