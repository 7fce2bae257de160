"""The session: one conversation with an agent, run on an ``AgentRuntime`` (SPEC sections 5, 6, 9).

Module map:

- ``session``: ``Session`` and ``Session.run`` (the session level: session_start, turns until the
  queue is empty, max_turns, session_end on close).
- ``options``: ``RunOptions`` (what a session is told) and ``RunResult`` (what a run did).
- ``turn``: one turn and its steps (generate, eager tool start, results), ``TurnResult``.
- ``decisions``: ``EndTurn`` and the precedence that picks one when several meet.
- ``gate``: the checks every tool call passes, through a narrow interface.
- ``hookglue``: hook events built from the session, answers routed by ``HOOK_EVENT_RULES``.
- ``conversation``: history, system prompt, queue, turn counter, undo (no configuration).
- ``limits``: the budget and the repeat guard; ``context``: compressing old tool outputs.
- ``subagent``: ``agent:`` tools, each call a nested session; ``opening``: ``open_runtime``.
- ``events``: what a session reports while it runs (the CLI and the server render these).
"""

from __future__ import annotations

from runner.session.decisions import EndTurn, StopReason
from runner.session.events import LoopEvent
from runner.session.opening import open_runtime, runtime_host
from runner.session.options import RunOptions, RunResult
from runner.session.results import TurnResult
from runner.session.session import Session, current_session

__all__ = [
    "EndTurn",
    "LoopEvent",
    "RunOptions",
    "RunResult",
    "Session",
    "StopReason",
    "TurnResult",
    "current_session",
    "open_runtime",
    "runtime_host",
]
