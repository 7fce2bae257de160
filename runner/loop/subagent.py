"""Agents as tools (SPEC section 5): each call runs the other agent as a nested session.

The nested session has its own history and step limits; its final answer is the tool result; its
tokens and cost are added to the parent's budget, and its token budget is capped by what the
parent has left. The current directory is saved and restored around it, so a sub-agent's tools
cannot move the parent. Nesting deeper than ``MAX_DEPTH`` is refused (agents that call each other).
"""

from __future__ import annotations

import contextvars
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from runner.agentfile import load_agent
from runner.agentfile.config import AgentConfig, ToolSourceConfig
from runner.errors import ConfigError, ToolError
from runner.loop.events import LoopEvent, Note, ToolFinished, ToolStarted
from runner.tools.base import RunContext, Tool

if TYPE_CHECKING:
    from runner.loop.runtime import SessionConfig
    from runner.loop.session import Session

MAX_DEPTH = 4
_depth: contextvars.ContextVar[int] = contextvars.ContextVar("runner_agent_depth", default=0)

INPUT_SCHEMA = {
    "type": "object",
    "properties": {"input": {"type": "string", "description": "The request or question for this agent."}},
    "required": ["input"],
}


@dataclass
class ParentLink:
    """The parent session, filled in once it exists (the registry is built before the session)."""

    session: Session | None = None


def _resolve(parent: AgentConfig, source: ToolSourceConfig) -> AgentConfig:
    if source.target.startswith("#"):
        return load_agent(parent.path, agent=source.target[1:])
    return load_agent((source.base_dir / source.target).resolve())


def _forward(link: ParentLink, name: str) -> Callable[[LoopEvent], None]:
    """The child's tool activity and notes, shown through the parent's sink."""

    def sink(event: LoopEvent) -> None:
        parent = link.session
        if parent is None:
            return
        if isinstance(event, ToolStarted):
            parent.sink(Note(f"[{name}] → {event.name}"))
        elif isinstance(event, ToolFinished):
            mark = "✗" if event.result.is_error else "←"
            parent.sink(Note(f"[{name}] {mark} {event.result.name}"))
        elif isinstance(event, Note):
            parent.sink(Note(f"[{name}] {event.text}", event.level))

    return sink


def make_agent_tool_factory(
    parent_spec: AgentConfig, config: SessionConfig, link: ParentLink
) -> Callable[[ToolSourceConfig], Awaitable[Tool]]:
    """The factory ``runner.tools.agent`` uses to turn an ``agent:`` source into a tool."""

    async def factory(source: ToolSourceConfig) -> Tool:
        try:
            child_spec = _resolve(parent_spec, source)
        except ConfigError as exc:
            raise ConfigError(f"agent {source.target}: {exc.message}", hint=exc.hint) from None
        description = source.description or child_spec.description or f"Ask the {child_spec.name} agent."

        async def call(arguments: dict[str, Any], ctx: RunContext) -> str:
            return await _run_child(child_spec, str(arguments["input"]), config, link)

        return Tool(
            name=child_spec.name,
            description=description,
            parameters=INPUT_SCHEMA,
            source_kind="agent",
            source_id=source.id or child_spec.name,
            call=call,
        )

    return factory


async def _run_child(spec: AgentConfig, text: str, config: SessionConfig, link: ParentLink) -> str:
    from runner.loop.runtime import open_session
    from runner.loop.session import RunOptions

    depth = _depth.get()
    if depth >= MAX_DEPTH:
        raise ToolError(f"agents are nested more than {MAX_DEPTH} deep; answer without calling {spec.name}")
    parent = link.session
    limits = spec.limits
    if parent is not None and parent.limits.max_tokens is not None:
        left = max(1, parent.limits.max_tokens - parent.budget.usage.total_tokens)
        limits = replace(limits, max_tokens=min(limits.max_tokens or left, left))
    child_spec = replace(spec, limits=limits)
    options = RunOptions(
        assume_yes=parent.options.assume_yes if parent else False,
        confirm=parent.options.confirm if parent else None,
    )
    token = _depth.set(depth + 1)
    cwd = os.getcwd()
    try:
        async with open_session(
            child_spec, sink=_forward(link, spec.name), options=options, config=config
        ) as child:
            if parent is not None:
                parent.record_event("subagent", agent=spec.name, session_id=child.session_id)
            result = await child.run_turn(text)
            if parent is not None:
                parent.budget.add(child.budget.usage)
    finally:
        _depth.reset(token)
        if os.getcwd() != cwd:
            os.chdir(cwd)
    if result.reason not in ("done",):
        return f"{result.output}\n\n[{spec.name} stopped early: {result.reason}]".strip()
    return result.output
