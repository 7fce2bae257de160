"""The ``shell`` toolset: one tool, ``shell``, that runs a command with ``/bin/sh -c`` (POSIX only).

Options: ``cwd`` (the working folder, relative to the agent file, created when missing; default the
agent file's folder), ``timeout_s`` (default 30), ``output_chars`` (default 20000), ``env`` (variables
added to the environment), ``inherit_env`` (default true; false passes only PATH, HOME, LANG and
``env``) and ``inherit_secrets`` (default false). The tool asks for confirmation unless the source says
``confirm: false``.

Variables that hold credentials (``is_secret_name``: names with KEY, TOKEN, SECRET, PASSWORD,
CREDENTIAL ..., ending in PWD, PAT, PASS or AUTH, or values that are URLs with a password) are not
passed on from the runner's environment unless ``inherit_secrets: true``: a command the model
writes must not be able to print the agent's API keys. A secret a command needs goes in ``env``
(``GITHUB_TOKEN: ${GITHUB_TOKEN}``), where the agent file names it. Nor can a command read them from
the runner's ``/proc`` files: see ``runner.tools.procs`` (Linux).

Each command runs in its own session and process group with stdin closed; stdout and stderr are read
together, in the order written. On Linux it runs under the reaper (``runner.tools.procs``): when the
command ends, times out or its call is cancelled, every process it started is killed, those that
detached (``setsid -f``, double forks) included, unless a command kills the reaper itself (then its
process group and session are killed). Elsewhere the process group is killed, and a process that
left it survives. The session's exit stack kills any command still running when the session closes.
"""

from __future__ import annotations

import asyncio
import os
import signal
from typing import TYPE_CHECKING, Any

from runner.agentfile.interpolate import is_secret_name
from runner.errors import ToolError
from runner.tools.base import RunContext, Tool
from runner.tools.procs import Child

if TYPE_CHECKING:
    from pathlib import Path

    from runner.tools.toolset import ToolsetContext

__all__ = ["OPTIONS_SCHEMA", "build"]

OPTIONS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "cwd": {
            "type": "string",
            "minLength": 1,
            "default": ".",
            "description": "the folder commands run in (relative to the agent file; created if missing)",
        },
        "timeout_s": {
            "type": "number",
            "exclusiveMinimum": 0,
            "default": 30,
            "description": "seconds before a command and every process it started are killed",
        },
        "output_chars": {
            "type": "integer",
            "minimum": 1,
            "default": 20_000,
            "description": "the most output characters returned (the middle is cut)",
        },
        "env": {
            "type": "object",
            "additionalProperties": {"type": ["string", "number"]},
            "default": {},
            "description": "environment variables set for every command",
        },
        "inherit_env": {
            "type": "boolean",
            "default": True,
            "description": "pass the runner's environment on (false: only PATH, HOME, LANG and env)",
        },
        "inherit_secrets": {
            "type": "boolean",
            "default": False,
            "description": "also pass on variables that hold credentials (names with KEY, TOKEN, "
            "SECRET, PASSWORD, ... or URLs with a password; withheld by default; name one in env to "
            "pass just that one)",
        },
    },
    "additionalProperties": False,
}

_KEPT_WITHOUT_INHERIT = ("PATH", "HOME", "LANG")
_TIMEOUT_GRACE_S = 5.0


