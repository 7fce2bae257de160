"""runner: a declarative agent runner. An agent is a YAML file; one generic loop runs it.

The public API (everything else is the runner's own)::

    import runner

    agent = runner.Agent.from_file("agent.yaml")
    result = agent.run_sync("Hello")          # runner.RunResult: .output, .reason, .usage, ...

- ``Agent`` (``load``): an agent file, or a team file's workflow, for Python callers: ``run`` /
  ``run_sync`` / ``stream``; ``RuntimeSettings`` (where transcripts go, cassettes, the fast path).
- ``load_agent``, ``AgentConfig``: the validated agent file.
- ``Session``, ``RunOptions``, ``RunResult``, ``TurnResult``, ``WorkflowResult``: a conversation and
  what a run did; ``Outcome``: how any run ended, as every door reads it (status, exit code).
- Events a run reports (``TextChunk``, ``ToolStarted``, ``ToolFinished``, ``TurnEnded``, ...).
- Errors: ``RunnerError`` and its tree (``ConfigError``, ``ModelError``, ``ToolError``, ...).

Test helpers (a scripted model and server, a pytest plugin) are in ``runner.testing``. The runtime
and its leases (``runner.runtime``: ``AgentRuntime``, ``RuntimeHost``; ``runner.session.open_runtime``)
are provisional: reachable, not part of this API. Each public name is written once, in the
``TYPE_CHECKING`` block below (``X as X``: an explicit re-export); at run time it is imported on first
use from the module that block names, so ``import runner`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from runner.version import __version__ as __version__

if TYPE_CHECKING:  # the public API, each name once
    from runner.agentfile import load_agent as load_agent
    from runner.agentfile.config import AgentConfig as AgentConfig
    from runner.api import Agent as Agent
    from runner.api import load as load
    from runner.errors import ConfigError as ConfigError
    from runner.errors import ConfigErrors as ConfigErrors
    from runner.errors import Interrupted as Interrupted
    from runner.errors import LimitReached as LimitReached
    from runner.errors import ModelError as ModelError
    from runner.errors import OutputError as OutputError
    from runner.errors import RunnerError as RunnerError
    from runner.errors import ToolError as ToolError
    from runner.runtime.settings import RuntimeSettings as RuntimeSettings
    from runner.session import RunOptions as RunOptions
    from runner.session import RunResult as RunResult
    from runner.session import Session as Session
    from runner.session import TurnResult as TurnResult
    from runner.session.events import AnswerDraft as AnswerDraft
    from runner.session.events import AssistantMessage as AssistantMessage
    from runner.session.events import LoopEvent as LoopEvent
    from runner.session.events import Note as Note
    from runner.session.events import OutputReady as OutputReady
    from runner.session.events import ReasoningChunk as ReasoningChunk
    from runner.session.events import StepStarted as StepStarted
    from runner.session.events import TextChunk as TextChunk
    from runner.session.events import ToolFinished as ToolFinished
    from runner.session.events import ToolStarted as ToolStarted
    from runner.session.events import TurnEnded as TurnEnded
    from runner.session.events import UsageUpdate as UsageUpdate
    from runner.session.events import WorkflowStep as WorkflowStep
    from runner.session.outcome import Outcome as Outcome
    from runner.workflow.engine import WorkflowResult as WorkflowResult

_exports: dict[str, str] | None = None


def _table() -> dict[str, str]:
    """Each public name and its module, read once from the ``TYPE_CHECKING`` block above."""
    global _exports
    if _exports is None:
        import ast
        from pathlib import Path

        tree = ast.parse(Path(__file__).read_text(encoding="utf-8"))
        block = next(n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING")
        _exports = {
            alias.asname or alias.name: str(node.module)
            for node in block.body
            if isinstance(node, ast.ImportFrom)
            for alias in node.names
        }
    return _exports


def __getattr__(name: str) -> Any:
    if name == "__all__":
        return sorted([*_table(), "__version__"])
    module = _table().get(name)
    if module is None:
        raise AttributeError(f"module 'runner' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*_table(), "__version__"])
