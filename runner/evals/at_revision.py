"""STAND-IN: the agent file as it was at a git revision, for ``runner eval --against REV``.

This is a private, temporary stand-in for the shared ``--rev`` loader (issue 16, item 1), which
another change builds in ``runner/agentfile/revision*``. It is isolated in ``agent_at_revision``
so that the shared loader can replace it in one place: ``runner eval`` only needs "the path of
the agent file at REV, valid while the context is open".

How it works: the repository's whole tree at REV, from git's objects (``git archive REV``),
extracted into a temporary folder, and the same relative path in it. The work tree and the index
are not touched. Everything the file reaches inside the repository (``extends``, templates, tool
and hook modules) is then as it was at REV; a file it names outside the repository is read as it
is now (the shared loader refuses those).
"""

from __future__ import annotations

import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from runner.errors import ConfigError

__all__ = ["agent_at_revision"]


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True, check=False)
    except OSError as exc:
        raise ConfigError(f"--against needs git, which cannot run here: {exc}") from None


@contextmanager
def agent_at_revision(path: Path, rev: str) -> Iterator[tuple[Path, str]]:
    """(the agent file at ``rev``, the commit it names), valid while the context is open."""
    file = path.resolve()
    top = _git(file.parent, "rev-parse", "--show-toplevel")
    if top.returncode != 0:
        raise ConfigError(
            f"--against {rev}: {path} is not inside a git repository",
            hint="--against compares with the agent as committed at a revision of its repository",
        )
    root = Path(top.stdout.strip()).resolve()
    found = _git(root, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    if found.returncode != 0 or not found.stdout.strip():
        raise ConfigError(
            f"--against {rev}: no such revision in {root}",
            hint="give a commit, a branch or a tag (a shallow clone may lack it: git fetch --unshallow)",
        )
    commit = found.stdout.strip()
    relative = file.relative_to(root).as_posix()
    if _git(root, "cat-file", "-e", f"{commit}:{relative}").returncode != 0:
        raise ConfigError(f"--against {rev}: {relative} does not exist at {rev} ({commit[:12]})")
    with tempfile.TemporaryDirectory(prefix="runner-eval-") as folder:
        archive = subprocess.Popen(
            ["git", "-C", str(root), "archive", "--format=tar", commit],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert archive.stdout is not None
        try:
            with tarfile.open(fileobj=archive.stdout, mode="r|") as tar:
                tar.extractall(folder, filter="data")
        finally:
            archive.stdout.close()
            code = archive.wait()
        if code != 0:
            raise ConfigError(f"--against {rev}: git archive failed (exit {code})")
        yield Path(folder) / relative, commit
