"""One call to run an agent file against the scripted model (in process) or the scripted server.

::

    from runner.testing import run_agent_sync, text, tool_call

    run = run_agent_sync("agent.yaml", "Weather in Paris?",
                         script=[tool_call("get_weather", city="Paris"), text("Sunny.")])
    assert run.output == "Sunny." and run.tools_called == ["get_weather"]

    with ScriptedServer([{"content": "Hi!"}]) as server:       # the real HTTP path
        run = run_agent_sync("agent.yaml", "Hello", server=server, fast_path=False)  # through litellm

The agent runs as ``runner run`` runs it (``Session.run``: hooks, limits, every turn hooks queue),
its tools for real, with no transcript unless ``settings`` asks for one, and calls that need a
confirmation refused as ``runner run`` without ``--yes`` and ``runner serve`` refuse them (the model
reads the refusal; ``run.outcome.refused`` names them) unless ``yes=True``. ``scripted_session``
opens a runtime and a session for tests that drive the session themselves.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from runner.agentfile import load_agent
from runner.agentfile.config import AgentConfig, ModelConfig
from runner.models.base import Model
from runner.runtime.settings import RuntimeSettings
from runner.session import RunOptions, RunResult, Session, open_runtime
from runner.session.events import AssistantMessage, LoopEvent, ToolFinished
from runner.session.outcome import Outcome
from runner.store.transcript import Transcript
from runner.testing.model import ScriptedModel, Step
from runner.testing.server import ScriptedServer

__all__ = ["ScriptedRun", "run_agent", "run_agent_sync", "scripted_session"]


@dataclass
class ScriptedRun:
    """What a scripted run did."""

    result: RunResult
    session: Session
    events: list[LoopEvent] = field(default_factory=list)
    #: The model's requests: ``Request`` values (scripted model) or parsed JSON bodies (server).
    requests: list[Any] = field(default_factory=list)

    @property
    def output(self) -> str:
        """The final answer."""
        return self.result.output

    @property
    def reason(self) -> str:
        """Why the run stopped ("done", "limit", "max_steps", "hook", ...)."""
        return self.result.reason

    @property
    def history(self) -> list[dict[str, Any]]:
        """The conversation as it ended."""
        return self.session.history

    @property
    def outcome(self) -> Outcome:
        """How the run ended, as every door reads it (status, exit code, tools called and refused)."""
        return self.result.outcome

    @property
    def tools_called(self) -> list[str]:
        """The names of the tools the model called, in order."""
        names: list[str] = []
        for event in self.events:
            if isinstance(event, AssistantMessage):
                names.extend(c["function"]["name"] for c in event.message.get("tool_calls") or ())
        return names

    @property
    def tool_results(self) -> list[str]:
        """The content of every tool result, in order."""
        return [e.result.content for e in self.events if isinstance(e, ToolFinished)]


def _config(
    agent: str | Path | AgentConfig, member: str | None, vars: Mapping[str, Any] | None
) -> AgentConfig:
    if isinstance(agent, AgentConfig):
        return agent
    return load_agent(Path(agent), agent=member, extra_vars=list(vars or ()))


def _on_server(config: AgentConfig, server: ScriptedServer) -> AgentConfig:
    """``config`` with its model pointed at ``server`` (an OpenAI-compatible endpoint)."""
    base = config.model or ModelConfig(id="openai/scripted")
    model = replace(base, id=f"openai/{server.model}", api_base=server.base_url, api_key=None, fallbacks=())
    return replace(config, model=model)


@asynccontextmanager
async def scripted_session(
    config: AgentConfig,
    model: Model | None = None,
    *,
    settings: RuntimeSettings | None = None,
    options: RunOptions | None = None,
    sink: Any = None,
    resume: Transcript | None = None,
) -> AsyncIterator[Session]:
    """A runtime on ``model`` (None: the file's) and a session on it; both closed at the end."""
    runtime = await open_runtime(config, settings or RuntimeSettings(write_transcript=False), model=model)
    try:
        session = Session(runtime, sink=sink, options=options, resume=resume)
        try:
            yield session
        finally:
            await session.close()
    finally:
        await runtime.aclose()


async def run_agent(
    agent: str | Path | AgentConfig,
    *prompts: str,
    script: Iterable[Step] | None = None,
    model: Model | None = None,
    server: ScriptedServer | None = None,
    fast_path: bool = True,
    vars: Mapping[str, Any] | None = None,
    yes: bool = False,
    agent_name: str | None = None,
    settings: RuntimeSettings | None = None,
) -> ScriptedRun:
    """Run ``prompts`` with ``script`` (a ``ScriptedModel``), ``model``, or against ``server``."""
    config = _config(agent, agent_name, vars)
    settings = settings or RuntimeSettings(write_transcript=False)
    if server is not None:
        config = _on_server(config, server)
        settings = replace(settings, fast_path=fast_path, model_override=None)
    elif model is None:
        model = ScriptedModel(script or [])
    events: list[LoopEvent] = []
    options = RunOptions(variables=dict(vars or {}), assume_yes=yes)
    opened = scripted_session(config, model, settings=settings, options=options, sink=events.append)
    async with opened as session:
        result = await session.run(prompts)
    requests: list[Any] = list(server.requests) if server is not None else []
    if isinstance(model, ScriptedModel):
        requests = list(model.requests)
    return ScriptedRun(result, session, events, requests)


def run_agent_sync(agent: str | Path | AgentConfig, *prompts: str, **kwargs: Any) -> ScriptedRun:
    """``run_agent`` from synchronous code (``asyncio.run``)."""
    from runner.tools.bounded import run_to_end

    return run_to_end(run_agent(agent, *prompts, **kwargs))
