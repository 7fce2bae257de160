"""Hot reload inside a session (SPEC section 13): reuse what did not change, describe what did.

``SourcePool`` keeps each tool source open under its own exit stack, keyed by its configuration,
so a reload reconnects only the sources whose configuration changed (MCP servers keep running);
Python sources are always re-imported, so edited tool code takes effect. ``describe_changes``
is the one line a reload prints (prompts, tools +N -M, model, limits, ...).
"""

from __future__ import annotations

import dataclasses
import json
from contextlib import AsyncExitStack

from runner.agentfile.config import AgentConfig, ToolSourceConfig
from runner.errors import RunnerError
from runner.tools.registry import ToolRegistry
from runner.tools.sources import LoadedSource, SourceContext, SourceFailure, loader_for


def source_key(spec: ToolSourceConfig) -> str:
    """What identifies a source's connection: its configuration without its position in the file."""
    fields = dataclasses.asdict(spec)
    for name in ("index", "line", "column"):
        fields.pop(name, None)
    return json.dumps(fields, sort_keys=True, default=str)


class SourcePool:
    """Open tool sources, each under its own exit stack, reusable across reloads."""

    def __init__(self) -> None:
        self._open: dict[str, tuple[LoadedSource, AsyncExitStack]] = {}

    async def load(
        self, specs: tuple[ToolSourceConfig, ...], ctx: SourceContext, *, reload_code: bool = False
    ) -> tuple[list[tuple[ToolSourceConfig, LoadedSource]], list[SourceFailure]]:
        """The sources of ``specs``: unchanged ones reused, new or changed ones opened.

        Only when every source opened are the sources that ``specs`` no longer has closed, so a
        failed reload leaves the previous configuration working. With ``reload_code``, Python
        sources are imported again (edited tool code takes effect).
        """
        wanted = {source_key(s): s for s in specs}
        opened: dict[str, tuple[LoadedSource, AsyncExitStack]] = {}
        loaded: list[tuple[ToolSourceConfig, LoadedSource]] = []
        failures: list[SourceFailure] = []
        for key, spec in wanted.items():
            reuse = self._open.get(key)
            if reuse is not None and not (reload_code and spec.kind == "python"):
                loaded.append((spec, reuse[0]))
                continue
            stack = AsyncExitStack()
            try:
                source_ctx = dataclasses.replace(ctx, refresh=reload_code)
                result = await loader_for(spec.kind)(spec, source_ctx, stack)
            except RunnerError as exc:
                await stack.aclose()
                failures.append(SourceFailure(spec, exc))
                continue
            except BaseException:
                await stack.aclose()
                for _, other in opened.values():
                    await other.aclose()
                raise
            opened[key] = (result, stack)
            loaded.append((spec, result))
        if failures:
            for _, stack in opened.values():
                await stack.aclose()
            return [], failures
        for key in [k for k in self._open if k not in wanted or k in opened]:
            await self._open.pop(key)[1].aclose()
        self._open.update(opened)
        return loaded, failures

    async def aclose(self) -> None:
        """Close every source (at session end)."""
        while self._open:
            _, (_, stack) = self._open.popitem()
            await stack.aclose()


def registry_of(loaded: list[tuple[ToolSourceConfig, LoadedSource]]) -> ToolRegistry:
    """The registry of opened sources, in file order."""
    return ToolRegistry([(source, result.tools) for source, result in loaded])


def describe_changes(
    old: AgentConfig, new: AgentConfig, old_tools: ToolRegistry, new_tools: ToolRegistry
) -> str:
    """One short line saying what a reload changed."""
    parts: list[str] = []
    if old.prompts != new.prompts or old.vars != new.vars:
        parts.append("prompts")
    before, after = set(old_tools.names()), set(new_tools.names())
    added, removed = len(after - before), len(before - after)
    changed_specs = 0
    for name in before & after:
        old_tool, new_tool = old_tools.get(name), new_tools.get(name)
        if old_tool is not None and new_tool is not None and old_tool.definition() != new_tool.definition():
            changed_specs += 1
    if added or removed or changed_specs:
        parts.append(f"tools +{added} -{removed}" + (f" ~{changed_specs}" if changed_specs else ""))
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
