"""Watching an agent's files for ``--watch`` (SPEC section 13), with watchfiles.

Watched: the agent file and every file of its ``extends`` chain, its template files, its skills'
``SKILL.md`` files, and the Python files of its ``python:`` tools and hooks that live under the
agent's folder (never site-packages). Saves that come in a burst are debounced into one change.
What to do with a change (reload a session, swap a served agent) is the caller's; this module only
watches.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from runner.agentfile.members import watched_files

if TYPE_CHECKING:
    from runner.session import Session

__all__ = ["DEBOUNCE_MS", "watch_files", "watch_session", "watched_files"]

#: Saves closer together than this are one change (editors write files in several steps).
DEBOUNCE_MS = 80


async def watch_files(
    files: Iterable[Path], *, stop: asyncio.Event | None = None, debounce_ms: int = DEBOUNCE_MS
) -> AsyncIterator[set[Path]]:
    """Yield the set of changed files each time some of ``files`` change (created, edited, deleted)."""
    from watchfiles import awatch

    wanted = {p.resolve() for p in files}
    folders = sorted({p.parent for p in wanted if p.parent.exists()})

    def interesting(_change: object, path: str) -> bool:
        return Path(path).resolve() in wanted

    async for changes in awatch(
        *folders, watch_filter=interesting, debounce=debounce_ms, step=20, stop_event=stop, recursive=False
    ):
        yield {Path(path).resolve() for _, path in changes}


async def watch_session(session: Session, *, stop: asyncio.Event) -> None:
    """Reload ``session``'s agent whenever its files change, until ``stop`` is set.

    A valid change is opened and checked now (``Session.reload``: its runtime is built, reusing the
    sources that did not change) and used from the next turn boundary (one note says what changed;
    a ``reload`` event goes to the transcript). An invalid change keeps the last good configuration
    and reports the error with its location; the session never dies of an edit.
    """
    from runner.agentfile import load_agent
    from runner.errors import ConfigErrors, RunnerError
    from runner.session.events import Note

    while not stop.is_set():
        config = session.config
        files = watched_files(config)
        async for changed in watch_files(files, stop=stop):
            names = ", ".join(sorted(p.name for p in changed))
            try:
                agent_name = config.name if config.team else None
                new_config = load_agent(
                    config.path, agent=agent_name, extra_vars=list(session.options.variables)
                )
                changes = await session.reload(new_config)
            except RunnerError as exc:
                errors = list(exc) if isinstance(exc, ConfigErrors) else [exc]
                text = "; ".join(str(e) for e in errors[:5])
                session.sink(Note(f"reload failed ({names}), keeping the last good config: {text}", "error"))
                session.record_event("reload_failed", files=sorted(str(p) for p in changed), error=text)
                continue
            session.sink(Note(f"reloaded {config.name} ({names}): {changes}"))
            break  # the set of watched files may have changed
