"""Running a team file's ``workflow:`` (issue 17): steps as child sessions, a workflow transcript, resume.

Module map:

- ``engine``: ``WorkflowEngine``: the steps in order (agent, parallel, for_each, loop; when,
  on_error), the shared budget, Ctrl+C, a reload between steps.
- ``agents``: ``WorkflowAgents``: one runtime per team agent, built on first use; a caller may
  share it across runs (``runner serve``, ``runner batch``).
- ``outcomes``: how a step (``Outcome``) and a run (``Stop``) end; the workflow's answer.
- ``budget``: ``WorkflowBudget``: the workflow's limits, shared by the steps running at once.
- ``loading``: the team file's workflow with validate's checks; its agents' configurations.
- ``watching``: ``--watch``: the team file and its agents' files reloaded between steps.
- ``cassette``: ``--record`` / ``--replay``: one cassette for every agent of the run, in order.
- ``expressions``: templates and expressions rendered in the agent file's sandbox.
- ``record``: the workflow's transcript (``step_start`` / ``step_end``) and what a resume reuses.
"""

from __future__ import annotations

from runner.workflow.agents import WorkflowAgents
from runner.workflow.engine import WorkflowEngine, WorkflowResult
from runner.workflow.record import ResumeState, WorkflowRecord, open_record, resume_state

__all__ = [
    "ResumeState",
    "WorkflowAgents",
    "WorkflowEngine",
    "WorkflowRecord",
    "WorkflowResult",
    "open_record",
    "resume_state",
]
