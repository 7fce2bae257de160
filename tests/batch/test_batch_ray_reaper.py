"""The local Ray's private folder and its reaper (no Ray needed: a stand-in process holds the folder)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from runner.batch.ray_reaper import folder_pids, make_folder, reap_stale, watch


def _dead_pid() -> int:
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    return done.pid


def _holder(folder: Path) -> subprocess.Popen[bytes]:
    """A process renamed nothing like the folder that keeps its working folder in it (as Ray's
    agents keep their logs open there)."""
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], cwd=folder)


def _wait_gone(proc: subprocess.Popen[bytes], timeout_s: float = 20) -> bool:
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return False
    return True


def test_the_folder_is_private_and_names_its_owner() -> None:
    folder, temp_dir = make_folder()
    try:
        assert folder.stat().st_mode & 0o777 == 0o700  # Ray makes temp_dir 0777: nobody can reach it
        assert temp_dir.parent == folder and (folder / "owner").read_text() == str(os.getpid())
    finally:
        subprocess.run(["rm", "-rf", str(folder)], check=False)


def test_the_next_start_reaps_what_a_dead_driver_left_and_keeps_a_live_ones() -> None:
    stale, stale_temp = make_folder()
    (stale / "owner").write_text(str(_dead_pid()))
    live, live_temp = make_folder()  # owned by this process: alive
    left, kept = _holder(stale_temp), _holder(live_temp)
    try:
        deadline = time.monotonic() + 10
        while left.pid not in folder_pids(stale):
            assert time.monotonic() < deadline, "the holder never showed in the folder"
            time.sleep(0.05)
        reaped = reap_stale()
        assert stale in reaped and live not in reaped
        assert _wait_gone(left) and not stale.exists()
        assert kept.poll() is None and live.exists()
    finally:
        for proc in (left, kept):
            proc.kill()
            proc.wait()
        subprocess.run(["rm", "-rf", str(stale), str(live)], check=False)


def test_the_watcher_reaps_the_folder_once_its_driver_ends() -> None:
    folder, temp_dir = make_folder()
    holder = _holder(temp_dir)
    watcher = watch(folder)
    try:
        assert watcher.poll() is None  # waits while the driver lives
        assert watcher.stdin is not None
        watcher.stdin.close()  # what the driver's death does to it
        assert _wait_gone(watcher) and _wait_gone(holder)
        assert not folder.exists()
    finally:
        holder.kill()
        holder.wait()
        watcher.kill()
        watcher.wait()
        subprocess.run(["rm", "-rf", str(folder)], check=False)
