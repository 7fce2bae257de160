"""The ``agent`` tool source: another agent, called as a tool with one ``input`` string.

Running an agent means running a session, which is the loop's business; the loop hands this
loader a factory (``SourceContext.agent_tool_factory``) so that the tools layer never imports it.
"""

from __future__ import annotations

from contextlib import AsyncExitStack

from runner.agentfile.config import ToolSourceConfig
from runner.errors import ConfigError
from runner.tools.sources import LoadedSource, SourceContext

__all__ = ["load_source"]


async def load_source(spec: ToolSourceConfig, ctx: SourceContext, stack: AsyncExitStack) -> LoadedSource:
    """One tool that runs the named agent as a nested session per call."""
    if ctx.agent_tool_factory is None:
        raise ConfigError("agent tools can only be used inside a session")
    return LoadedSource([await ctx.agent_tool_factory(spec, ctx.agent, stack)])
