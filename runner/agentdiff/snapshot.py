"""What ``runner diff`` compares: the resolved configuration of one agent as plain JSON data.

The rendered prompts (with the agent's ``vars``, a fixed clock and the tools it resolves), the tools
as ``runner tools`` resolves them for ``python`` / ``builtin`` / ``openapi`` file sources (name,
description, parameters), the configuration of the other sources (``mcp``, ``agent``, OpenAPI URLs:
listing their tools would start servers or reach the network), the model and its parameters, limits,
hooks, permissions and the ``output:`` schema. Paths are relative to the agent's folder, so the same
file at two revisions (two trees) compares equal; secrets are redacted, and so is the password of
any URL.

No code of the agent runs unless ``run_code``: Python tools and an ``output: {python:}`` model are
read from their source (``runner.agentdiff.pysource``); a tool whose signature could not be read
exactly says so in its ``signature`` entry. With ``run_code`` their modules are imported, as
``runner tools`` does, for exact schemas.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import re
from pathlib import Path
from typing import Any

from runner.agentdiff.pysource import model_from_source, note_of, tools_from_source
from runner.agentfile.config import AgentConfig, TemplateSource, ToolSourceConfig
from runner.agentfile.revisions import runner_home
from runner.agentfile.skills import Skill, read_body
from runner.agentfile.templates import frozen_clock
from runner.audit import mask_url_passwords
from runner.audit.modules import invalidate
from runner.errors import ConfigError, RunnerError
from runner.runtime.prompts import Prompts
from runner.runtime.sources import SourceSet
from runner.store.transcript import Redactor
from runner.tools.base import Tool
from runner.tools.registry import ToolRegistry
from runner.tools.sources import LoadedSource, SourceContext, SourceFailure

__all__ = ["Snapshot", "masked", "snapshot"]

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


async def _tools(
    config: AgentConfig, *, run_code: bool
) -> tuple[dict[str, Any], list[dict[str, str]], list[dict[str, Any]]]:
    """The listed tools by name, the sources that failed, the tools of the other sources' configs."""
    opened = tuple(s for s in config.tools if _opened(s))
    ctx = SourceContext(
        agent=config, cache_dir=runner_home() / "cache", default_timeout_s=config.limits.tool_timeout_s
    )
    read = () if run_code else tuple(s for s in opened if s.kind == "python")
    sources, failures = await SourceSet.open_each([s for s in opened if all(s is not r for r in read)], ctx)
    try:
        loaded = {id(spec): source for spec, source in sources.loaded()}
        for spec in read:
            try:
                loaded[id(spec)] = LoadedSource(tools_from_source(spec, folder=config.directory))
            except ConfigError as exc:
                failures.append(SourceFailure(spec, exc))
        registry = ToolRegistry([(s, loaded[id(s)].tools) for s in opened if id(s) in loaded])
        tools = {t.name: _tool_entry(t) for t in registry.tools()}
    finally:
        await sources.aclose()
    order = {id(s): i for i, s in enumerate(opened)}
    failed = [
        {"source": f.spec.label, "error": str(f.error)}
        for f in sorted(failures, key=lambda f: order[id(f.spec)])
    ]
    others = [_source_config(s, config.directory) for s in config.tools if not _opened(s)]
    return tools, failed, others


def _tool_entry(tool: Tool) -> dict[str, Any]:
    entry = {
        "source": f"{tool.source_kind}:{tool.source_id}",
        "description": tool.description,
        "parameters": tool.parameters,
    }
    note = note_of(tool)
    if note is not None:
        entry["signature"] = note
    return entry


def _output(config: AgentConfig, *, run_code: bool) -> Any:
    """The ``output:`` schema; a ``python:`` model imported (``run_code``) or read from its source."""
    output = config.output
    if output is None:
        return None
    if output.python is None:
        return output.schema
    if not run_code:
        return model_from_source(output.python, output.base_dir, folder=config.directory)
    from runner.agentfile.output_schema import load_output

    try:
        return {"python": output.python, "schema": dict(load_output(output).schema)}
    except ConfigError as exc:
        return {"python": output.python, "error": exc.message}


def _render(prompts: Prompts, source: TemplateSource | None, config: AgentConfig) -> str | None:
    if source is None:
        return None
    try:
        return prompts.render(source, "{{ input }}", prompts.variables())
    except RunnerError as exc:  # a template that needs a --var: show its text and why
        return f"{source.text}\n# (not rendered: {exc.message})"


async def snapshot(config: AgentConfig, *, run_code: bool = False) -> Snapshot:
    """The resolved configuration of ``config`` as JSON data (see the module's docstring)."""
    invalidate()  # modules written a moment ago are found
    tools, failed, others = await _tools(config, run_code=run_code)
    listed = [
        {"name": n, "description": t["description"], "parameters": t["parameters"]} for n, t in tools.items()
    ]
    prompts = Prompts(config, tools=listed, clock=_CLOCK)
    base = config.directory
    rendered = {
        name: _render(prompts, getattr(config.prompts, name), config)
        for name in ("system", "user", "status", "tool_selection")
    }
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
        "output": _output(config, run_code=run_code),
        "tool_details": config.tool_details,
    }
    if config.skills:
        data["skills"] = {s.name: _skill(s, base) for s in config.skills}
    for chain in data["hooks"].values():
        for hook in chain:
            hook.pop("base_dir", None)
    redacted: Snapshot = masked(Redactor(config.secrets).record(data))
    return redacted


def _skill(skill: Skill, base: Path) -> dict[str, Any]:
    """A skill as the diff compares it: its frontmatter, folder, files, and its body's digest."""
    try:
        body = hashlib.sha256(read_body(skill).encode()).hexdigest()
    except ConfigError as exc:
        body = f"(unreadable: {exc.message})"
    fields = _plain(skill, base)
    fields.pop("name_line", None)
    return {**fields, "body_sha256": body}


def masked(value: Any) -> Any:
    """``value`` with the password of every URL in its strings masked (``runner.audit``'s rule)."""
    if isinstance(value, str):
        return mask_url_passwords(value)
    if isinstance(value, dict):
        return {k: masked(v) for k, v in value.items()}
    if isinstance(value, list):
        return [masked(v) for v in value]
    return value
