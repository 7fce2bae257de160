"""How the models layer tells the user something (a retry and its wait) without printing.

A model object is shared by every session on a runtime (``runner serve``), so what it has to say
goes to whoever is waiting for it in this task: the session sets a listener for the time of its
run (``listening``), and ``notify`` calls it. Without a listener, notices are dropped.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator

__all__ = ["Listener", "listen", "listening", "notify", "stop"]

Listener = Callable[[str], None]

_listener: contextvars.ContextVar[Listener | None] = contextvars.ContextVar(
    "runner_model_notices", default=None
)


def notify(text: str) -> None:
    """Tell the listener of this task (if any) ``text``."""
    listener = _listener.get()
    if listener is not None:
        listener(text)


def listen(listener: Listener) -> contextvars.Token[Listener | None]:
    """Send the notices of this task's model calls to ``listener``, until ``stop(token)``."""
    return _listener.set(listener)


def stop(token: contextvars.Token[Listener | None]) -> None:
    """Stop what ``listen`` started (the listener before it is back)."""
    _listener.reset(token)


@contextlib.contextmanager
def listening(listener: Listener) -> Iterator[None]:
    """Send the notices of this task's model calls to ``listener`` while the block runs."""
    token = listen(listener)
    try:
        yield
    finally:
        stop(token)
