"""What tools and python hooks print goes to stderr, so stdout carries only the answer (or ``--json``).

A tool's ``print()`` used to land in the middle of the streamed answer on stdout and as a line that is
not JSON in ``runner run --json``. While a tool or hook runs (``printing_to_stderr``, a context
variable, so it follows the call into its worker thread and its tasks and nothing else), writes to
``sys.stdout`` go to ``sys.stderr`` instead. ``sys.stdout`` is wrapped once, on the first call; writes
from anything else pass through unchanged.
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
import threading
from collections.abc import Iterator
from typing import Any, TextIO

__all__ = ["printing_to_stderr"]

_in_user_code: contextvars.ContextVar[bool] = contextvars.ContextVar("runner_in_user_code", default=False)
_install_lock = threading.Lock()


class _StdoutRouter:
    """``sys.stdout`` that sends the writes of tools and hooks to ``sys.stderr``."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def _target(self) -> Any:
        return sys.stderr if _in_user_code.get() else self._stream

    def write(self, text: str) -> int:
        return int(self._target().write(text))

    def writelines(self, lines: Any) -> None:
        self._target().writelines(lines)

    def flush(self) -> None:
        self._stream.flush()
        if _in_user_code.get():
            sys.stderr.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _install() -> None:
    with _install_lock:
        if sys.stdout is not None and not isinstance(sys.stdout, _StdoutRouter):
            sys.stdout = _StdoutRouter(sys.stdout)


@contextlib.contextmanager
def printing_to_stderr() -> Iterator[None]:
    """Within this block (and the threads and tasks it starts), ``print()`` writes to stderr."""
    if not isinstance(sys.stdout, _StdoutRouter):
        _install()
    token = _in_user_code.set(True)
    try:
        yield
    finally:
        _in_user_code.reset(token)
