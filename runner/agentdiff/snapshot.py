"""What ``runner diff`` compares: the resolved configuration of one agent as plain JSON data.

The rendered prompts (with the agent's ``vars``, a fixed clock and the tools it resolves), the tools
as ``runner tools`` resolves them for ``python`` / ``builtin`` / ``openapi`` file sources (name,
description, parameters), the configuration of the other sources (``mcp``, ``agent``, OpenAPI URLs:
listing their tools would start servers or reach the network), the model and its parameters, limits,
hooks, permissions and the ``output:`` schema. Paths are relative to the agent's folder, so the same
file at two revisions (two trees) compares equal; secrets are redacted.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import re
from pathlib import Path
from typing import Any

from runner.agentfile.config import AgentConfig, TemplateSource, ToolSourceConfig
from runner.agentfile.revisions import runner_home
from runner.agentfile.templates import frozen_clock
from runner.errors import RunnerError
from runner.runtime.prompts import Prompts
from runner.runtime.sources import SourceSet
from runner.store.transcript import Redactor
from runner.tools.sources import SourceContext

__all__ = ["Snapshot", "snapshot"]

#: Sources whose tools are listed (opening them runs nothing outside this process and the disk).
_OPENED = ("python", "builtin", "openapi")
_URL = re.compile(r"^https?://", re.IGNORECASE)
_CLOCK = frozen_clock(_dt.datetime(2000, 1, 1, tzinfo=_dt.UTC))
#: Where each ``ToolSourceConfig`` sits in the file (differs with every edit above it, means nothing).
_POSITION = frozenset({"index", "line", "column", "base_dir"})

Snapshot = dict[str, Any]


def _plain(value: Any, base: Path) -> Any:
    """``value`` as JSON data; paths relative to ``base`` (the agent's folder)."""
    if isinstance(value, Path):
        try:
            return value.resolve().relative_to(base.resolve()).as_posix()
        except ValueError:
            return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name), base) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _plain(v, base) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, base) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted(_plain(v, base) for v in value)
    return value


def _opened(source: ToolSourceConfig) -> bool:
    return source.kind in _OPENED and not (source.kind == "openapi" and _URL.match(source.target))


def _source_config(source: ToolSourceConfig, base: Path) -> dict[str, Any]:
    plain = _plain(source, base)
    return {k: v for k, v in plain.items() if k not in _POSITION}


async def _tools(config: AgentConfig) -> tuple[dict[str, Any], list[dict[str, str]], list[dict[str, Any]]]:
    """The listed tools by name, the sources that failed, the tools of the other sources' configs."""
    opened = tuple(s for s in config.tools if _opened(s))
    ctx = SourceContext(
        agent=config, cache_dir=runner_home() / "cache", default_timeout_s=config.limits.tool_timeout_s
    )
    sources, failures = await SourceSet.open_each(opened, ctx)
    try:
        registry = sources.registry()
        tools = {
            t.name: {
                "source": f"{t.source_kind}:{t.source_id}",
                "description": t.description,
                "parameters": t.parameters,
            }
            for t in registry.tools()
        }
    finally:
        await sources.aclose()
    failed = [{"source": f.spec.label, "error": str(f.error)} for f in failures]
    others = [_source_config(s, config.directory) for s in config.tools if not _opened(s)]
    return tools, failed, others


def _render(prompts: Prompts, source: TemplateSource | None, config: AgentConfig) -> str | None:
    if source is None:
        return None
    try:
        return prompts.render(source, "{{ input }}", prompts.variables())
    except RunnerError as exc:  # a template that needs a --var: show its text and why
        return f"{source.text}\n# (not rendered: {exc.message})"


async def snapshot(config: AgentConfig) -> Snapshot:
    """The resolved configuration of ``config`` as JSON data (see the module's docstring)."""
    tools, failed, others = await _tools(config)
    listed = [
        {"name": n, "description": t["description"], "parameters": t["parameters"]} for n, t in tools.items()
    ]
    prompts = Prompts(config, tools=listed, clock=_CLOCK)
    base = config.directory
    rendered = {
        name: _render(prompts, getattr(config.prompts, name), config)
        for name in ("system", "user", "status", "tool_selection")
    }
    output: Any = None
    if config.output is not None:
        output = {"python": config.output.python} if config.output.python else config.output.schema
    data: Snapshot = {
        "name": config.name,
        "description": config.description,
        "model": _plain(config.model, base),
        "function_calling": config.function_calling,
        "tool_format": config.tool_format,
        "selector": _plain(config.selector, base),
        "vars": _plain(config.vars, base),
        "prompts": rendered,
        "tools": tools,
        "tool_failures": failed,
        "other_sources": others,
        "hooks": {event: [_plain(h, base) for h in chain] for event, chain in sorted(config.hooks.items())},
        "permissions": _plain(config.permissions, base),
        "limits": _plain(config.limits, base),
        "output": output,
        "tool_details": config.tool_details,
    }
    for chain in data["hooks"].values():
        for hook in chain:
            hook.pop("base_dir", None)
    redacted: Snapshot = Redactor(config.secrets).record(data)
    return redacted
