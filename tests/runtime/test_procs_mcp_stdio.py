"""MCP stdio servers run under the reaper: what they detach dies with them, and they cannot get the
capabilities that read the runner's memory (``runner.tools.procs.reaped_server`` with the SDK)."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import pytest
from mcp import StdioServerParameters
from mcp.client.stdio import get_default_environment, stdio_client

from runner.tools.procs import reaped_server
from runner.tools.reaper import DROPPED_CAPABILITIES

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the reaper is Linux only")

#: A "server" that detaches a sleeper, records its capabilities, then reads stdin until EOF.
SERVER = """
import subprocess, sys
subprocess.run(["setsid", "-f", "sh", "-c", "echo $$ > detached; exec sleep 3271"])
caps = [l for l in open("/proc/self/status") if l.startswith(("CapEff", "CapBnd"))]
open("caps", "w").write("".join(caps))
for line in sys.stdin:
    pass
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


async def test_a_stdio_server_loses_what_it_detached_and_the_reading_capabilities(tmp_path: Path) -> None:
    (tmp_path / "server.py").write_text(SERVER)
    env = get_default_environment()
    command, args = reaped_server(sys.executable, [str(tmp_path / "server.py")], env)
    parameters = StdioServerParameters(command=command, args=args, cwd=tmp_path)
    async with stdio_client(parameters):
        deadline = time.monotonic() + 10
        while not ((tmp_path / "caps").exists() and (tmp_path / "detached").exists()):
            assert time.monotonic() < deadline, "the server never started"
            await asyncio.sleep(0.02)
        pid = int((tmp_path / "detached").read_text())
        assert _alive(pid)
    deadline = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert not _alive(pid)
    caps = {
        line.split(":")[0]: int(line.split()[1], 16) for line in (tmp_path / "caps").read_text().splitlines()
    }
    assert not any(caps["CapEff"] & (1 << cap) for cap in DROPPED_CAPABILITIES)


def test_a_missing_or_unrunnable_server_command_fails_as_spawning_it_would(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        reaped_server("no-such-mcp-server-anywhere", [], {"PATH": str(tmp_path)})
    (tmp_path / "plain.txt").write_text("not a program")
    with pytest.raises(PermissionError):
        reaped_server(str(tmp_path / "plain.txt"), [], {"PATH": str(tmp_path)})