def build(options: dict[str, Any], ctx: ToolsetContext) -> list[Tool]:
    """The ``shell`` tool; ``confirm`` is on unless the source sets ``confirm: false``."""
    cwd = ctx.folder(str(options["cwd"]), option="cwd")
    if options["inherit_env"]:
        env = {
            key: value
            for key, value in os.environ.items()
            if options["inherit_secrets"] or not is_secret_name(key, value)
        }
    else:
        env = {key: os.environ[key] for key in _KEPT_WITHOUT_INHERIT if key in os.environ}
    env.update({str(key): str(value) for key, value in options["env"].items()})
    shell = _Shell(
        cwd, timeout_s=float(options["timeout_s"]), output_chars=int(options["output_chars"]), env=env
    )
    ctx.stack.callback(shell.kill_all)

    async def call(arguments: dict[str, Any], run: RunContext) -> str:
        return await shell.run(str(arguments["command"]))

    return [
        Tool(
            name="shell",
            description=(
                "Run a shell command (/bin/sh -c) in the workspace folder and return its output "
                "(stdout and stderr together) and exit code; a non-zero exit code is reported as an "
                f"error. No input is available (stdin is closed). The command is killed after "
                f"{shell.timeout_s:g} s; output past {shell.output_chars} characters is cut in the "
                "middle. Processes left running in the background are stopped when the command ends."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "command": {"type": "string", "minLength": 1, "description": "the command line to run"}
                },
                "required": ["command"],
            },
            source_kind="builtin",
            source_id="shell",
            call=call,
            confirm=ctx.confirm is not False,
            timeout_s=shell.timeout_s + _TIMEOUT_GRACE_S,
        )
    ]


class _Shell:
    """Runs commands in one folder with one environment, and tracks the ones still running."""

    def __init__(self, cwd: Path, *, timeout_s: float, output_chars: int, env: dict[str, str]) -> None:
        self.cwd = cwd
        self.timeout_s = timeout_s
        self.output_chars = output_chars
        self.env = env
        self.live: set[Child] = set()
        self.closed = False

    async def run(self, command: str) -> str:
        """Run ``command``; its output and exit code, or a ToolError (non-zero exit, timeout)."""
        output = _Output(self.output_chars)
        try:
            child = await Child.start(
                ["/bin/sh", "-c", command],
                on_output=lambda fd, data: output.feed(data),
                cwd=self.cwd,
                env=self.env,
                stderr=asyncio.subprocess.STDOUT,
            )
        except OSError as exc:
            raise ToolError(f"Cannot start /bin/sh in {self.cwd}: {exc.strerror}") from None
        self.live.add(child)
        if self.closed:  # the session closed while this command was starting
            child.kill()
        try:
            timed_out = not await child.wait(self.timeout_s)
        finally:
            await child.stop()  # ends whatever is left, then reads what is left of the output
            self.live.discard(child)
        text = output.text().rstrip("\n") or "(no output)"
        if timed_out:
            raise ToolError(
                f"Command timed out after {self.timeout_s:g} s and was killed, with every process it "
                f"started. Output so far:\n{text}"
            )
        code = child.returncode
        if code is None or code < 0:
            number = -(code or signal.SIGKILL)
            raise ToolError(f"{text}\n[killed by signal {number} ({_signal_name(number)})]")
        if code != 0:
            raise ToolError(f"{text}\n[exit code {code}]")
        return f"{text}\n[exit code 0]"

    def kill_all(self) -> None:
        """Kill every command still running (the session is closing); later ones die at once."""
        self.closed = True
        for child in list(self.live):
            child.kill()
        self.live.clear()


class _Output:
    """Collects a stream's bytes keeping only its head and tail, so memory stays bounded."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        """Add a chunk."""
        self.total += len(data)
        room = self.limit - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > self.limit:
                del self.tail[: len(self.tail) - self.limit]

    def text(self) -> str:
        """The output, cut in the middle to ``limit`` characters with a note saying how much went."""
        dropped_bytes = self.total - len(self.head) - len(self.tail)
        head = self.head.decode("utf-8", errors="replace")
        tail = self.tail.decode("utf-8", errors="replace")
        if not dropped_bytes and len(head) + len(tail) <= self.limit:
            return (self.head + self.tail).decode("utf-8", errors="replace")
        keep_head = self.limit // 2
        keep_tail = self.limit - keep_head
        cut = max(len(head) - keep_head, 0) + max(len(tail) - keep_tail, 0) + dropped_bytes
        shown_tail = tail[-keep_tail:] if keep_tail else ""
        about = "about " if dropped_bytes else ""
        note = f"\n[... {about}{cut} characters cut; the output limit is {self.limit} ...]\n"
        return head[:keep_head] + note + shown_tail


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return "unknown signal"
