"""Fixtures of the batch tests: the installed `runner` against the scripted server (tests/cli_run's),
and one real local Ray cluster per test session (per xdist worker) for the Ray backend's tests."""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cli_run.conftest import cli, path_kind, serve

__all__ = ["RayCluster", "cli", "path_kind", "ray_cluster", "serve"]

RAY = str(Path(sys.executable).parent / "ray")
#: RAY_AUTH_MODE=disabled: `ray start` turns token authentication on whenever ~/.ray/auth_token
#: exists (any local `ray.init()` of the user writes it), and a driver given an explicit address
#: then needs RAY_AUTH_MODE=token; the test cluster (loopback only) does without, whatever ~/.ray holds.
RAY_ENV = {
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_AUTH_MODE": "disabled",
}


@dataclass(frozen=True)
class RayCluster:
    address: str
    temp_dir: Path
    cwd: Path
    """Where the cluster was started: a folder holding none of the tests' agents or tool modules."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cluster_pids(temp_dir: Path) -> list[int]:
    """The processes of the cluster whose temp dir is ``temp_dir``: those whose command lines name
    it (GCS, raylet, monitors) and their descendants (agents and workers, renamed ``ray::...``)."""
    mine, marker = os.getpid(), str(temp_dir)
    named: set[int] = set()
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == mine:
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            parents[int(entry.name)] = int((entry / "stat").read_text().split(") ", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if marker in cmdline:
            named.add(int(entry.name))
    found = set(named)
    while True:
        more = {pid for pid, parent in parents.items() if parent in found and pid not in found}
        if not more:
            return sorted(found)
        found |= more


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[RayCluster]:
    """``ray start --head`` on 127.0.0.1 (2 CPUs, no dashboard), stopped at the end by its processes
    (never a bare ``ray stop``: it stops every cluster of the user)."""
    if importlib.util.find_spec("ray") is None:
        pytest.skip("ray is not installed (the project's ray extra: pip install -e '.[ray]')")
    temp_dir = Path(tempfile.mkdtemp(prefix="rt", dir="/tmp"))  # short: Ray's socket paths
    cwd = Path(tempfile.mkdtemp(prefix="ray-cwd-"))
    port = _free_port()
    env = {**os.environ, **RAY_ENV}
    command = [
        RAY,
        "start",
        "--head",
        "--node-ip-address",
        "127.0.0.1",
        "--port",
        str(port),
        "--num-cpus",
        "2",
        "--include-dashboard=false",
        "--disable-usage-stats",
        "--temp-dir",
        str(temp_dir),
    ]
    started = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        yield RayCluster(address=f"127.0.0.1:{port}", temp_dir=temp_dir, cwd=cwd)
    finally:
        stop_cluster(temp_dir)
        shutil.rmtree(temp_dir, ignore_errors=True)
        shutil.rmtree(cwd, ignore_errors=True)


def stop_cluster(temp_dir: Path) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = cluster_pids(temp_dir)
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + (3 if sig == signal.SIGTERM else 10)
        while pids and time.monotonic() < deadline:
            pids = [pid for pid in pids if Path(f"/proc/{pid}").exists() and not _zombie(pid)]
            time.sleep(0.1)
        if not pids:
            return


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")
    except (OSError, IndexError):
        return False
