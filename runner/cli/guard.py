"""What the ``runner`` command writes on stdout and stderr: valid text, with secrets redacted (issue 12).

Transcripts and cassettes redact secrets as they are written; the terminal and ``--json`` stdout get
the same treatment here, for everything the command writes there: answers, reasoning, tool results,
model error bodies, hook failures, notes. ``install()`` (in ``main``) wraps ``sys.stdout`` and
``sys.stderr``; the secrets are

- the values the agent file took from variables named like secrets (``note_secrets(config)``, where a
  command loads an agent), and its literal ``api_key``;
- the values of environment variables named like secrets (``is_secret_name``) that look like
  credentials: at least 8 characters, not a path, not a plain lowercase word.

Streamed text arrives in pieces, and a secret can be split between two of them: a stream holds back
the end of what it was given while that end could be the start of a secret, until the next write
shows whether it is (at most the length of the longest secret, and only while it matches one).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, TextIO

from runner.redact import Redactor, environment_secrets
from runner.text import valid_text

if TYPE_CHECKING:
    from runner.agentfile.config import AgentConfig

__all__ = ["GuardedStream", "Secrets", "install", "note_secrets", "secrets"]


class Secrets:
    """The secret values known so far, shared by the guarded streams."""

    def __init__(self) -> None:
        self._values: set[str] = set()
        self.redactor = Redactor(())

    def add(self, values: Iterable[str]) -> None:
        new = {v for v in values if v and len(v) >= 4} - self._values
        if new:
            self._values |= new
            self.redactor = Redactor(self._values)

    def from_environment(self, environ: dict[str, str] | os._Environ[str]) -> None:
        self.add(environment_secrets(environ))

    def held_back(self, text: str) -> int:
        """How many characters at the end of ``text`` could begin a secret (0: none)."""
        best = 0
        for pattern in self.redactor.patterns:
            for size in range(min(len(pattern) - 1, len(text)), best, -1):
                if text.endswith(pattern[:size]):
                    best = size
                    break
        return best


class GuardedStream:
    """A text stream that writes valid text with secrets redacted to the stream it wraps."""

    def __init__(self, stream: TextIO, known: Secrets) -> None:
        self._stream = stream
        self._secrets = known
        self._pending = ""
        self._lock = threading.Lock()

    def write(self, text: str) -> int:
        with self._lock:
            data = self._pending + valid_text(text)
            if self._secrets.redactor.patterns:
                data = self._secrets.redactor(data)
                keep = self._secrets.held_back(data)
                self._pending = data[len(data) - keep :] if keep else ""
                data = data[: len(data) - keep] if keep else data
            if data:
                self._stream.write(data)
        return len(text)

    def drain(self) -> None:
        """Write what was held back (the end of the output: no secret can follow)."""
        with self._lock:
            pending, self._pending = self._pending, ""
            if pending:
                self._stream.write(pending)
            self._stream.flush()

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self._stream.flush()

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding, ... of the real stream
        return getattr(self._stream, name)


secrets = Secrets()
_installed: list[GuardedStream] = []


def install() -> None:
    """Guard ``sys.stdout`` and ``sys.stderr`` (once); secrets from the environment are known at once."""
    if _installed:
        return
    secrets.from_environment(os.environ)
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is None or isinstance(stream, GuardedStream):
            continue
        guarded = GuardedStream(stream, secrets)
        setattr(sys, name, guarded)
        _installed.append(guarded)
    atexit.register(drain)


def drain() -> None:
    """Write out what the guarded streams held back."""
    for stream in _installed:
        with contextlib.suppress(OSError, ValueError):  # closed, or the reader went away
            stream.drain()


def note_secrets(config: AgentConfig) -> None:
    """Redact this agent's secrets (``${VAR}`` values named like secrets, its ``api_key``) too."""
    secrets.add(config.secrets)
