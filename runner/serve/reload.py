"""The agents ``runner serve`` offers, each with its runtime host; ``--watch`` swaps changes in.

``CatalogHolder`` keeps the catalog (which agents, from which files) and one ``RuntimeHost`` per
served agent: the agent's runtime (tool sources open, model client, prompts) is built on its first
request and shared by every later one. A reload (SPEC sections 11, 13) builds the runtime of an
edited agent at once, from the new configuration, reusing its unchanged sources (an MCP server
keeps running); requests already running finish on the old runtime, new ones get the new. A file
that turns invalid, or an agent whose new runtime cannot open (a tool module that fails to import,
a source that is down), keeps its last good configuration, with one line saying why. Watched:
every agent file found (valid or not), each agent's extends chain, templates and ``python:`` tool
modules (``runner.watch.watched_files``), and the served folders recursively for new or deleted
agent files. Each served workflow has a pool of its agents' runtimes (``pools.py``), reloaded the
same way: an edited team file gives the new workflow and its agents' new configurations; an invalid
edit keeps the last good workflow.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from contextlib import aclosing, asynccontextmanager
from pathlib import Path

from runner.agentfile.files import AGENT_SUFFIXES
from runner.errors import ConfigErrors, RunnerError
from runner.runtime.host import RuntimeHost
from runner.runtime.settings import RuntimeSettings
from runner.serve.catalog import Catalog, ServedAgent, ServedWorkflow, find_agent_files, load_catalog
from runner.serve.pools import WorkflowPools
from runner.workflow.agents import WorkflowAgents

__all__ = ["CatalogHolder"]


class CatalogHolder:
    """The catalog in use, a runtime host per agent, and how ``--watch`` replaces them."""

    def __init__(
        self,
        paths: Sequence[Path],
        catalog: Catalog,
        *,
        env: Mapping[str, str] | None = None,
        settings: RuntimeSettings | None = None,
        report: Callable[[str], None] | None = None,
    ) -> None:
        self.paths = list(paths)
        self.current = catalog
        self.settings = settings or RuntimeSettings()
        self._env = env
        self._report = report or (lambda line: None)
        self._hosts: dict[str, RuntimeHost] = {}
        self._pools = WorkflowPools()
        self._watched: tuple[Catalog, frozenset[Path]] | None = None
        self._stamps: dict[Path, tuple[int, int]] | None = None  # what ``refresh`` compares with
        self._listeners: dict[object, Callable[[], None]] = {}

    def on_reload(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call ``listener`` (on the event loop, must not raise) after each reload has swapped the
        catalog in, changed or not; the function returned unsubscribes it."""
        token = object()
        self._listeners[token] = listener

        def unsubscribe() -> None:
            self._listeners.pop(token, None)

        return unsubscribe

    def configure(self, settings: RuntimeSettings, report: Callable[[str], None]) -> None:
        """Use ``settings`` for the runtimes built from now on, ``report`` for their progress lines."""
        self.settings, self._report = settings, report

    def get(self, name: str) -> ServedAgent | None:
        """The agent served as model ``name`` right now."""
        return self.current.get(name)

    def workflow(self, name: str) -> ServedWorkflow | None:
        """The workflow served as model ``name`` right now."""
        return self.current.workflow(name)

    @asynccontextmanager
    async def workflow_agents(self, served: ServedWorkflow) -> AsyncIterator[WorkflowAgents]:
        """The pool of ``served``'s agents' runtimes for one request (made on the first one)."""
        async with self._pools.lease(served, self.settings) as agents:
            yield agents

    def host(self, name: str) -> RuntimeHost | None:
        """The runtime host of the agent served as ``name`` (its runtime is built on first use)."""
        agent = self.current.get(name)
        if agent is None:
            return None
        host = self._hosts.get(name)
        if host is None:
            host = self._hosts[name] = self._new_host(agent)
        return host

    def _new_host(self, agent: ServedAgent) -> RuntimeHost:
        from runner.session.opening import runtime_host

        report = self._report
        return runtime_host(
            agent.config,
            self.settings,
            on_progress=lambda label, text: report(f"{agent.name}: {label}: {text}"),
            warn=lambda text: report(f"{agent.name}: {text}"),
        )

    async def reload(self, changed: set[Path]) -> list[str]:
        """Load the paths again and swap the result in; one line per thing that changed or failed."""
        old = self.current
        new = load_catalog(self.paths, env=self._env)
        agents, workflows = dict(new.agents), dict(new.workflows)
        lines: list[str] = []
        for path, error in new.failures.items():
            taken = set(agents) | set(workflows)
            kept = {n: a for n, a in old.agents.items() if a.path == path and n not in taken}
            kept_flows = {n: w for n, w in old.workflows.items() if w.path == path and n not in taken}
            if kept or kept_flows:
                agents.update(kept)
                workflows.update(kept_flows)
                names = ", ".join([*kept, *kept_flows])
                lines.append(f"reload failed, keeping the last good config of {names}: {error}")
            elif path in changed or path not in old.failures:
                lines.append(f"skipped {error}")
        edited = await self._reload_agents(old, agents, changed, lines)
        edited += await self._reload_workflows(old, workflows, changed, lines)
        added = sorted((set(agents) | set(workflows)) - set(old.names()))
        removed = sorted(set(old.names()) - (set(agents) | set(workflows)))
        for name in sorted(set(old.agents) - set(agents)):
            host = self._hosts.pop(name, None)
            if host is not None:
                await host.aclose()
        for name in sorted(set(old.workflows) - set(workflows)):
            await self._pools.remove(name)
        self.current = Catalog(
            agents=agents, files=new.files, failures=new.failures, warnings=new.warnings, workflows=workflows
        )
        if added or removed or edited:
            names = ", ".join(sorted(p.name for p in changed)) or "files"
            parts = [f"+{n}" for n in added] + [f"-{n}" for n in removed] + [f"~{n}" for n in sorted(edited)]
            lines.append(f"reloaded ({names}): {' '.join(parts)}")
        for listener in list(self._listeners.values()):
            listener()
        return lines

    async def _reload_agents(
        self, old: Catalog, agents: dict[str, ServedAgent], changed: set[Path], lines: list[str]
    ) -> list[str]:
        """Rebuild the runtimes of the agents that changed (a failure keeps the old); their names."""
        from runner.watch import watched_files

        edited: list[str] = []
        for name, agent in list(agents.items()):
            previous = old.agents.get(name)
            if previous is None or agent is previous:
                continue
            if agent.config == previous.config and not (watched_files(agent.config) & changed):
                continue
            problem = await self._rebuild(name, agent)
            if problem is not None:
                agents[name] = previous
                lines.append(f"reload of {name} failed, keeping the last good config: {problem}")
            else:
                edited.append(name)
        return edited

    async def _reload_workflows(
        self, old: Catalog, workflows: dict[str, ServedWorkflow], changed: set[Path], lines: list[str]
    ) -> list[str]:
        """Give each changed workflow's pool its agents' new configurations (a failure keeps the
        last good workflow); the names of those that changed."""
        from runner.watch import watched_files

        edited: list[str] = []
        for name, served in list(workflows.items()):
            previous = old.workflows.get(name)
            if previous is None or served is previous:
                continue
            touched = [n for n, config in served.configs.items() if watched_files(config) & changed]
            same = served.workflow == previous.workflow and served.configs == previous.configs
            if same and not touched:
                continue
            problem = await self._pools.reload(served, rebuild=touched)
            if problem is not None:
                workflows[name] = previous
                lines.append(f"reload of {name} failed, keeping the last good config: {problem}")
            else:
                edited.append(name)
        return edited

    async def _rebuild(self, name: str, agent: ServedAgent) -> str | None:
        """Give the agent's host its new configuration (built now if it has a runtime); the error."""
        host = self._hosts.get(name)
        if host is None:
            return None
        try:
            await host.reload(agent.config)
        except RunnerError as exc:
            errors = list(exc) if isinstance(exc, ConfigErrors) else [exc]
            return "; ".join(str(e) for e in errors[:3])
        return None

    def _stamp(self) -> dict[Path, tuple[int, int]]:
        stamps: dict[Path, tuple[int, int]] = {}
        for path in self.watched():
            try:
                stat = path.stat()
            except OSError:
                stamps[path] = (0, 0)
            else:
                stamps[path] = (stat.st_mtime_ns, stat.st_size)
        return stamps

    async def refresh(self) -> list[str]:
        """Reload what changed on disk since the last look (no watcher: the Open WebUI pipe).

        The first call only takes note of the files as they are.
        """
        now = self._stamp()
        if self._stamps is None:
            self._stamps = now
            return []
        changed = {p for p in now.keys() | self._stamps.keys() if now.get(p) != self._stamps.get(p)}
        found, _ = find_agent_files(self.paths)
        changed |= {p for p in found if p not in self._stamps}
        if not changed:
            return []
        lines = await self.reload(changed)
        self._stamps = self._stamp()
        return lines

    def watched(self) -> set[Path]:
        """Every file whose change triggers a reload (the folders are watched besides).

        Worked out once per catalog (it reads each agent file's extends chain): the pipe asks on
        every request.
        """
        from runner.watch import watched_files

        cached = self._watched
        if cached is not None and cached[0] is self.current:
            return set(cached[1])
        files = {p.resolve() for p in self.current.files} | {p.resolve() for p in self.current.failures}
        for agent in self.current.agents.values():
            files |= watched_files(agent.config)
        for served in self.current.workflows.values():
            for config in served.configs.values():
                files |= watched_files(config)
        self._watched = (self.current, frozenset(files))
        return files

    async def aclose(self) -> None:
        """Close every agent's runtime and every workflow's pool (the server is stopping)."""
        hosts, self._hosts = list(self._hosts.values()), {}
        for host in hosts:
            await host.aclose()
        await self._pools.aclose()

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
                    for line in await self.reload(changed):
                        report(line)
                    files = self.watched()
                    if _outside(files, folders) != outside:
                        break  # files in a folder not watched yet: restart the watchers


def _outside(files: set[Path], folders: list[Path]) -> set[Path]:
    """The folders of ``files`` that the recursive watch of ``folders`` does not cover."""
    return {f.parent for f in files if not any(f.is_relative_to(folder) for folder in folders)}


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
