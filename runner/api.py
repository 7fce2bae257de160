"""The Python API: load an agent file (or a team file's workflow), run it (sync or async), stream it.

``Agent`` is the front door for Python callers, as ``runner run`` is for the terminal. What the file
names is resolved as every door resolves it (``runner.runnable.resolve``: an agent, a team member
with ``agent=``, or a team file's ``workflow:``), and each call runs on that target's runner: a new
``Session`` on the agent's runtime (opened once), or one workflow run on its pool of agents::

    import runner

    agent = runner.Agent.from_file("agent.yaml", vars={"units": "metric"})
    result = agent.run_sync("What's the weather in Paris?")      # opens, runs, closes
    print(result.output, result.outcome.status)

    async with runner.Agent.from_file("agent.yaml") as agent:    # one runtime for many runs
        first = await agent.run("Hello")
        async for event in agent.stream("And tomorrow?"):
            if isinstance(event, runner.TextChunk):
                print(event.text, end="")

Errors are ``RunnerError`` subclasses (``ConfigError`` for a bad file, ``ModelError`` when the model
cannot be reached); a limit that ends a turn is not an error: ``result.outcome.status`` says so, as
every door reads it (``runner.Outcome``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from runner.agentfile.config import AgentConfig
from runner.models.base import Model
from runner.runnable import AgentRunner, Target, WorkflowRunner, resolve
from runner.runtime.settings import RuntimeSettings
from runner.session import RunOptions, RunResult, Session
from runner.session.events import EventSink, LoopEvent, WorkflowStep
from runner.workflow.engine import WorkflowResult

__all__ = ["Agent", "load"]


class Agent:
    """An agent file (or a team file's workflow) for use from Python; it opens on first use."""

    def __init__(
        self,
        config: AgentConfig | Target,
        *,
        settings: RuntimeSettings | None = None,
        model: Model | None = None,
    ) -> None:
        if isinstance(config, AgentConfig):
            config = Target("agent", config.path, config=config, configs={config.name: config})
        self.target = config
        self.settings = settings or RuntimeSettings(write_transcript=False)
        self._model = model
        self._runner: AgentRunner | WorkflowRunner | None = None
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
        """Load and validate ``path``; ``ConfigError`` if invalid.

        ``agent``: a member of a team file; a team file with a ``workflow:`` and no ``agent`` runs
        its workflow. ``rev``: the file, its ``extends`` chain, templates and modules as they were at
        that git revision of its repository (``path`` may also be a ``git+URL#REV:path`` reference).

        ``vars`` are defaults for every run (a run's own ``vars`` win); ``model`` replaces the model
        the file names (a ``runner.testing.ScriptedModel`` in tests; every agent of a workflow).
        """
        home = settings.home if settings is not None else None
        target = resolve(str(path), agent=agent, rev=rev, env=env, extra_vars=list(vars or ()), home=home)
        if vars:
            configs = {n: replace(c, vars={**c.vars, **vars}) for n, c in target.configs.items()}
            config = configs.get(target.config.name) if target.config is not None else None
            target = replace(target, config=config, configs=configs)
        return cls(target, settings=settings, model=model)

    @property
    def name(self) -> str:
        """The agent's (or the workflow's) name."""
        return self.target.name

    @property
    def config(self) -> AgentConfig:
        """The agent's configuration (a workflow: ``ConfigError``; see ``target.configs``)."""
        if self.target.config is None:
            from runner.errors import ConfigError

            raise ConfigError(f"{self.name} is a workflow: its agents are in agent.target.configs")
        return self.target.config

    @property
    def is_workflow(self) -> bool:
        """Whether this runs a team file's workflow."""
        return self.target.workflow is not None

    async def _opened(self) -> AgentRunner | WorkflowRunner:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._runner is None:
                if self.target.workflow is not None:
                    given = self._model
                    self._runner = WorkflowRunner(
                        self.target, self.settings, model_for=(lambda _: given) if given else None
                    )
                else:
                    self._runner = AgentRunner(self.config, self.settings, model=self._model)
                await self._runner.open()
            return self._runner

    async def open(self) -> None:
        """Open now what the first run would (the agent's tool sources and model client)."""
        await self._opened()

    async def aclose(self) -> None:
        """Close the runtime (its MCP servers, HTTP clients); the next run opens a new one."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.aclose()

    async def __aenter__(self) -> Agent:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def session(self, *, sink: EventSink | None = None, options: RunOptions | None = None) -> Session:
        """A new session (conversation) of the agent; ``await session.run([...])``, then ``close()``."""
        runner = await self._opened()
        if not isinstance(runner, AgentRunner):
            from runner.errors import ConfigError

            raise ConfigError(f"{self.name} is a workflow: it runs with run(), not in a session")
        return await runner.session(options=options, sink=sink)

    async def run(
        self,
        *prompts: str,
        vars: Mapping[str, Any] | None = None,
        yes: bool = False,
        sink: EventSink | None = None,
        options: RunOptions | None = None,
    ) -> RunResult | WorkflowResult:
        """Run ``prompts`` in one new session, in order (and what hooks queue); the result. A
        workflow runs once on the prompts joined by blank lines: a ``WorkflowResult``. Both have
        ``output`` and ``outcome``.

        ``yes`` allows tools that ask for confirmation (as ``--yes``); ``sink`` sees every event.
        """
        runner = await self._opened()
        if isinstance(runner, WorkflowRunner):
            return await self._run_workflow(runner, prompts, vars=vars, yes=yes, sink=sink)
        options = options or RunOptions(variables=dict(vars or {}), assume_yes=yes)
        session = await runner.session(sink=sink, options=options)
        try:
            return await session.run(prompts)
        finally:
            await session.close()

    async def _run_workflow(
        self,
        runner: WorkflowRunner,
        prompts: tuple[str, ...],
        *,
        vars: Mapping[str, Any] | None,
        yes: bool,
        sink: EventSink | None,
    ) -> WorkflowResult:
        runner.assume_yes = yes
        on_event = (lambda event: sink(WorkflowStep(event))) if sink is not None else None
        await runner.run("\n\n".join(prompts), variables=dict(vars or {}), on_event=on_event, sink=sink)
        assert runner.last is not None
        return runner.last

    def run_sync(self, *prompts: str, **kwargs: Any) -> RunResult | WorkflowResult:
        """``run`` from synchronous code: opens the runtime, runs, closes it (``asyncio.run``, not waiting
        forever for a tool that ignores cancellation)."""

        async def once() -> RunResult | WorkflowResult:
            try:
                return await self.run(*prompts, **kwargs)
            finally:
                await self.aclose()

        from runner.tools.bounded import run_to_end

        return run_to_end(once())

    async def stream(
        self, *prompts: str, vars: Mapping[str, Any] | None = None, yes: bool = False
    ) -> AsyncIterator[LoopEvent]:
        """The events of ``run`` as they happen (text chunks, tool calls, results, usage, turn ends;
        a workflow's ``WorkflowStep`` events among its agents' own)."""
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
