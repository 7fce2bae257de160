"""Starting and ending the processes tools run: shell commands, command hooks, MCP stdio servers.

On Linux every such process runs under the reaper (``runner/tools/reaper.py``): a small Python
process that is a child subreaper, so whatever the command leaves behind (background jobs,
``setsid -f``, double forks) is killed and reaped before the reaper exits, and the pipes close. It
also drops the capabilities that would let the command read the runner's memory
(``reaper.DROPPED_CAPABILITIES``). The first time a child is started, the runner hardens itself
(``harden_runner``): it becomes non-dumpable (``/proc/PID/environ``, ``mem``, ``fd``, ... and
ptrace refused to processes without CAP_SYS_PTRACE) and wipes secret values from the environment
block ``/proc/PID/environ`` shows. ``RUNNER_UNHARDENED=1`` turns both the hardening and the
capability drop off (to debug the runner with gdb or py-spy, or get core dumps); the reaper still
ends every descendant.

Elsewhere (macOS, BSD) a child leads its own process group and session, which is killed with
SIGKILL; a process that leaves both (``setsid``, a daemon) survives, and no hardening is done.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import shutil
import signal
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from runner.agentfile.interpolate import is_secret_name
from runner.tools import reaper

__all__ = ["OPT_OUT_VARIABLE", "Child", "harden_runner", "reaped_command", "reaped_server"]

OPT_OUT_VARIABLE = "RUNNER_UNHARDENED"
_REAPER = Path(reaper.__file__).resolve()
_USE_REAPER = sys.platform == "linux" and bool(sys.executable)
_REAPER_WAIT_S = 2.0
_SETTLE_S = 2.0
_SERVER_GRACE_S = 1.0  # below the MCP SDK's 2 s between its SIGTERM and SIGKILL to the group
_PR_SET_DUMPABLE = 4
_ENV_START, _ENV_END = 50 - 3, 51 - 3  # proc(5) stat fields 50 and 51, after the command name

_hardened = False
_harden_lock = threading.Lock()


def _opted_out() -> bool:
    return os.environ.get(OPT_OUT_VARIABLE, "") not in ("", "0")


def harden_runner() -> None:
    """Make this process's secrets unreadable to the processes it starts (once; Linux only).

    Wipes the values of secret variables (``is_secret_name``) from the environment block the kernel
    shows as ``/proc/PID/environ`` (they are set again, so ``os.environ``, ``getenv`` and children
    that inherit them are unchanged), then makes the process non-dumpable: its ``/proc`` files
    (``environ``, ``mem``, ``fd``, ``maps`` ...) and ptrace are refused to any process without
    CAP_SYS_PTRACE, which the reaper drops, and it no longer writes core dumps.
    """
    global _hardened
    if _hardened:
        return
    with _harden_lock:
        if _hardened:
            return
        _hardened = True
        if sys.platform != "linux" or _opted_out():
            return
        _scrub_environment_block()
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_DUMPABLE, ctypes.c_ulong(0), 0, 0, 0)


def _scrub_environment_block() -> None:
    """Zero the secret values in the initial environment block (``env_start`` .. ``env_end``)."""
    try:
        with open("/proc/self/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
        start, end = int(fields[_ENV_START]), int(fields[_ENV_END])
        with open("/proc/self/environ", "rb") as environ:
            shown = environ.read()
    except (OSError, ValueError, IndexError):
        return
    if not start or end <= start or ctypes.string_at(start, end - start) != shown:
        return  # not the block we expect (moved with PR_SET_MM?): leave it alone
    offset = 0
    for entry in shown.split(b"\0"):
        name, sep, value = entry.partition(b"=")
        if sep and value and is_secret_name(name.decode(errors="replace"), value.decode(errors="replace")):
            current = os.environb.get(name)
            if current is not None:
                os.putenv(name, current)  # libc's environ now points at a copy on the heap
            ctypes.memset(start + offset + len(name) + 1, 0, len(value))
        offset += len(entry) + 1


def reaped_command(
    argv: Sequence[str], env: Mapping[str, str] | None = None, *, grace_s: float = 0.0
) -> list[str]:
    """The command line that runs ``argv`` under the reaper (``argv`` itself off Linux).

    ``env`` is the environment the process will get (None: this one's), so that the reaper can give
    the command exactly that ``LC_CTYPE``; ``grace_s`` is how long a SIGTERM waits for ``argv`` to
    end before everything is killed.
    """
    if not _USE_REAPER:
        return list(argv)
    environment = os.environ if env is None else env
    options = ["--parent", str(os.getpid())]
    if grace_s > 0:
        options += ["--grace", f"{grace_s:g}"]
    if "LC_CTYPE" in environment:
        options += ["--lc-ctype", environment["LC_CTYPE"]]
    if _opted_out():
        options.append("--keep-capabilities")
    return [sys.executable, "-I", "-S", str(_REAPER), *options, "--", *argv]


def reaped_server(command: str, args: Sequence[str], env: Mapping[str, str]) -> tuple[str, list[str]]:
    """The command and arguments that start a server (an MCP stdio server, spawned by its SDK)
    under the reaper, with the runner hardened first; a SIGTERM gives the server 1 s to end.

    Raises FileNotFoundError or PermissionError, as spawning ``command`` itself would.
    """
    harden_runner()
    if not _USE_REAPER:
        return command, list(args)
    found = command if os.sep in command else shutil.which(command, path=env.get("PATH"))
    if found is None or not os.path.exists(found):
        raise FileNotFoundError(command)
    if os.path.isdir(found) or not os.access(found, os.X_OK):
        raise PermissionError(command)
    argv = reaped_command([command, *args], env, grace_s=_SERVER_GRACE_S)
    return argv[0], argv[1:]


class _Events(asyncio.SubprocessProtocol):
    """Passes output on; ``exited`` when the process ends, ``finished`` when its pipes are closed
    too (``Process.wait`` waits for both, so a process holding the pipe would keep it waiting)."""

    def __init__(self, on_output: Callable[[int, bytes], None]) -> None:
        self.on_output = on_output
        self.exited = asyncio.Event()
        self.finished = asyncio.Event()

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        """Output on stdout (1) or stderr (2)."""
        self.on_output(fd, data)

    def process_exited(self) -> None:
        """The process ended."""
        self.exited.set()

    def connection_lost(self, exc: Exception | None) -> None:
        """The process ended and its pipes are closed."""
        self.exited.set()
        self.finished.set()


class Child:
    """A command run under the reaper in its own session and process group; see the module doc."""

    def __init__(self, transport: asyncio.SubprocessTransport, events: _Events) -> None:
        self.transport = transport
        self.events = events
        self.pid: int = transport.get_pid()

    @classmethod
    async def start(
        cls,
        argv: Sequence[str],
        *,
        on_output: Callable[[int, bytes], None],
        cwd: Path | str | None,
        env: Mapping[str, str] | None,
        stdin: int | None = asyncio.subprocess.DEVNULL,
        stderr: int = asyncio.subprocess.PIPE,
    ) -> Child:
        """Start ``argv`` (stdout always a pipe); OSError if it cannot start.

        Cancelled while starting, asyncio would kill only the process it started, so the start is
        shielded and the child stopped here instead.
        """
        harden_runner()
        environment = dict(os.environ if env is None else env)
        loop = asyncio.get_running_loop()
        kwargs: dict[str, Any] = {"stdin": stdin, "stdout": asyncio.subprocess.PIPE, "stderr": stderr}
        spawn = asyncio.ensure_future(
            loop.subprocess_exec(
                lambda: _Events(on_output),
                *reaped_command(argv, environment),
                cwd=cwd,
                env=environment,
                start_new_session=True,
                **kwargs,
            )
        )
        try:
            transport, events = await asyncio.shield(spawn)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                transport, events = await spawn
                cls(transport, events).kill()
                transport.close()
            raise
        return cls(transport, events)

    @property
    def returncode(self) -> int | None:
        """The exit code, negative for a signal; None while running."""
        return self.transport.get_returncode()

    def send(self, data: bytes) -> None:
        """Write ``data`` to the child's stdin and close it."""
        pipe = self.transport.get_pipe_transport(0)
        if isinstance(pipe, asyncio.WriteTransport):
            pipe.write(data)
            pipe.close()

    async def wait(self, timeout_s: float | None) -> bool:
        """Wait for the child (with all it started) to end; False when ``timeout_s`` passed first."""
        try:
            async with asyncio.timeout(timeout_s):
                await self.events.exited.wait()
        except TimeoutError:
            return False
        return True

    def kill(self) -> None:
        """Ask the reaper to kill everything now (off Linux: kill the group); does not wait."""
        if not _USE_REAPER:
            _kill_group(self.pid)
            return
        for number in (signal.SIGTERM, signal.SIGCONT):  # SIGCONT: a command may have stopped it
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(self.pid, number)

    async def stop(self) -> None:
        """End the child and everything it started (if not already ended), and close its pipes.

        Bounded: the reaper gets ``_REAPER_WAIT_S`` to finish; then its group and session are
        killed, and the pipes get ``_SETTLE_S`` before they are closed regardless.
        """
        try:
            if not self.events.exited.is_set():
                self.kill()
                await self.wait(_REAPER_WAIT_S)
            self._kill_leftovers()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.events.finished.wait(), _SETTLE_S)
        except BaseException:  # cancelled again: the reaper has its SIGTERM and finishes alone
            if self.events.exited.is_set():
                self._kill_leftovers()
            raise
        finally:
            self.transport.close()

    def _kill_leftovers(self) -> None:
        """SIGKILL the child's process group, and, when the reaper did not end normally (killed by
        the command, or stuck), every process still in its session."""
        _kill_group(self.pid)
        code = self.returncode
        if _USE_REAPER and (code is None or code < 0):
            _kill_session(self.pid)


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _kill_session(sid: int) -> None:
    """SIGKILL every process of session ``sid`` (a session id is not reused while in use)."""
    for pid, fields in reaper.process_stats():
        if len(fields) > 3 and fields[3] == str(sid).encode():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
