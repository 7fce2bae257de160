"""How steps and workflow runs end: ``StepOutcome`` (a step's), ``Stop`` (the run's), the workflow's answer.

An agent step's status is its session's ``Outcome`` status (``runner.session.outcome``: the rule
every door shares): ``ok`` and ``stopped`` (a hook's ``stop``) give their answer to the steps after;
``limit`` and ``interrupted`` stop the workflow (exit 3, 130); ``error`` is the step's ``on_error``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from runner.agentfile.output_schema import OutputSchema
from runner.agentfile.schema_budget import check_off_loop
from runner.agentfile.workflow import WorkflowConfig
from runner.errors import ConfigError
from runner.runtime.runtime import AgentRuntime
from runner.workflow.expressions import Evaluator, plain

__all__ = [
    "SEVERITY",
    "Restart",
    "StepOutcome",
    "Stop",
    "agent_outcome",
    "answer_text",
    "checked_output",
    "final_output",
    "worst",
]

#: The exit code of each way a workflow stops early, most important first.
SEVERITY = (130, 1, 3)


class Stop(Exception):
    """The workflow stops: a step failed (1), a budget is spent (3), Ctrl+C (130)."""

    def __init__(self, code: int, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.transient = transient


class Restart(Exception):
    """``--watch`` changed the workflow's steps: run them again from the top, finished steps reused."""


@dataclass
class StepOutcome:
    """How one step ended, and its output."""

    status: str  # ok | stopped | error | skipped | limit | interrupted
    output: Any = None
    error: str | None = None
    transient: bool = False


def answer_text(value: Any) -> str:
    """A workflow's output as text (a batch line's ``answer``, an outcome's): a string as it is,
    anything else as JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def worst(stops: list[Stop]) -> Stop:
    """Of several ways steps running at once stopped, the one the run ends with."""
    return min(stops, key=lambda s: SEVERITY.index(s.code) if s.code in SEVERITY else 0)


async def final_output(
    workflow: WorkflowConfig, evaluator: Evaluator, context: dict[str, Any], last: Any
) -> Any:
    """The workflow's answer: its ``output`` template rendered (else the last step's output), checked
    against ``output_schema`` off the event loop when long (``check_off_loop``: within the answer
    budget of docs/security.md); ``Stop(1)`` when it does not render or match."""
    value = last
    if workflow.output is not None:
        try:
            value = evaluator.render(workflow.output, context, where="workflow output")
        except ConfigError as exc:  # the data the steps gave does not fit the template
            raise Stop(1, f"the workflow's output did not render: {exc.message}") from None
    if workflow.output_schema is None:
        return value
    schema = OutputSchema(workflow.output_schema, where="the workflow's output_schema")
    value, problem = await checked_output(schema, value, label="output_schema")
    if problem is not None:
        raise Stop(1, problem)
    return value


async def checked_output(
    schema: OutputSchema, value: Any, *, label: str, clean: Callable[[str], str] = str
) -> tuple[Any, str | None]:
    """A workflow's output checked against ``schema`` (a string read as JSON first), off the event
    loop when long (``check_off_loop``: within the answer budget of docs/security.md); the value and
    why it does not match, ``label`` naming the schema and ``clean`` applied to the validator's words
    (None: it matches). The engine's ``output_schema`` and a served client's schema both use it."""

    def check() -> tuple[Any, str | None]:
        read = value
        if isinstance(read, str):
            try:
                read = json.loads(read)
            except json.JSONDecodeError as exc:
                return read, f"the workflow's output is not JSON ({exc.msg}); {label} wants JSON"
            except RecursionError:
                return read, f"the workflow's output nests too deeply to read; {label} wants JSON"
        problems = schema.problems(read)
        if problems:
            return read, f"the workflow's output does not match {label}: {clean('; '.join(problems))}"
        return read, None

    return await check_off_loop(
        check,
        size=len(value) if isinstance(value, str) else 0,  # a value: tried on the loop for a few steps
        late=lambda why: (value, f"the workflow's output does not match {label}: {why}"),
    )


def agent_outcome(runtime: AgentRuntime, result: Any) -> StepOutcome:
    """What an agent step's finished session gave: its status (the session's ``Outcome``), and its
    output or why it has none."""
    outcome = result.outcome
    if outcome.status in ("interrupted", "limit", "error"):
        return StepOutcome(outcome.status, error=outcome.why())
    output = plain(result.data) if runtime.config.output is not None else result.output
    return StepOutcome(outcome.status, output, error=outcome.why())
