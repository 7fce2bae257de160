"""Agents as tools (SPEC section 5): each call runs the other agent as a nested session.

The other agent's runtime is built on the first call and kept with the parent's tool source (closed
with it), so its own tool sources open once. Each call is a new ``Session`` on it, run with
``Session.run`` like any other: its own history and step limits; its final answer is the tool
result; its tokens and cost are added to the parent's budget, and its token budget is capped by what
the parent has left. The parent is the session whose turn runs the call (``current_session``). The
current directory is saved and restored around it, so a sub-agent's tools cannot move the parent.
Nesting deeper than ``MAX_DEPTH`` is refused (agents that call each other).
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import os
from collections.abc import Callable
from contextlib import AsyncExitStack
from typing import Any

from runner.agentfile import load_agent
from runner.agentfile.config import AgentConfig, ToolSourceConfig
from runner.errors import ConfigError, ModelError, OutputError, ToolError
from runner.runtime.model_source import BorrowedModel
from runner.runtime.runtime import AgentRuntime, AgentToolFactory, build_runtime
from runner.runtime.settings import RuntimeSettings
from runner.session.events import LoopEvent, Note, ToolFinished, ToolStarted
from runner.session.options import RunOptions
from runner.session.outcome import Outcome
from runner.session.session import Session, current_session
from runner.text import one_line
from runner.tools.base import RunContext, Tool

__all__ = ["INPUT_SCHEMA", "MAX_DEPTH", "agent_tool_factory"]

MAX_DEPTH = 4
_depth: contextvars.ContextVar[int] = contextvars.ContextVar("runner_agent_depth", default=0)

INPUT_SCHEMA = {
    "type": "object",
    "properties": {"input": {"type": "string", "description": "The request or question for this agent."}},
    "required": ["input"],
}


def _resolve(parent: AgentConfig, source: ToolSourceConfig) -> AgentConfig:
    if source.target.startswith("#"):
        return load_agent(parent.path, agent=source.target[1:])
    return load_agent((source.base_dir / source.target).resolve())


def _forward(parent: Session | None, name: str) -> Callable[[LoopEvent], None]:
    """The child's tool activity and notes, shown through the parent's sink."""

    def sink(event: LoopEvent) -> None:
        if parent is None:
            return
        if isinstance(event, ToolStarted):
            arguments = json.dumps(event.arguments, ensure_ascii=False)
            parent.sink(Note(f"[{name}] → {event.name} {one_line(arguments, 120)}"))
        elif isinstance(event, ToolFinished):
            mark = "✗" if event.result.is_error else "←"
            parent.sink(Note(f"[{name}] {mark} {event.result.name} {one_line(event.result.content, 120)}"))
        elif isinstance(event, Note):
            parent.sink(Note(f"[{name}] {event.text}", event.level, source=event.source))

    return sink


class _ChildRuntime:
    """The other agent's runtime, built on first use and closed with the parent's source."""

    def __init__(self, config: AgentConfig, settings: RuntimeSettings) -> None:
        self.config = config
        self.settings = settings
        self._runtime: AgentRuntime | None = None
        self._lock = asyncio.Lock()

    async def get(self, parent: Session | None) -> AgentRuntime:
        async with self._lock:
            if self._runtime is None:
                model = None
                if parent is not None and (self.settings.record or self.settings.replay):
                    # One cassette holds the whole run: the child's calls go to the parent's model.
                    model = BorrowedModel(parent.model)
                self._runtime = await build_runtime(
                    self.config, self.settings, model=model, agent_tools=agent_tool_factory(self.settings)
                )
            return self._runtime

    async def aclose(self) -> None:
        runtime, self._runtime = self._runtime, None
        if runtime is not None:
            await runtime.aclose()


def agent_tool_factory(settings: RuntimeSettings) -> AgentToolFactory:
    """The factory ``runner.tools.agent`` uses to turn an ``agent:`` source into a tool."""

    async def factory(source: ToolSourceConfig, parent_config: AgentConfig, stack: AsyncExitStack) -> Tool:
        try:
            child = _resolve(parent_config, source)
        except ConfigError as exc:
            raise ConfigError(f"agent {source.target}: {exc.message}", hint=exc.hint) from None
        description = source.description or child.description or f"Ask the {child.name} agent."
        runtime = _ChildRuntime(child, settings)
        stack.push_async_callback(runtime.aclose)

        async def call(arguments: dict[str, Any], ctx: RunContext) -> str:
            return await _run_child(runtime, str(arguments["input"]))

        return Tool(
            name=child.name,
            description=description,
            parameters=INPUT_SCHEMA,
            source_kind="agent",
            source_id=source.id or child.name,
            call=call,
        )

    return factory


async def _run_child(child: _ChildRuntime, text: str) -> str:
    name = child.config.name
    depth = _depth.get()
    if depth >= MAX_DEPTH:
        raise ToolError(f"agents are nested more than {MAX_DEPTH} deep; answer without calling {name}")
    parent = current_session()
    limits: dict[str, Any] = {}
    if parent is not None and parent.limits.max_tokens is not None:
        limits["max_tokens"] = max(1, parent.limits.max_tokens - parent.usage.total_tokens)
    options = RunOptions(
        assume_yes=parent.options.assume_yes if parent else False,
        confirm=parent.options.confirm if parent else None,
        limits=limits,
    )
    token = _depth.set(depth + 1)
    cwd = os.getcwd()
    try:
        runtime = await child.get(parent)
        async with Session(runtime, sink=_forward(parent, name), options=options) as session:
            if parent is not None:
                parent.record_event("subagent", agent=name, session_id=session.session_id)
            try:
                outcome = (await session.run([text])).outcome
            except (ModelError, OutputError) as exc:  # the child failed: the parent's model reads why
                outcome = Outcome.of_error(exc, session_id=session.session_id, usage=session.usage)
            finally:
                if parent is not None:
                    parent.count_usage(session.usage)
    finally:
        _depth.reset(token)
        if os.getcwd() != cwd:
            os.chdir(cwd)
    return _child_answer(name, outcome)


def _child_answer(name: str, outcome: Outcome) -> str:
    """What the parent's model reads of the child's run, by the child's ``Outcome`` (the status every
    door gives): the answer; a note after it when a hook stopped the child; a tool error (with what
    it said) when a limit, an interruption or an error ended it."""
    if outcome.status == "ok":
        return outcome.answer
    note = f"[{name} ended: {outcome.status} ({outcome.why()})]"
    if outcome.status == "stopped":
        return f"{outcome.answer}\n\n{note}".strip()
    raise ToolError(f"{outcome.answer}\n\n{note}".strip())
