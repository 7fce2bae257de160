"""One ``WorkflowAgents`` pool per served workflow, shared by its requests; ``--watch`` swaps changes in.

A served workflow's pool (its step agents' runtimes: tool sources open, model clients) is made on
the workflow's first request and shared by every later one, so concurrent requests of the same
workflow run at once on it and an MCP server starts once. A reload gives the pool the agents' new
configurations (``WorkflowAgents.reload``: runtimes built at once, unchanged sources reused; one
that cannot open leaves the pool as it was and the reload is refused). When only files the agents
read changed (a ``python:`` tool module edited, their configuration the same), the pool is replaced
by a new one whose runtimes are built at once; the old one closes when its last request is done.
Requests already running keep the pool, and the workflow configuration, they started with.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
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

    async def reload(
        self, served: ServedWorkflow, settings: RuntimeSettings, *, files_changed: bool
    ) -> str | None:
        """Give the workflow's pool (if it has one) ``served``'s agent configurations; the error that
        kept it from doing so (nothing changed then), or None."""
        pool = self._pools.get(served.name)
        if pool is None:
            return None
        try:
            if served.configs != pool.agents.configs:
                await pool.agents.reload(served.configs)
            elif files_changed:
                await self._replace(served, settings, pool)
        except RunnerError as exc:
            return _problem(exc)
        return None

    async def _replace(self, served: ServedWorkflow, settings: RuntimeSettings, pool: _Pool) -> None:
        """A new pool whose runtimes are built now (edited tool code imported again); the old one
        retires. Raises, keeping the old one, when a runtime cannot open."""
        fresh = self._new(served, settings)
        try:
            for name in served.configs:
                async with fresh.lease(name):
                    pass
        except BaseException:
            await fresh.aclose()
            raise
        self._pools[served.name] = _Pool(fresh)
        await pool.retire()

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
