"""The runtime in use for one agent, shared by its sessions and replaced on reload.

A ``RuntimeHost`` builds its agent's runtime on first use and hands it to every session that asks
(``acquire`` / ``release``, or ``lease()``). A reload builds the next runtime from the new
configuration with the current one as ``previous`` (unchanged sources and the model are shared);
if that fails, the current runtime stays and the error is raised. Once installed, new sessions get
the new runtime, sessions already running keep theirs, and a replaced runtime is closed when the
last of them lets go. ``runner serve`` and the Open WebUI pipe keep one host per served agent; the
CLI keeps one for its session, which picks up a reload at its next turn.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from runner.agentfile.config import AgentConfig
from runner.runtime.runtime import AgentRuntime, build_runtime

__all__ = ["Build", "RuntimeHost"]

Build = Callable[..., Awaitable[AgentRuntime]]
"""``build(config, previous=...)``: how a host makes runtimes (``build_runtime`` with its options)."""


class RuntimeHost:
    """The current runtime of one agent; replaced runtimes close once no session holds them."""

    def __init__(self, config: AgentConfig, *, build: Build | None = None, **options: Any) -> None:
        self.config = config
        self._build: Build = build or (lambda c, **kw: build_runtime(c, **options, **kw))
        self._current: AgentRuntime | None = None
        self._holds: dict[AgentRuntime, int] = {}
        self._lock = asyncio.Lock()
        self._closed = False

    @property
    def current(self) -> AgentRuntime | None:
        """The runtime new sessions get (None until first used)."""
        return self._current

    async def acquire(self) -> AgentRuntime:
        """The current runtime, built on first use; the caller ``release``s it when done."""
        if self._current is None:
            async with self._lock:
                if self._current is None:
                    self._current = await self._build(self.config)
                    self._holds[self._current] = 0
        runtime = self._current
        self._holds[runtime] += 1
        return runtime

    async def release(self, runtime: AgentRuntime) -> None:
        """A session is done with ``runtime``; a replaced runtime nobody holds is closed."""
        self._holds[runtime] -= 1
        if self._holds[runtime] == 0 and (runtime is not self._current or self._closed):
            del self._holds[runtime]
            await runtime.aclose()

    @asynccontextmanager
    async def lease(self) -> AsyncIterator[AgentRuntime]:
        """``async with host.lease() as runtime``: the current runtime for one session."""
        runtime = await self.acquire()
        try:
            yield runtime
        finally:
            await self.release(runtime)

    async def prepare(self, config: AgentConfig) -> AgentRuntime:
        """The runtime of ``config`` built to replace the current one (not in use yet)."""
        async with self._lock:
            return await self._build(config, previous=self._current)

    async def install(self, config: AgentConfig, runtime: AgentRuntime | None) -> None:
        """Make ``runtime`` (built by ``prepare`` from ``config``) the one new sessions get."""
        self.config = config
        old, self._current = self._current, runtime
        if runtime is not None:
            self._holds.setdefault(runtime, 0)
        if old is not None and old is not runtime and self._holds.get(old) == 0:
            del self._holds[old]
            await old.aclose()

    async def reload(self, config: AgentConfig) -> AgentRuntime | None:
        """Replace the runtime with one of ``config`` (raises, keeping the old one, if it cannot open).

        A host whose runtime was never built only takes the new configuration.
        """
        if self._current is None:
            self.config = config
            return None
        runtime = await self.prepare(config)
        await self.install(config, runtime)
        return runtime

    async def aclose(self) -> None:
        """Close the current runtime now, and the others as their sessions let go."""
        self._closed = True
        current, self._current = self._current, None
        if current is not None and self._holds.get(current) == 0:
            del self._holds[current]
            await current.aclose()
