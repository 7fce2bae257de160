"""The local Ray's private folder, and what is left of it when its driver dies (standard library only).

``runner batch --backend ray`` without ``--address`` starts a Ray of its own. Its files live in
``/tmp/runner-ray-XXXXXXXX/`` (``make_folder``): a folder only the user can enter (0700), holding
the driver's pid (``owner``) and Ray's temp dir ``r/``, which Ray itself makes 0777 (nobody else
can reach it through the 0700 parent).

A driver killed with ``kill -9`` cannot stop its Ray: Ray's agents outlive it for minutes and its
folder stays for good. Two things clean up after it:

- ``watch(folder)`` starts this file as a small process of its own (``python -I ray_reaper.py
  FOLDER PID``, nothing of the runner imported) that waits for the driver's end (its standard
  input closes, however the driver ended) and then ``reap``\\ s the folder (sparing the driver
  when it closed the pipe itself, at a normal stop);
- ``reap_stale()``, at the next start, reaps the folders whose owner is no longer alive.

``reap`` stops every process of the user that names the folder on its command line or holds a
file in it (Ray renames its agents and workers ``ray::...``, but their logs are open in it):
SIGTERM, then SIGKILL after ``GRACE_S``; then it removes the folder.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["GRACE_S", "PREFIX", "folder_pids", "make_folder", "reap", "reap_stale", "watch"]

PREFIX = "runner-ray-"
#: Seconds between SIGTERM and SIGKILL.
GRACE_S = 2.0


def _base() -> Path:
    return Path("/tmp") if os.name == "posix" else Path(tempfile.gettempdir())  # short: Ray's socket paths


def make_folder() -> tuple[Path, Path]:
    """A new private folder (0700, with this process's pid in ``owner``) and Ray's temp dir in it."""
    folder = Path(tempfile.mkdtemp(prefix=PREFIX, dir=_base()))
    (folder / "owner").write_text(str(os.getpid()), encoding="utf-8")
    temp_dir = folder / "r"
    temp_dir.mkdir()
    return folder, temp_dir


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is dead for this purpose
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][:1] != "Z"
    except (OSError, IndexError):
        return True


def folder_pids(folder: Path) -> list[int]:
    """The processes of this user that name ``folder`` on their command line, or have a file (or
    their working folder) in it; empty where there is no ``/proc``."""
    marker, mine, uid = str(folder) + os.sep, os.getpid(), os.getuid()
    found = []
    proc = Path("/proc")
    if not proc.is_dir():
        return []
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == mine:
            continue
        try:
            if entry.stat().st_uid != uid:
                continue
            if marker.encode() in (entry / "cmdline").read_bytes() or _holds(entry, marker):
                found.append(int(entry.name))
        except OSError:
            continue
    return sorted(found)


def _holds(entry: Path, marker: str) -> bool:
    with contextlib.suppress(OSError):
        if os.readlink(entry / "cwd").startswith(marker):
            return True
    with contextlib.suppress(OSError):
        for fd in (entry / "fd").iterdir():
            with contextlib.suppress(OSError):
                if os.readlink(fd).startswith(marker):
                    return True
    return False


def reap(folder: Path, *, spare: int | None = None) -> None:
    """Stop the processes left in ``folder`` (SIGTERM, then SIGKILL) and remove it; ``spare``: a
    process never stopped (the driver, which keeps Ray's log files open after a normal stop)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = [pid for pid in folder_pids(folder) if pid != spare]
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, sig)
        deadline = time.monotonic() + GRACE_S
        while pids and time.monotonic() < deadline:
            time.sleep(0.1)
            pids = [pid for pid in pids if _alive(pid)]
        if not pids:
            break
    shutil.rmtree(folder, ignore_errors=True)


def reap_stale() -> list[Path]:
    """Reap this user's local Ray folders whose owner (the driver that made them) is dead."""
    reaped = []
    with contextlib.suppress(OSError):
        for folder in _base().glob(PREFIX + "*"):
            try:
                if folder.stat().st_uid != os.getuid() or not folder.is_dir():
                    continue
                owner = int((folder / "owner").read_text(encoding="utf-8").strip() or 0)
            except (OSError, ValueError):
                continue  # not one of ours, or being made right now
            if owner and not _alive(owner):
                reap(folder)
                reaped.append(folder)
    return reaped


def watch(folder: Path) -> subprocess.Popen[bytes]:
    """Start the process that reaps ``folder`` once this one ends (close its stdin to end it now)."""
    return subprocess.Popen(
        [sys.executable, "-I", __file__, str(folder), str(os.getpid())],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # not stopped with the terminal's process group (Ctrl+C)
        close_fds=True,
    )


def _main(folder: str, driver: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(OSError):
        sys.stdin.buffer.read()  # until the driver closes it or dies
    reap(Path(folder), spare=driver if _alive(driver) else None)


if __name__ == "__main__":
    _main(sys.argv[1], int(sys.argv[2]))
