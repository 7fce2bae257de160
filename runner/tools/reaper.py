"""The reaper: runs one command and, when it ends, ends every process it left (Linux only).

Started by ``runner.tools.procs`` as ``python -I -S reaper.py --parent PID [--grace S]
[--lc-ctype VALUE] [--keep-capabilities] -- ARGV...``; it imports only the standard library, so
it starts in ~15 ms. It

1. asks to be sent SIGTERM when the thread that started it ends (``PR_SET_PDEATHSIG``), and exits
   at once if its parent is already gone;
2. removes the capabilities that let a process read another one's memory or the kernel's
   (``DROPPED_CAPABILITIES``) from its own sets and from the bounding set, so neither the command
   nor anything it starts (setuid programs included) can get them back, and makes itself
   non-dumpable (the command cannot ptrace it);
3. becomes a child subreaper (``PR_SET_CHILD_SUBREAPER``): every process the command starts that
   is orphaned (``setsid -f``, a double fork, ``nohup ... &``) is re-parented to it;
4. runs ARGV with the stdin, stdout and stderr it was given, and waits;
5. when ARGV ends, or on SIGTERM (the runner's timeout or cancel, or the runner's death), stops
   every descendant (SIGSTOP until no new one appears, then SIGKILL), reaps them all, and exits
   with ARGV's status (dying of the same signal when ARGV was killed).

With ``--grace S``, a SIGTERM is passed on to ARGV first and everything is killed only S seconds
later (or when ARGV ends), so a server can shut down cleanly. ``--lc-ctype`` restores the
``LC_CTYPE`` the command was given (Python's locale coercion may change it in this process).
"""

from __future__ import annotations

# ``_signal`` and no ``contextlib``: ``signal`` imports ``enum`` and ``contextlib`` ``collections``,
# which together double the start-up time of this process (it runs before every command).
import _signal as signal  # type: ignore[import-not-found]
import ctypes
import os
import sys
import time

__all__ = ["DROPPED_CAPABILITIES", "descendants", "main", "process_stats"]

#: CAP_SYS_MODULE, CAP_SYS_RAWIO, CAP_SYS_PTRACE, CAP_SYS_ADMIN, CAP_PERFMON, CAP_BPF: loading kernel
#: code, raw memory and I/O, ptrace and /proc/PID/{mem,environ,fd} of any process, and (SYS_ADMIN,
#: PERFMON, BPF) probes that read any process's memory. Docker drops the first four by default too.
DROPPED_CAPABILITIES = (16, 17, 19, 21, 38, 39)

_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_PR_CAPBSET_DROP = 24
_PR_SET_CHILD_SUBREAPER = 36
_CAP_VERSION_3 = 0x20080522


class _Stop(Exception):
    """SIGTERM arrived: end the command and everything it started."""


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


_libc = ctypes.CDLL(None, use_errno=True)


def _prctl(option: int, arg: int) -> bool:
    return int(_libc.prctl(option, ctypes.c_ulong(arg), 0, 0, 0)) == 0


def drop_capabilities() -> None:
    """Remove ``DROPPED_CAPABILITIES`` from the bounding set (needs CAP_SETPCAP, as root) and from
    this process's effective, permitted and inheritable sets (which also clears them as ambient)."""
    for cap in DROPPED_CAPABILITIES:
        _prctl(_PR_CAPBSET_DROP, cap)  # EINVAL on kernels without the capability; EPERM unprivileged
    header = _CapHeader(_CAP_VERSION_3, 0)
    data = (_CapData * 2)()
    if _libc.capget(ctypes.byref(header), data) != 0:
        return
    for cap in DROPPED_CAPABILITIES:
        word, bit = divmod(cap, 32)
        mask = ~(1 << bit) & 0xFFFFFFFF
        data[word].effective &= mask
        data[word].permitted &= mask
        data[word].inheritable &= mask
    _libc.capset(ctypes.byref(header), data)


def process_stats() -> list[tuple[int, list[bytes]]]:
    """Every process's pid and the fields of its /proc/PID/stat after the command name (the
    state first: field N of proc(5) is at index N - 3)."""
    stats: list[tuple[int, list[bytes]]] = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                stats.append((int(name), stat.read().rsplit(b")", 1)[1].split()))
        except (OSError, IndexError):
            continue
    return stats


def _children_of() -> dict[int, list[int]]:
    """Every process's children, from the parent pids in /proc/*/stat."""
    children: dict[int, list[int]] = {}
    for pid, fields in process_stats():
        children.setdefault(int(fields[1]), []).append(pid)
    return children


