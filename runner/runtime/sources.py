"""The open tool sources of a runtime, shared with the runtime that replaces it (SPEC section 13).

Each source is opened under its own exit stack and counted by the runtimes that hold it. A runtime
built to replace another (a reload) takes over the sources whose configuration did not change, so
an MCP server keeps running across reloads; the old runtime gives its hold back when it closes
(after the requests still using it finished), and a source nobody holds any more is closed then.
Python sources (and OpenAPI documents read from files) are always opened again on a reload, so an
edited tool module or document takes effect; so are A2A sources (their card is fetched again).
``describe_changes`` is the one line a reload prints.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from typing import Any, Generic, TypeVar

from runner.agentfile.config import AgentConfig, ToolSourceConfig
from runner.errors import ConfigError, ConfigErrors, RunnerError
from runner.tools.registry import ToolRegistry
from runner.tools.sources import LoadedSource, SourceContext, SourceFailure, loader_for

T = TypeVar("T")

__all__ = ["OpenSource", "Shared", "SourceSet", "describe_changes", "failures_error", "source_key"]


def source_key(source: ToolSourceConfig) -> str:
    """What identifies a source's connection: its configuration without its position in the file."""
    fields = dataclasses.asdict(source)
    for name in ("index", "line", "column"):
        fields.pop(name, None)
    return json.dumps(fields, sort_keys=True, default=str)


def _reopens_on_reload(source: ToolSourceConfig) -> bool:
    """Whether a reload opens the source again although its configuration is the same."""
    if source.kind in ("python", "a2a"):  # edited code; an A2A card fetched again (interfaces move)
        return True
    if source.kind == "builtin" and source.target == "skills":
        return True  # an edited SKILL.md takes effect
    return source.kind == "openapi" and not source.target.startswith(("http://", "https://"))


class Shared(Generic[T]):
    """Something open that several runtimes hold (a source, a model); closed when the last lets go."""

    def __init__(self, value: T, close: Callable[[], Awaitable[object]]) -> None:
        self.value = value
        self._close = close
        self._holders = 1

    def hold(self) -> Shared[T]:
        """One more runtime holds it."""
        self._holders += 1
        return self

    async def release(self) -> None:
        """A runtime lets go; the last one closes it."""
        self._holders -= 1
        if self._holders == 0:
            await self._close()


OpenSource = Shared[LoadedSource]


class SourceSet:
    """The sources of one runtime, in file order, keyed by their configuration."""

    def __init__(self, entries: Sequence[tuple[ToolSourceConfig, str, OpenSource]] = ()) -> None:
        self.entries = list(entries)

    @classmethod
    async def open(
        cls, sources: Sequence[ToolSourceConfig], ctx: SourceContext, *, previous: SourceSet | None = None
    ) -> SourceSet:
        """Open ``sources``, holding the unchanged ones of ``previous``; ``ConfigErrors`` if any failed.

        On a failure everything this call opened or held is let go again, so ``previous`` keeps
        working as it was.
        """
        opened, failures = await cls.open_each(sources, ctx, previous=previous)
        if failures:
            await opened.aclose()
            raise failures_error(ctx.agent, failures)
        return opened

    @classmethod
    async def open_each(
        cls, sources: Sequence[ToolSourceConfig], ctx: SourceContext, *, previous: SourceSet | None = None
    ) -> tuple[SourceSet, list[SourceFailure]]:
        """Open every source that opens; the others' failures beside (``runner tools`` lists both)."""
        reusable = {key: source for config, key, source in previous.entries} if previous else {}
        entries: list[tuple[ToolSourceConfig, str, OpenSource]] = []
        failures: list[SourceFailure] = []
        try:
            for config in sources:
                key = source_key(config)
                found = reusable.get(key)
                if found is not None and not _reopens_on_reload(config):
                    entries.append((config, key, found.hold()))
                    continue
                opened = await _open_one(config, ctx, refresh=ctx.refresh or previous is not None)
                if isinstance(opened, SourceFailure):
                    failures.append(opened)
                else:
                    entries.append((config, key, opened))
        except BaseException:
            await cls(entries).aclose()
            raise
        return cls(entries), failures

    def loaded(self) -> list[tuple[ToolSourceConfig, LoadedSource]]:
        """Each source's configuration and what it offers, in file order."""
        return [(config, source.value) for config, _, source in self.entries]

    def registry(self) -> ToolRegistry:
        """The registry of these sources' tools, in file order."""
        return ToolRegistry([(config, source.value.tools) for config, _, source in self.entries])

    def instructions(self) -> list[str]:
        """The instructions the sources' servers ask to add to the system prompt."""
        return [s.value.instructions for _, _, s in self.entries if s.value.instructions]

    async def aclose(self) -> None:
        """Let go of every source (those no other runtime holds are closed)."""
        entries, self.entries = self.entries, []
        for _, _, source in reversed(entries):
            await source.release()


async def _open_one(
    config: ToolSourceConfig, ctx: SourceContext, *, refresh: bool
) -> OpenSource | SourceFailure:
    stack = AsyncExitStack()
    try:
        loaded = await loader_for(config.kind)(config, dataclasses.replace(ctx, refresh=refresh), stack)
    except RunnerError as exc:
        await stack.aclose()
        return SourceFailure(config, exc)
    except BaseException:
        await stack.aclose()
        raise
    return Shared(loaded, stack.aclose)


def failures_error(agent: AgentConfig, failures: Sequence[SourceFailure]) -> ConfigErrors:
    """The failed sources as one located error per source."""
    errors = []
    for failure in failures:
        s = failure.spec
        errors.append(
            ConfigError(
                f"tool source {s.label} failed: {failure.error.message}",
                file=str(agent.path),
                line=s.line,
                column=s.column,
                path=f"tools[{s.index}]",
                hint=failure.error.hint,
            )
        )
    return ConfigErrors(errors)


def _code(tool: Any) -> tuple[Any, ...] | None:
    """What a Python tool's function does (its bytecode and constants); None for other tools."""
    fn = getattr(getattr(tool.call, "__self__", None), "fn", None)
    code = getattr(fn, "__code__", None)
    return None if code is None else (code.co_code, code.co_consts, code.co_names)


def describe_changes(
    old: AgentConfig, new: AgentConfig, old_tools: ToolRegistry, new_tools: ToolRegistry
) -> str:
    """One short line saying what a reload changed."""
    parts: list[str] = []
    if old.prompts != new.prompts or old.vars != new.vars:
        parts.append("prompts")
    if old.skills != new.skills:
        parts.append("skills")
    before, after = set(old_tools.names()), set(new_tools.names())
    added, removed = len(after - before), len(before - after)
    changed = code = 0
    for name in before & after:
        old_tool, new_tool = old_tools.get(name), new_tools.get(name)
        if old_tool is None or new_tool is None:
            continue
        if old_tool.definition() != new_tool.definition():
            changed += 1
        elif _code(old_tool) != _code(new_tool):
            code += 1
    if added or removed or changed:
        parts.append(f"tools +{added} -{removed}" + (f" ~{changed}" if changed else ""))
    if code:
        parts.append("tool code changed")
    if old.model != new.model:
        parts.append(f"model {new.model.id if new.model else '(default)'}")
    if old.limits != new.limits:
        parts.append("limits")
    if old.hooks != new.hooks:
        parts.append("hooks")
    if old.permissions != new.permissions:
        parts.append("permissions")
    if old.function_calling != new.function_calling or old.tool_format != new.tool_format:
        parts.append("function calling")
    return ", ".join(parts) or "no change that affects the run"
