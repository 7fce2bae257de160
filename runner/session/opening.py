"""Opening runtimes that can run sub-agents: ``build_runtime`` with the session layer's agent tools.

The runtime layer cannot run sessions (it sits below them), so an ``agent:`` tool source needs a
factory from here; every front door opens its runtimes through these two functions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from runner.agentfile.config import AgentConfig
from runner.models.base import Model
from runner.runtime.host import RuntimeHost
from runner.runtime.runtime import AgentRuntime, build_runtime
from runner.runtime.settings import RuntimeSettings
from runner.session.subagent import agent_tool_factory

__all__ = ["first_request", "open_runtime", "runtime_host"]


async def open_runtime(
    config: AgentConfig,
    settings: RuntimeSettings | None = None,
    *,
    model: Model | None = None,
    previous: AgentRuntime | None = None,
    on_progress: Callable[[str, str], None] | None = None,
    warn: Callable[[str], None] | None = None,
    clock: Callable[..., str] | None = None,
) -> AgentRuntime:
    """The runtime of ``config`` (see ``build_runtime``), its ``agent:`` sources able to run."""
    settings = settings or RuntimeSettings()
    return await build_runtime(
        config,
        settings,
        model=model,
        previous=previous,
        agent_tools=agent_tool_factory(settings),
        on_progress=on_progress,
        warn=warn,
        clock=clock,
    )


def runtime_host(config: AgentConfig, settings: RuntimeSettings | None = None, **options: Any) -> RuntimeHost:
    """A ``RuntimeHost`` whose runtimes are opened by ``open_runtime`` with ``options``."""

    async def build(new: AgentConfig, *, previous: AgentRuntime | None = None) -> AgentRuntime:
        return await open_runtime(new, settings, previous=previous, **options)

    return RuntimeHost(config, build=build)


async def first_request(
    config: AgentConfig, *, input: str, variables: dict[str, Any], settings: RuntimeSettings
) -> dict[str, Any]:
    """The exact first request of a session on ``input`` (sources opened, no model call, no hooks)."""
    from runner.runtime.model_source import capabilities
    from runner.session.options import RunOptions
    from runner.session.session import Session

    described = capabilities(config, settings)
    runtime = await open_runtime(config, settings, model=described)
    try:
        session = Session(runtime, options=RunOptions(variables=dict(variables), transcript=False))
        prompts, values = runtime.prompts, session.variables
        session.ensure_system_prompt(input)
        system = session.conversation.system
        messages = [m for m in (system, prompts.user(input, values), prompts.status(input, values)) if m]
        built = session.build_request(messages)  # what the session's first step sends
        request: dict[str, Any] = {
            "model": described.name,
            "mode": runtime.mode.kind,
            "mode_why": runtime.mode.why,
            "messages": built.messages,
            "tools": built.tools,
            "params": dict(built.params),
        }
        plan = session.output_plan
        if plan is not None:
            request["output"] = {
                "strategy": plan.strategy,
                "how": plan.describe(),
                "schema": plan.output.schema,
            }
        await session.close()
        return request
    finally:
        await runtime.aclose()
