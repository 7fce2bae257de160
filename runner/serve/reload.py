"""``runner serve --watch``: swap a new catalog in when agent files change (SPEC sections 11, 13).

Every request opens its session from the catalog entry current when it arrives and keeps that
spec to its end, so a swap never touches a running request: requests already running finish on
the old config. Watched: every agent file found (valid or not), each agent's extends chain,
templates and ``python:`` tool modules (``runner.watch.watched_files``), and the served folders
recursively for new or deleted agent files. A file that turns invalid keeps its last good agents;
edited tool modules are imported again before the swap (an import error keeps the old agent).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from contextlib import aclosing
from pathlib import Path

from runner.agentfile.files import AGENT_SUFFIXES
from runner.errors import ConfigError
from runner.serve.catalog import Catalog, ServedAgent, load_catalog

__all__ = ["CatalogHolder"]


class CatalogHolder:
    """The catalog in use, and how ``--watch`` replaces it."""

    def __init__(
        self, paths: Sequence[Path], catalog: Catalog, *, env: Mapping[str, str] | None = None
    ) -> None:
        self.paths = list(paths)
        self.current = catalog
        self._env = env

    def get(self, name: str) -> ServedAgent | None:
        """The agent served as model ``name`` right now."""
        return self.current.get(name)

    def reload(self, changed: set[Path]) -> list[str]:
        """Load the paths again and swap the result in; one line per thing that changed or failed."""
        from runner.watch import watched_files

        old = self.current
        new = load_catalog(self.paths, env=self._env)
        agents = dict(new.agents)
        lines: list[str] = []
        for path, error in new.failures.items():
            kept = {n: a for n, a in old.agents.items() if a.path == path and n not in agents}
            if kept:
                agents.update(kept)
                lines.append(f"reload failed, keeping the last good config of {', '.join(kept)}: {error}")
            elif path in changed or path not in old.failures:
                lines.append(f"skipped {error}")
        reimported: set[str] = set()
        for name, agent in list(agents.items()):
            previous = old.agents.get(name)
            if previous is None or agent is previous or not (watched_files(agent.spec) & changed):
                continue
            problem = _reimport_tools(agent, reimported)
            if problem is not None:
                agents[name] = previous
                lines.append(f"reload of {name} failed, keeping the last good config: {problem}")
        added = sorted(set(agents) - set(old.agents))
        removed = sorted(set(old.agents) - set(agents))
        edited = sorted(
            n
            for n in set(agents) & set(old.agents)
            if agents[n] is not old.agents[n]
            and (agents[n].spec != old.agents[n].spec or watched_files(agents[n].spec) & changed)
        )
        self.current = Catalog(agents=agents, files=new.files, failures=new.failures, warnings=new.warnings)
        if added or removed or edited:
            names = ", ".join(sorted(p.name for p in changed)) or "files"
            parts = [f"+{n}" for n in added] + [f"-{n}" for n in removed] + [f"~{n}" for n in edited]
            lines.append(f"reloaded ({names}): {' '.join(parts)}")
        return lines

    def watched(self) -> set[Path]:
        """Every file whose change triggers a reload (the folders are watched besides)."""
        from runner.watch import watched_files

        files = {p.resolve() for p in self.current.files} | {p.resolve() for p in self.current.failures}
        for agent in self.current.agents.values():
            files |= watched_files(agent.spec)
        return files

    async def watch(self, *, stop: asyncio.Event, report: Callable[[str], None]) -> None:
        """Reload on every change until ``stop`` is set; ``report`` gets one line per change.

        The watchers keep running across reloads (an edit made while one is applied is not lost);
        they restart only when a reload brings files in folders not watched yet.
        """
        folders = [p.resolve() for p in self.paths if p.is_dir()]
        files = self.watched()

        def wanted(path: Path) -> bool:
            return path in files or (
                path.suffix in AGENT_SUFFIXES and any(path.is_relative_to(f) for f in folders)
            )

        while not stop.is_set():
            outside = _outside(files, folders)
            async with aclosing(_changes(folders, outside, wanted, stop)) as changes:
                async for changed in changes:
                    for line in self.reload(changed):
                        report(line)
                    files = self.watched()
                    if _outside(files, folders) != outside:
                        break  # files in a folder not watched yet: restart the watchers


def _outside(files: set[Path], folders: list[Path]) -> set[Path]:
    """The folders of ``files`` that the recursive watch of ``folders`` does not cover."""
    return {f.parent for f in files if not any(f.is_relative_to(folder) for folder in folders)}


def _reimport_tools(agent: ServedAgent, done: set[str]) -> str | None:
    """Import the agent's ``python:`` tool modules again; the error text, or None."""
    from runner.tools.python import tools_from_module_path

    for source in agent.spec.tools:
        key = f"{source.base_dir}:{source.target}"
        if source.kind != "python" or key in done:
            continue
        try:
            tools_from_module_path(source.target, base_dir=source.base_dir, reload=True)
        except ConfigError as exc:
            return str(exc)
        done.add(key)
    return None


async def _changes(
    folders: list[Path], others: set[Path], wanted: Callable[[Path], bool], stop: asyncio.Event
) -> AsyncGenerator[set[Path], None]:
    """Sets of changed paths for which ``wanted`` holds: ``folders`` recursively, ``others`` flat."""
    from watchfiles import awatch

    from runner.watch import DEBOUNCE_MS

    queue: asyncio.Queue[set[Path]] = asyncio.Queue()
    # The watchers get a stop event of their own: watchfiles sets its stop event when it is
    # cancelled, and the caller's must stay clear when only this round of watching ends.
    local = asyncio.Event()

    async def pump(roots: list[Path], recursive: bool) -> None:
        async for batch in awatch(
            *roots,
            watch_filter=lambda _change, path: wanted(Path(path).resolve()),
            debounce=DEBOUNCE_MS,
            step=20,
            stop_event=local,
            recursive=recursive,
        ):
            queue.put_nowait({Path(path).resolve() for _, path in batch})

    tasks = []
    if folders:
        tasks.append(asyncio.create_task(pump(folders, True)))
    existing = sorted(p for p in others if p.is_dir())
    if existing:
        tasks.append(asyncio.create_task(pump(existing, False)))
    stopped = asyncio.create_task(stop.wait())
    try:
        while not stop.is_set():
            getter = asyncio.create_task(queue.get())
            done, _ = await asyncio.wait({getter, stopped}, return_when=asyncio.FIRST_COMPLETED)
            if getter not in done:
                getter.cancel()
                return
            yield getter.result()
    finally:
        local.set()
        stopped.cancel()
        if tasks:
            _, late = await asyncio.wait(tasks, timeout=2)
            for task in late:
                task.cancel()
