"""What runs on the Ray workers: ``ItemActor`` (one agent runtime, many items) and ``LimiterActor``.

An ``ItemActor`` loads the agent from the job's shipped folder (its ``working_dir``: the agent file,
its extends chain, templates and tool modules), opens one ``AgentRuntime`` on first use and runs
items with an ``ItemRunner``, several at once on its event loop; each item comes back as the plain
record ``ItemResult.as_record()``. When Ray restarts a killed actor, its next item opens the
runtime again.

``LimiterActor`` holds the one ``RateLimiter`` of a batch; each actor's model asks it before every
request (``RemoteLimiter``), so ``--rpm`` / ``--tpm`` hold across the whole cluster.

This module imports nothing of Ray: the driver wraps these classes with ``ray.remote``.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import runner.telemetry as telemetry
from runner.batch.inputs import BatchItem
from runner.batch.item import ItemRunner
from runner.batch.limiter import RateLimiter
from runner.errors import RunnerError
from runner.models.base import Model
from runner.runtime.runtime import AgentRuntime
from runner.runtime.settings import RuntimeSettings

__all__ = ["ItemActor", "LimiterActor", "RemoteLimiter"]


class LimiterActor:
    """The batch's ``RateLimiter``, in one place for the whole cluster."""

    def __init__(self, rpm: int | None, tpm: int | None, *, window_s: float = 60.0) -> None:
        self.limiter = RateLimiter(rpm=rpm, tpm=tpm, window_s=window_s)

    async def acquire(self) -> None:
        await self.limiter.acquire()

    def spent(self, tokens: int) -> None:
        self.limiter.spent(tokens)

    def waited_s(self) -> float:
        return self.limiter.waited_s


class RemoteLimiter(RateLimiter):
    """A ``RateLimiter`` whose turns and tokens are those of a ``LimiterActor`` (a Ray handle)."""

    def __init__(self, actor: Any) -> None:
        super().__init__()
        self._actor = actor

    async def acquire(self) -> None:
        await self._actor.acquire.remote()

    def spent(self, tokens: int) -> None:
        if tokens > 0:
            self._actor.spent.remote(tokens)


class ItemActor:
    """One agent runtime on a Ray worker; ``run`` is called for many items, several at once."""

    def __init__(
        self,
        agent: str,
        *,
        agent_name: str | None = None,
        settings: RuntimeSettings,
        variables: Mapping[str, Any],
        retries: int,
        assume_yes: bool,
        agent_sha256: str,
        in_flight: int,
        model: Model | None = None,
        limiter: Any = None,
    ) -> None:
        self.agent = agent
        """The agent file, relative to the job's working_dir (this worker's current folder)."""
        self.agent_name = agent_name
        """The team agent to run (``--agent``); None: the file's first or only agent."""
        self.settings = settings
        self.variables = dict(variables)
        self.retries = retries
        self.assume_yes = assume_yes
        self.agent_sha256 = agent_sha256
        self.in_flight = in_flight
        self.model = model
        self.limiter = limiter
        self._runtime: AgentRuntime | None = None
        self._runner: ItemRunner | None = None
        self._lock: asyncio.Lock | None = None

    async def _open(self) -> ItemRunner:
        from runner.agentfile import load_agent
        from runner.batch.pooled_model import batch_model
        from runner.session import open_runtime

        if self._runner is not None:
            return self._runner
        telemetry.setup(os.environ.get("RUNNER_OTEL") == "true")  # the driver's --otel
        self._lock = self._lock or asyncio.Lock()
        async with self._lock:
            if self._runner is None:
                config = load_agent(
                    Path(self.agent).resolve(), agent=self.agent_name, extra_vars=self.variables.keys()
                )
                limiter = RemoteLimiter(self.limiter) if self.limiter is not None else None
                model = batch_model(
                    config, self.settings, concurrency=self.in_flight, given=self.model, limiter=limiter
                )
                self._runtime = await open_runtime(config, self.settings, model=model)
                self._runner = ItemRunner(
                    self._runtime,
                    agent_sha256=self.agent_sha256,
                    variables=self.variables,
                    retries=self.retries,
                    assume_yes=self.assume_yes,
                )
        assert self._runner is not None
        return self._runner

    async def ready(self) -> str | None:
        """Open the runtime now; the problem as a sentence (None: ready)."""
        try:
            await self._open()
        except RunnerError as exc:
            return str(exc)
        except Exception as exc:  # a tool module that does not import, ...
            return f"{type(exc).__name__}: {exc}"
        return None

    async def run(self, item: BatchItem, trace: dict[str, str] | None = None) -> dict[str, Any]:
        """One item as its ``ItemResult`` record, with ``interrupted``; ``trace``: the driver's
        trace context (the item's spans continue the batch's trace)."""
        runner = await self._open()
        with telemetry.continue_trace(trace):
            result = await runner.run(item)
        return {**result.as_record(), "interrupted": result.interrupted}

    def interrupt(self) -> None:
        if self._runner is not None:
            self._runner.interrupt()

    def pid(self) -> int:
        import os

        return os.getpid()

    async def close(self) -> None:
        telemetry.flush(2.0)
        runtime, self._runtime, self._runner = self._runtime, None, None
        if runtime is not None:
            await runtime.aclose()
