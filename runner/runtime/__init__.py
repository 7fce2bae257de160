"""The agent runtime: what a loaded agent file determines, built once and shared by sessions.

Module map:

- ``runtime``: ``AgentRuntime`` (immutable) and ``build_runtime``, the one function that opens and
  reloads alike.
- ``host``: ``RuntimeHost``, the runtime in use for one agent, swapped on reload; replaced runtimes
  close when their last session lets go.
- ``sources``: the open tool sources of a runtime, shared with the runtime that replaces it.
- ``models``: which model a runtime talks to (live, recording, replaying).
- ``prompts``: rendering the agent's templates; the one place a system prompt is composed.
- ``hooks``: the hook chains and how each kind of hook runs.
- ``settings``: ``RuntimeSettings``, the process-wide choices (home, fast path, cassettes, ...).

The runtime knows nothing of conversations; ``runner.session`` runs them on it.
"""

from __future__ import annotations

from runner.runtime.host import RuntimeHost
from runner.runtime.runtime import AgentRuntime, AgentToolFactory, Provenance, build_runtime
from runner.runtime.settings import RuntimeSettings

__all__ = [
    "AgentRuntime",
    "AgentToolFactory",
    "Provenance",
    "RuntimeHost",
    "RuntimeSettings",
    "build_runtime",
]
