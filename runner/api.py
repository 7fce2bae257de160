"""The Python API: load an agent file, run it (sync or async), stream its events.

``Agent`` is the front door for Python callers, as ``runner run`` is for the terminal. It opens the
agent's runtime once (tool sources, model client) and runs each call as a ``Session`` on it with
``Session.run``, like every other front door::

    import runner

    agent = runner.Agent.from_file("agent.yaml", vars={"units": "metric"})
    result = agent.run_sync("What's the weather in Paris?")      # opens, runs, closes
    print(result.output)

    async with runner.Agent.from_file("agent.yaml") as agent:    # one runtime for many runs
        first = await agent.run("Hello")
        async for event in agent.stream("And tomorrow?"):
            if isinstance(event, runner.TextChunk):
                print(event.text, end="")

Errors are ``RunnerError`` subclasses (``ConfigError`` for a bad file, ``ModelError`` when the model
cannot be reached); a limit that ends a turn is not an error: ``result.reason`` says so.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from runner.agentfile import agent_at, load_agent
from runner.agentfile.config import AgentConfig
from runner.models.base import Model
from runner.runtime.runtime import AgentRuntime
from runner.runtime.settings import RuntimeSettings
from runner.session import RunOptions, RunResult, Session, open_runtime
from runner.session.events import EventSink, LoopEvent

__all__ = ["Agent", "load"]


class Agent:
    """An agent file loaded for use from Python; its runtime opens on first use (or ``async with``)."""

    def __init__(
        self,
        config: AgentConfig,
        *,
        settings: RuntimeSettings | None = None,
        model: Model | None = None,
    ) -> None:
        self.config = config
        self.settings = settings or RuntimeSettings(write_transcript=False)
        self._model = model
        self._runtime: AgentRuntime | None = None
        self._lock: asyncio.Lock | None = None

    @classmethod
    def from_file(
        cls,
        path: str | Path,
        *,
        agent: str | None = None,
        vars: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
        settings: RuntimeSettings | None = None,
        model: Model | None = None,
        rev: str | None = None,
    ) -> Agent:
        """Load and validate ``path`` (``agent``: a member of a team file); ``ConfigError`` if invalid.

        ``rev``: the file, its ``extends`` chain, templates and modules as they were at that git
        revision of its repository (``path`` may also be a ``git+URL#REV:path`` reference).

        ``vars`` are defaults for every run (a run's own ``vars`` win); ``model`` replaces the model
        the file names (a ``runner.testing.ScriptedModel`` in tests).
        """
        if rev is not None or str(path).startswith("git+"):
            path = agent_at(str(path), rev=rev, home=settings.home if settings is not None else None)
        config = load_agent(Path(path), agent=agent, env=env, extra_vars=list(vars or ()))
        if vars:
            config = replace(config, vars={**config.vars, **vars})
        return cls(config, settings=settings, model=model)

    @property
    def name(self) -> str:
        """The agent's name."""
        return self.config.name

    async def open(self) -> AgentRuntime:
        """The agent's runtime, opened on the first call (tool sources, model client)."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._runtime is None:
                self._runtime = await open_runtime(self.config, self.settings, model=self._model)
            return self._runtime

    async def aclose(self) -> None:
        """Close the runtime (its MCP servers, HTTP clients); the next run opens a new one."""
        runtime, self._runtime = self._runtime, None
        if runtime is not None:
            await runtime.aclose()

    async def __aenter__(self) -> Agent:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def session(self, *, sink: EventSink | None = None, options: RunOptions | None = None) -> Session:
        """A new session (conversation) on the runtime; ``await session.run([...])``, then ``close()``."""
        return Session(await self.open(), sink=sink, options=options)

    async def run(
        self,
        *prompts: str,
        vars: Mapping[str, Any] | None = None,
        yes: bool = False,
        sink: EventSink | None = None,
        options: RunOptions | None = None,
    ) -> RunResult:
        """Run ``prompts`` in one new session, in order (and what hooks queue); the result.

        ``yes`` allows tools that ask for confirmation (as ``--yes``); ``sink`` sees every event.
        """
        options = options or RunOptions(variables=dict(vars or {}), assume_yes=yes)
        session = await self.session(sink=sink, options=options)
        try:
            return await session.run(prompts)
        finally:
            await session.close()

    def run_sync(self, *prompts: str, **kwargs: Any) -> RunResult:
        """``run`` from synchronous code: opens the runtime, runs, closes it (``asyncio.run``, not waiting
        forever for a tool that ignores cancellation)."""

        async def once() -> RunResult:
            try:
                return await self.run(*prompts, **kwargs)
            finally:
                await self.aclose()

        from runner.tools.bounded import run_to_end

        return run_to_end(once())

    async def stream(
        self, *prompts: str, vars: Mapping[str, Any] | None = None, yes: bool = False
    ) -> AsyncIterator[LoopEvent]:
        """The events of ``run`` as they happen (text chunks, tool calls, results, usage, turn ends)."""
        queue: asyncio.Queue[LoopEvent | None] = asyncio.Queue()
        task = asyncio.create_task(self.run(*prompts, vars=vars, yes=yes, sink=queue.put_nowait))
        task.add_done_callback(lambda _: queue.put_nowait(None))
        try:
            while (event := await queue.get()) is not None:
                yield event
            await task  # its errors, raised here
        finally:
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)


def load(path: str | Path, **kwargs: Any) -> Agent:
    """``Agent.from_file(path, ...)``."""
    return Agent.from_file(path, **kwargs)
