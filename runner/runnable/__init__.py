"""A thing you can run: an agent or a team file's workflow, behind one interface with one outcome.

- ``target``: ``resolve(ref, agent=, rev=)`` — what the user named, as an agent target or a workflow
  target, with one error per bad case. Every door calls it.
- ``agent`` / ``workflow``: ``AgentRunner`` and ``WorkflowRunner``: ``open``, ``run`` (inputs,
  options, an event sink) → ``Outcome``, ``interrupt``, ``aclose``.
- ``runner_for(target, settings)``: the runner of a target.

The ``Outcome`` (status, answer, data, usage, session id, tools called and refused, limit, error,
transient) and its one exit rule are ``runner.session.outcome``'s: the session layer decides them
for an agent, ``WorkflowResult.outcome`` for a workflow, by the same table.
"""

from __future__ import annotations

from typing import Any

from runner.runnable.agent import AgentRunner
from runner.runnable.target import Target, resolve, shown, targets_of
from runner.runnable.workflow import WorkflowRunner
from runner.runtime.settings import RuntimeSettings
from runner.session.outcome import Outcome

__all__ = [
    "AgentRunner",
    "Outcome",
    "Target",
    "WorkflowRunner",
    "resolve",
    "runner_for",
    "shown",
    "targets_of",
]


def runner_for(
    target: Target, settings: RuntimeSettings | None = None, **options: Any
) -> AgentRunner | WorkflowRunner:
    """The runner of ``target`` (``options``: ``model`` for an agent; ``agents``, ``model_for``,
    ``assume_yes`` for a workflow)."""
    if target.workflow is not None:
        return WorkflowRunner(target, settings, **options)
    assert target.config is not None
    return AgentRunner(target.config, settings, **options)
