"""What a runtime's configuration is, as plain data: recorded in a transcript for each configuration
a session ran under, so that ``runner sessions show`` can say what changed between two turns."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runner.runtime.runtime import AgentRuntime

__all__ = ["config_snapshot", "snapshot_changes"]


def _template(source: Any) -> str | None:
    return None if source is None else str(source.text)


def _hashed(source: Any) -> str | None:
    """A template kept only as its hash: the status one (what it renders is never stored)."""
    return None if source is None else "sha256:" + hashlib.sha256(str(source.text).encode()).hexdigest()


def config_snapshot(runtime: AgentRuntime) -> dict[str, Any]:
    """The runtime's configuration: model and parameters, mode, templates, tools (with their
    schemas), limits, hooks, permissions and output schema, as JSON-serializable data."""
    config = runtime.config
    prompts = config.prompts
    return {
        "model": runtime.model.name,
        "params": dict(runtime.model_params),
        "function_calling": runtime.mode.kind,
        "prompts": {
            "system": _template(prompts.system),
            "user": _template(prompts.user),
            "status": _hashed(prompts.status),
            "tool_selection": _template(prompts.tool_selection),
        },
        "tools": {
            d["function"]["name"]: {
                "description": d["function"].get("description", ""),
                "parameters": d["function"].get("parameters", {}),
            }
            for d in runtime.tool_definitions
        },
        "limits": dataclasses.asdict(config.limits),
        "hooks": {event: [f"{h.kind}: {h.value}" for h in chain] for event, chain in config.hooks.items()},
        "permissions": dataclasses.asdict(config.permissions),
        "output": dict(runtime.output.schema) if runtime.output is not None else None,
    }


def _unified(name: str, old: str | None, new: str | None) -> list[str]:
    import difflib

    lines = difflib.unified_diff(
        (old or "").splitlines(), (new or "").splitlines(), f"a/{name}", f"b/{name}", lineterm="", n=1
    )
    return list(lines)


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= 120 else text[:117] + "..."


def snapshot_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """What changed from one configuration snapshot to the next, one line each (templates as
    unified diffs): tools added, removed and changed, model and parameters, limits, hooks,
    permissions, output schema."""
    lines: list[str] = []
    for key in ("model", "function_calling"):
        if old.get(key) != new.get(key):
            lines.append(f"{key}: {old.get(key)} -> {new.get(key)}")
    for group in ("params", "limits", "permissions", "hooks"):
        a, b = old.get(group) or {}, new.get(group) or {}
        for name in sorted(set(a) | set(b)):
            if a.get(name) != b.get(name):
                lines.append(f"{group}.{name}: {_short(a.get(name))} -> {_short(b.get(name))}")
    prompts_a, prompts_b = old.get("prompts") or {}, new.get("prompts") or {}
    for name in sorted(set(prompts_a) | set(prompts_b)):
        if prompts_a.get(name) != prompts_b.get(name):
            lines += _unified(f"prompts.{name}", prompts_a.get(name), prompts_b.get(name))
    tools_a, tools_b = old.get("tools") or {}, new.get("tools") or {}
    lines += [f"tool added: {name}" for name in sorted(set(tools_b) - set(tools_a))]
    lines += [f"tool removed: {name}" for name in sorted(set(tools_a) - set(tools_b))]
    for name in sorted(set(tools_a) & set(tools_b)):
        for part in ("description", "parameters"):
            if tools_a[name].get(part) != tools_b[name].get(part):
                lines.append(f"tool changed: {name} ({part}): {_short(tools_b[name].get(part))}")
    if old.get("output") != new.get("output"):
        lines.append(f"output: {_short(old.get('output'))} -> {_short(new.get('output'))}")
    return lines
