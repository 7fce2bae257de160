"""``WorkflowAgents``: the runtimes of a workflow's agents, one ``RuntimeHost`` per team agent.

A workflow run leases an agent's runtime for each agent step (``lease(name)``); the runtime is built
on the first step that needs it and shared by every later one. Whoever makes the pool owns it: a
single ``runner run`` makes one for its run; ``runner serve`` and ``runner batch`` make one per
served or batched workflow and share it across requests or items, so tool sources (an MCP server)
start once. ``reload(configs)`` (``--watch``) builds the runtimes of the agents whose configuration
changed, all of them before any is installed: one that cannot open leaves every agent as it was.
Sessions already running keep the runtime they leased; the next step gets the new one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Callable, Collection, Mapping
from contextlib import asynccontextmanager

from runner.agentfile.config import AgentConfig
from runner.errors import ConfigError
from runner.models.base import Model
from runner.runtime.host import RuntimeHost
from runner.runtime.runtime import AgentRuntime
from runner.runtime.settings import RuntimeSettings
from runner.session import open_runtime

__all__ = ["WorkflowAgents"]

#: The model an agent's runtime gets instead of its file's (a cassette's, a batch's rate-limited one).
ModelFor = Callable[[AgentConfig], Model | None]


class WorkflowAgents:
    """The team agents a workflow runs, each runtime built on first use and kept until ``aclose``."""

    def __init__(
        self,
        configs: Mapping[str, AgentConfig],
        settings: RuntimeSettings,
        *,
        model_for: ModelFor | None = None,
        clock: Callable[..., str] | None = None,
    ) -> None:
        self.settings = settings
        self._model_for = model_for
        self._clock = clock
        #: Agents not built yet whose files were edited since this process imported them: their
        #: first build imports their tool modules again.
        self._stale: set[str] = set()
        self._hosts: dict[str, RuntimeHost] = {n: self._host(n, config) for n, config in configs.items()}

    @property
    def configs(self) -> dict[str, AgentConfig]:
        """Each agent's configuration in use now."""
        return {name: host.config for name, host in self._hosts.items()}

    def _host(self, name: str, config: AgentConfig) -> RuntimeHost:
        async def build(new: AgentConfig, *, previous: AgentRuntime | None = None) -> AgentRuntime:
            model = self._model_for(new) if self._model_for is not None else None
            settings = self.settings
            if name in self._stale and previous is None:
                settings = dataclasses.replace(settings, refresh_sources=True)
            runtime = await open_runtime(new, settings, model=model, previous=previous, clock=self._clock)
            self._stale.discard(name)
            return runtime

        return RuntimeHost(config, build=build)

    def _named(self, name: str) -> RuntimeHost:
        host = self._hosts.get(name)
        if host is None:
            raise ConfigError(f"the workflow runs agent '{name}', which the team file does not define")
        return host

    async def acquire(self, name: str) -> AgentRuntime:
        """The agent's current runtime (built on first use: a source that cannot open raises); the
        caller gives it back with ``release``."""
        return await self._named(name).acquire()

    async def release(self, name: str, runtime: AgentRuntime) -> None:
        """A step is done with ``runtime`` (a runtime a reload replaced closes with its last step)."""
        await self._named(name).release(runtime)

    @asynccontextmanager
    async def lease(self, name: str) -> AsyncIterator[AgentRuntime]:
        """``async with agents.lease(NAME) as runtime``: the agent's current runtime for one step."""
        async with self._named(name).lease() as runtime:
            yield runtime

    async def reload(self, configs: Mapping[str, AgentConfig], *, rebuild: Collection[str] = ()) -> list[str]:
        """Use ``configs`` from the next step on; the names of the agents that changed.

        Every changed agent whose runtime is open gets its new runtime built first (unchanged
        sources reused); if one cannot open, the ones built are closed, nothing changes and the
        error is raised. The agents named in ``rebuild`` count as changed even when their
        configuration is the same (a file they read, such as a ``python:`` tool module, was edited).
        """
        changed = [
            n
            for n, c in configs.items()
            if n not in self._hosts or self._hosts[n].config != c or n in rebuild
        ]
        prepared: list[tuple[RuntimeHost, AgentConfig, AgentRuntime | None]] = []
        try:
            for name in changed:
                host = self._hosts.get(name)
                if host is None:
                    continue
                runtime = await host.prepare(configs[name]) if host.current is not None else None
                prepared.append((host, configs[name], runtime))
        except BaseException:
            for _host, _config, runtime in prepared:
                if runtime is not None:
                    await runtime.aclose()
            raise
        for host, config, runtime in prepared:
            if runtime is None:
                host.config = config
            else:
                await host.install(config, runtime)
        for name in changed:
            if name not in self._hosts:
                self._hosts[name] = self._host(name, configs[name])
            elif name in rebuild and self._hosts[name].current is None:
                self._stale.add(name)
        return changed

    async def aclose(self) -> None:
        """Close every runtime (those still leased close when their step lets go)."""
        hosts = list(self._hosts.values())
        for host in hosts:
            await host.aclose()
