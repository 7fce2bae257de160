"""Processes that try to outlive a shell command (``setsid -f``, double forks, killing the reaper)
are gone when the call returns, times out or is cancelled (Linux: the reaper)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from runner.errors import ToolError
from runner.tools.base import RunContext, Tool

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the reaper is Linux only")

#: Start two detached sleepers that write their pid and session, wait until both have.
DETACH = (
    "setsid -f sh -c 'ps -o sid= -p $$ > s1; echo $$ > p1; exec sleep 300' >/dev/null 2>&1; "
    "(sh -c 'echo $$ > p2; exec sleep 301' >/dev/null 2>&1 &); "
    "while [ ! -s p1 ] || [ ! -s p2 ]; do sleep 0.01; done; "
)


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie or a missing process is gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _pids(folder: Path, *names: str) -> list[int]:
    return [int((folder / name).read_text()) for name in names]


async def _wait_for_files(folder: Path, *names: str, within_s: float = 10.0) -> None:
    deadline = time.monotonic() + within_s
    while not all((folder / n).exists() and (folder / n).read_text().strip() for n in names):
        assert time.monotonic() < deadline, f"{names} never appeared in {folder}"
        await asyncio.sleep(0.01)


@pytest.fixture
async def shell(load_builtin: Any) -> Tool:
    """The shell tool in ``tmp_path/ws`` with a 2 s timeout."""
    tools = await load_builtin("shell", {"cwd": "ws", "timeout_s": 2})
    tool: Tool = tools["shell"]
    return tool


async def test_setsid_and_double_fork_are_killed_when_the_command_ends(
    shell: Tool, run_ctx: RunContext, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    output = await shell.call({"command": DETACH + "ps -o sid= -p $$"}, run_ctx)
    first, second = _pids(ws, "p1", "p2")
    assert (ws / "s1").read_text().strip() != output.splitlines()[0].strip()  # really detached
    assert not _alive(first)
    assert not _alive(second)


async def test_detached_processes_are_killed_at_the_timeout(
    shell: Tool, run_ctx: RunContext, tmp_path: Path
) -> None:
    with pytest.raises(ToolError, match="timed out after 2 s"):
        await shell.call({"command": DETACH + "sleep 60"}, run_ctx)
    assert not any(_alive(pid) for pid in _pids(tmp_path / "ws", "p1", "p2"))


async def test_detached_processes_are_killed_when_the_call_is_cancelled(
    load_builtin: Any, run_ctx: RunContext, tmp_path: Path
) -> None:
    shell = (await load_builtin("shell", {"cwd": "ws", "timeout_s": 30}))["shell"]
    task = asyncio.ensure_future(shell.call({"command": DETACH + "touch ready; sleep 60"}, run_ctx))
    await _wait_for_files(tmp_path / "ws", "p1", "p2")
    while not (tmp_path / "ws" / "ready").exists():
        await asyncio.sleep(0.01)
    pids = _pids(tmp_path / "ws", "p1", "p2")
    assert all(_alive(pid) for pid in pids)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not any(_alive(pid) for pid in pids)


async def test_a_fork_loop_is_stopped_and_killed(shell: Tool, run_ctx: RunContext, tmp_path: Path) -> None:
    """Processes that keep forking while the reaper kills them do not get away."""
    command = (
        "setsid -f sh -c 'echo $$ > loop; while :; do sleep 3137 & sleep 0.01; done' >/dev/null 2>&1; "
        "while [ ! -s loop ]; do sleep 0.01; done; sleep 0.3; pgrep -c -x -f 'sleep 3137'"
    )
    output = await shell.call({"command": command}, run_ctx)
    assert int(output.splitlines()[0]) > 3  # the loop was running and forking
    assert not _alive(_pids(tmp_path / "ws", "loop")[0])
    assert _sleepers(b"sleep\x003137\x00") == set()


def _sleepers(cmdline: bytes) -> set[int]:
    found = set()
    for path in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if path.read_bytes() == cmdline:
                found.add(int(path.parent.name))
        except OSError:
            continue
    return {pid for pid in found if _alive(pid)}


async def test_a_command_that_kills_its_reaper_loses_what_stayed_in_its_session(
    shell: Tool, run_ctx: RunContext, tmp_path: Path
) -> None:
    """SIGKILL to the reaper ($PPID) cannot be prevented; the runner then kills the command's
    process group and session (what is documented), so a plain background job still ends."""
    with pytest.raises(ToolError, match="killed by signal 9"):
        await shell.call({"command": "sleep 300 & echo $! > p1; kill -9 $PPID; sleep 60"}, run_ctx)
    (pid,) = _pids(tmp_path / "ws", "p1")
    deadline = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert not _alive(pid)


async def test_the_command_runs_without_the_capabilities_that_read_other_processes(
    shell: Tool, run_ctx: RunContext
) -> None:
    from runner.tools.reaper import DROPPED_CAPABILITIES

    output = await shell.call({"command": "grep -E '^Cap(Eff|Prm|Inh|Bnd|Amb)' /proc/self/status"}, run_ctx)
    sets = {line.split(":")[0]: int(line.split()[1], 16) for line in output.splitlines()[:-1]}
    assert set(sets) == {"CapEff", "CapPrm", "CapInh", "CapBnd", "CapAmb"}
    for cap in DROPPED_CAPABILITIES:
        for name, value in sets.items():
            if name == "CapBnd" and os.geteuid() != 0:
                continue  # an unprivileged reaper cannot lower the bounding set (nor needs to)
            assert not value & (1 << cap), f"capability {cap} still in {name}"


async def test_a_command_that_stops_its_reaper_is_still_killed_at_the_timeout(
    shell: Tool, run_ctx: RunContext, tmp_path: Path
) -> None:
    with pytest.raises(ToolError, match="timed out after 2 s"):
        await shell.call({"command": DETACH + "kill -STOP $PPID; sleep 60"}, run_ctx)
    assert not any(_alive(pid) for pid in _pids(tmp_path / "ws", "p1", "p2"))


#: A runner that starts a command which detaches a sleeper, then waits (to be killed by the test).
RUNNER_SCRIPT = r"""
import asyncio, sys
from contextlib import AsyncExitStack
from pathlib import Path
from runner.agentfile.config import AgentConfig, ToolSourceConfig
from runner.tools.base import RunContext
from runner.tools.builtin import load_source
from runner.tools.sources import SourceContext

async def main():
    folder = Path(sys.argv[1])
    async with AsyncExitStack() as stack:
        spec = ToolSourceConfig(kind="builtin", target="shell", base_dir=folder, options={"timeout_s": 60})
        agent = AgentConfig(name="t", path=folder / "a.yaml")
        tool = (await load_source(spec, SourceContext(agent=agent), stack)).tools[0]
        await tool.call({"command": sys.argv[2]}, RunContext(session_id="s", agent="t", workspace=folder))

asyncio.run(main())
"""


async def test_detached_processes_die_with_a_runner_that_is_killed(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    runner = subprocess.Popen(
        [sys.executable, "-c", RUNNER_SCRIPT, str(tmp_path), DETACH + "sleep 60"],
        env=env,
        stdin=subprocess.DEVNULL,
    )
    try:
        await _wait_for_files(tmp_path, "p1", "p2", within_s=20)
        pids = _pids(tmp_path, "p1", "p2")
        assert all(_alive(pid) for pid in pids)
    finally:
        runner.kill()
        runner.wait()
    deadline = time.monotonic() + 5
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert not any(_alive(pid) for pid in pids)
