"""runner: a declarative agent runner. An agent is a YAML file; one generic loop runs it.

The public API (everything else is the runner's own)::

    import runner

    agent = runner.Agent.from_file("agent.yaml")
    result = agent.run_sync("Hello")          # runner.RunResult: .output, .reason, .usage, ...

- ``Agent`` (``load``): an agent file for Python callers: ``run`` / ``run_sync`` / ``stream``.
- ``load_agent``, ``AgentConfig``: the validated agent file.
- ``open_runtime``, ``AgentRuntime``, ``RuntimeHost``, ``RuntimeSettings``: the runtime a loaded
  configuration opens (tool sources, model client), shared by sessions.
- ``Session``, ``RunOptions``, ``RunResult``, ``TurnResult``: one conversation and what it did.
- Events a run reports (``TextChunk``, ``ToolStarted``, ``ToolFinished``, ``TurnEnded``, ...).
- Errors: ``RunnerError`` and its tree (``ConfigError``, ``ModelError``, ``ToolError``, ...).

Test helpers (a scripted model and server, a pytest plugin) are in ``runner.testing``. Names are
imported on first use, so ``import runner`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from runner.version import __version__

if TYPE_CHECKING:
    from runner.agentfile import load_agent
    from runner.agentfile.config import AgentConfig
    from runner.api import Agent, load
    from runner.errors import (
        ConfigError,
        ConfigErrors,
        Interrupted,
        LimitReached,
        ModelError,
        OutputError,
        RunnerError,
        ToolError,
    )
    from runner.runtime import AgentRuntime, RuntimeHost, RuntimeSettings
    from runner.session import RunOptions, RunResult, Session, TurnResult, open_runtime
    from runner.session.events import (
        AnswerDraft,
        AssistantMessage,
        LoopEvent,
        Note,
        OutputReady,
        ReasoningChunk,
        StepStarted,
        TextChunk,
        ToolFinished,
        ToolStarted,
        TurnEnded,
        UsageUpdate,
    )

_EXPORTS = {
    "Agent": "runner.api",
    "load": "runner.api",
    "load_agent": "runner.agentfile",
    "AgentConfig": "runner.agentfile.config",
    "AgentRuntime": "runner.runtime",
    "RuntimeHost": "runner.runtime",
    "RuntimeSettings": "runner.runtime",
    "open_runtime": "runner.session",
    "Session": "runner.session",
    "RunOptions": "runner.session",
    "RunResult": "runner.session",
    "TurnResult": "runner.session",
    **dict.fromkeys(
        (
            "AnswerDraft",
            "AssistantMessage",
            "LoopEvent",
            "Note",
            "OutputReady",
            "ReasoningChunk",
            "StepStarted",
            "TextChunk",
            "ToolFinished",
            "ToolStarted",
            "TurnEnded",
            "UsageUpdate",
        ),
        "runner.session.events",
    ),
    **dict.fromkeys(
        (
            "ConfigError",
            "ConfigErrors",
            "Interrupted",
            "LimitReached",
            "ModelError",
            "OutputError",
            "RunnerError",
            "ToolError",
        ),
        "runner.errors",
    ),
}

__all__ = [
    "Agent",
    "AgentConfig",
    "AgentRuntime",
    "AnswerDraft",
    "AssistantMessage",
    "ConfigError",
    "ConfigErrors",
    "Interrupted",
    "LimitReached",
    "LoopEvent",
    "ModelError",
    "Note",
    "OutputError",
    "OutputReady",
    "ReasoningChunk",
    "RunOptions",
    "RunResult",
    "RunnerError",
    "RuntimeHost",
    "RuntimeSettings",
    "Session",
    "StepStarted",
    "TextChunk",
    "ToolError",
    "ToolFinished",
    "ToolStarted",
    "TurnEnded",
    "TurnResult",
    "UsageUpdate",
    "__version__",
    "load",
    "load_agent",
    "open_runtime",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'runner' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
