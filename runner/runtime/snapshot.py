"""What a runtime's configuration is, as plain data: recorded in a transcript for each configuration
a session ran under, so that ``runner sessions show`` can say what changed between two turns.

The shape is the one ``runner diff`` compares (``runner.agentdiff.snapshot``): ``prompts`` by
name, ``tools`` by name with ``description`` and ``parameters``, the rest compared key by key. The
prompts are the templates as written (the status template only by its hash: what it renders is
never stored)."""

from __future__ import annotations

import dataclasses
import hashlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runner.runtime.runtime import AgentRuntime

__all__ = ["config_snapshot"]


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
