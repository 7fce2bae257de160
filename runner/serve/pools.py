"""One ``WorkflowAgents`` pool per served workflow, shared by its requests; ``--watch`` swaps changes in.

A served workflow's pool (its step agents' runtimes: tool sources open, model clients) is made on
the workflow's first request and shared by every later one, so concurrent requests of the same
workflow run at once on it and an MCP server starts once. A reload gives the pool the agents' new
configurations (``WorkflowAgents.reload``: runtimes built at once, unchanged sources reused, an
edited ``python:`` tool module imported again; one that cannot open leaves the pool as it was and
the reload is refused). A request keeps the workflow configuration it started with, and each of
its steps the runtime it leased; its next steps get the new runtimes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Collection
from contextlib import asynccontextmanager

from runner.errors import ConfigErrors, RunnerError
from runner.runtime.settings import RuntimeSettings
from runner.serve.catalog import ServedWorkflow
from runner.workflow.agents import WorkflowAgents

__all__ = ["WorkflowPools"]


class _Pool:
    """A pool and how many requests run on it; a retired pool closes when the last one ends."""

    def __init__(self, agents: WorkflowAgents) -> None:
        self.agents = agents
        self.runs = 0
        self.retired = False

    async def retire(self) -> None:
        self.retired = True
        if self.runs == 0:
            await self.agents.aclose()


def _problem(exc: RunnerError) -> str:
    errors = list(exc) if isinstance(exc, ConfigErrors) else [exc]
    return "; ".join(str(e) for e in errors[:3])


class WorkflowPools:
    """The pools of the served workflows, by model id."""

    def __init__(self) -> None:
        self._pools: dict[str, _Pool] = {}

    def _new(self, served: ServedWorkflow, settings: RuntimeSettings) -> WorkflowAgents:
        # a served workflow never records or replays a cassette: each request is live
        return WorkflowAgents(served.configs, dataclasses.replace(settings, record=None, replay=None))

    @asynccontextmanager
    async def lease(self, served: ServedWorkflow, settings: RuntimeSettings) -> AsyncIterator[WorkflowAgents]:
        """``async with pools.lease(served, settings) as agents``: the workflow's pool for one request."""
        pool = self._pools.get(served.name)
        if pool is None:
            pool = self._pools[served.name] = _Pool(self._new(served, settings))
        pool.runs += 1
        try:
            yield pool.agents
        finally:
            pool.runs -= 1
            if pool.retired and pool.runs == 0:
                await pool.agents.aclose()

    async def reload(self, served: ServedWorkflow, *, rebuild: Collection[str] = ()) -> str | None:
        """Give the workflow's pool (if it has one) ``served``'s agent configurations, the agents in
        ``rebuild`` built again even if their configuration is the same (a tool module was edited);
        the error that kept it from doing so (nothing changed then), or None."""
        pool = self._pools.get(served.name)
        if pool is None:
            return None
        try:
            await pool.agents.reload(served.configs, rebuild=rebuild)
        except RunnerError as exc:
            return _problem(exc)
        return None

    async def remove(self, name: str) -> None:
        """The workflow is no longer served: its pool closes once its requests are done."""
        pool = self._pools.pop(name, None)
        if pool is not None:
            await pool.retire()

    async def aclose(self) -> None:
        """Close every pool (the server is stopping; runtimes still leased close when let go)."""
        pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            pool.retired = True
            await pool.agents.aclose()