def descendants(root: int) -> set[int]:
    """The pids of every live or zombie descendant of ``root``."""
    children = _children_of()
    found: set[int] = set()
    todo = list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(children.get(pid, ()))
    return found


def _reap_without_waiting(statuses: dict[int, int]) -> bool:
    """Collect every child that has ended; whether any child (live or not) remains."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True
        statuses[pid] = status


def kill_descendants(statuses: dict[int, int]) -> None:
    """Stop every descendant until no new one appears (a stopped process cannot fork), kill them
    all, and reap every child until none is left. Orphans of killed processes come to us too."""
    if not _reap_without_waiting(statuses):
        return  # no child at all: as a subreaper, that means no descendant either
    me = os.getpid()
    stopped: set[int] = set()
    while True:
        new = descendants(me) - stopped
        if not new:
            break
        for pid in new:
            _signal_quietly(pid, signal.SIGSTOP)
        stopped |= new
    for pid in stopped:
        _signal_quietly(pid, signal.SIGKILL)
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            return
        statuses[pid] = status


def _signal_quietly(pid: int, number: int) -> None:
    try:
        os.kill(pid, number)
    except (ProcessLookupError, PermissionError):
        pass  # gone already, or not ours to signal


def _on_sigterm(signum: int, frame: object) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise _Stop


def _start(argv: list[str]) -> int:
    pid = os.fork()
    if pid:
        return pid
    try:
        for number in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGTERM):
            signal.signal(number, signal.SIG_DFL)
        os.execvp(argv[0], argv)
    except OSError as exc:
        os.write(2, f"cannot run {argv[0]}: {exc.strerror}\n".encode(errors="replace"))
    os._exit(127)


def _wait_for(child: int, statuses: dict[int, int], *, until: float | None = None) -> int | None:
    """Reap children until ``child`` ends (its status) or, with ``until``, that time passes."""
    while child not in statuses:
        if until is None:
            pid, status = os.waitpid(-1, 0)
        else:
            if time.monotonic() >= until:
                return None
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                time.sleep(0.01)
                continue
        statuses[pid] = status
    return statuses[child]


def _exit_like(status: int | None) -> None:
    """Exit as the command did: same code, or killed by the same signal."""
    sys.stdout.flush()
    if status is None:
        status = signal.SIGKILL  # the command was killed with everything else
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        if number not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(number, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {number})
        os.kill(os.getpid(), number)
        os._exit(128 + number)
    os._exit(os.waitstatus_to_exitcode(status))


class _Options:
    """What the command line says (see the module docstring)."""

    def __init__(self, args: list[str]) -> None:
        self.parent = 0
        self.grace = 0.0
        self.lc_ctype: str | None = None
        self.keep_capabilities = False
        args = list(args)
        while args and args[0] != "--":
            option = args.pop(0)
            if option == "--keep-capabilities":
                self.keep_capabilities = True
            elif option in ("--parent", "--grace", "--lc-ctype") and args:
                value = args.pop(0)
                if option == "--parent":
                    self.parent = int(value)
                elif option == "--grace":
                    self.grace = float(value)
                else:
                    self.lc_ctype = value
            else:
                raise SystemExit(f"reaper: unknown option {option}")
        if len(args) < 2:
            raise SystemExit("reaper: usage: reaper.py [options] -- ARGV...")
        self.argv = args[1:]


def main(args: list[str]) -> None:
    """Run the command described by ``args`` (see the module docstring); never returns."""
    options = _Options(args)
    signal.signal(signal.SIGTERM, _on_sigterm)
    signal.pthread_sigmask(signal.SIG_SETMASK, ())  # the runner's thread may block some signals
    statuses: dict[int, int] = {}
    child = 0
    try:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if options.parent and os.getppid() != options.parent:
            raise _Stop  # the runner died before we could ask to follow it
        if not options.keep_capabilities:
            drop_capabilities()
        _prctl(_PR_SET_DUMPABLE, 0)
        _prctl(_PR_SET_CHILD_SUBREAPER, 1)
        if options.lc_ctype is None:
            os.environ.pop("LC_CTYPE", None)
        else:
            os.environ["LC_CTYPE"] = options.lc_ctype
        child = _start(options.argv)
        _wait_for(child, statuses)
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})  # from here on, we are ending
    except _Stop:  # the handler ignores any further SIGTERM
        if child and options.grace > 0 and child not in statuses:
            _signal_quietly(child, signal.SIGTERM)
            _wait_for(child, statuses, until=time.monotonic() + options.grace)
    kill_descendants(statuses)
    _exit_like(statuses.get(child))


if __name__ == "__main__":
    main(sys.argv[1:])
