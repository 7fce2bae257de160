"""A team file's ``workflow:``: its steps as typed configuration (SPEC section 19, issue 17).

``workflow:`` is a list of steps, or a mapping ``{name, steps, output, output_schema, limits}``.
Each step has an ``id`` and is one of: an agent step (``agent:`` with ``input:`` and ``vars:``),
``parallel:`` (steps run concurrently), ``for_each:`` (one ``step:`` per item of a list, ``as:``
names the item, ``max_parallel``, ``max_items``), or ``loop:`` (``steps:`` repeated until ``until:``
holds, at most ``max_iterations``). Any step may have ``when:`` and ``on_error: stop | continue``. Expressions
(``when``, ``for_each``, ``until``) are Jinja expressions; ``input`` and ``output`` are templates.
``path`` is where the step is in the document, for located errors.

This module only types what passed the schema; the checks a schema cannot make (step references,
output fields) are ``workflow_checks``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from runner.agentfile.config import TestCaseConfig
from runner.agentfile.yamlsrc import Document, PathKey

__all__ = ["DEFAULT_MAX_ITEMS", "Step", "StepKind", "WorkflowConfig", "WorkflowLimits", "build_workflow"]

StepKind = Literal["agent", "parallel", "for_each", "loop"]

#: ``for_each`` without ``max_items``: the most items it runs (a longer list fails the step).
DEFAULT_MAX_ITEMS = 100


@dataclass(frozen=True)
class Step:
    """One step of a workflow."""

    id: str
    kind: StepKind
    path: PathKey
    #: ``agent``: the agent's name in the team, its input template (None: the workflow's input), vars.
    agent: str | None = None
    input: str | None = None
    vars: dict[str, Any] = field(default_factory=dict)
    #: ``parallel``: the steps run at once; ``loop``: the steps repeated.
    steps: tuple[Step, ...] = ()
    #: ``for_each``: the expression giving the list, the item's name, the step run per item.
    for_each: str | None = None
    as_name: str = "item"
    step: Step | None = None
    max_parallel: int = 4
    #: ``for_each``: the most items; a longer list fails the step before any item starts.
    max_items: int = DEFAULT_MAX_ITEMS
    #: ``loop``: the expression that ends it, and the most iterations.
    until: str | None = None
    max_iterations: int | None = None
    when: str | None = None
    on_error: Literal["stop", "continue"] = "stop"


@dataclass(frozen=True)
class WorkflowLimits:
    """``workflow.limits``: budgets shared by every agent the workflow runs."""

    max_cost_usd: float | None = None
    max_tokens: int | None = None
    timeout_s: float | None = None
    max_steps: int | None = None


@dataclass(frozen=True)
class WorkflowConfig:
    """A team file's workflow."""

    name: str
    steps: tuple[Step, ...]
    #: The workflow's answer: a template (None: the last step's output).
    output: str | None = None
    #: A JSON Schema the workflow's output must satisfy.
    output_schema: dict[str, Any] | None = None
    limits: WorkflowLimits = field(default_factory=WorkflowLimits)
    path: PathKey = ("workflow",)
    #: The team file's top-level ``tests:``: cases ``runner test`` runs the workflow on.
    tests: tuple[TestCaseConfig, ...] = ()


def _step(entry: dict[str, Any], path: PathKey) -> Step:
    common: dict[str, Any] = {
        "id": str(entry["id"]),
        "path": path,
        "when": entry.get("when"),
        "on_error": entry.get("on_error", "stop"),
    }
    if "agent" in entry:
        return Step(
            kind="agent",
            agent=entry["agent"],
            input=entry.get("input"),
            vars=dict(entry.get("vars", {})),
            **common,
        )
    if "parallel" in entry:
        steps = tuple(_step(sub, (*path, "parallel", i)) for i, sub in enumerate(entry["parallel"]))
        return Step(kind="parallel", steps=steps, **common)
    if "for_each" in entry:
        return Step(
            kind="for_each",
            for_each=str(entry["for_each"]),
            as_name=str(entry.get("as", "item")),
            step=_step(entry["step"], (*path, "step")),
            max_parallel=int(entry.get("max_parallel", 4)),
            max_items=int(entry.get("max_items", DEFAULT_MAX_ITEMS)),
            **common,
        )
    loop = entry["loop"]
    steps = tuple(_step(sub, (*path, "loop", "steps", i)) for i, sub in enumerate(loop["steps"]))
    return Step(
        kind="loop",
        steps=steps,
        until=loop.get("until"),
        max_iterations=loop.get("max_iterations"),
        **common,
    )


def build_workflow(doc: Document) -> WorkflowConfig | None:
    """The ``workflow:`` of a team document that passed the schema (None when it has none)."""
    from runner.agentfile.build import test_case

    value = doc.data.get("workflow") if isinstance(doc.data, dict) else None
    if value is None:
        return None
    body: dict[str, Any] = {"steps": value} if isinstance(value, list) else dict(value)
    prefix: PathKey = ("workflow",) if isinstance(value, list) else ("workflow", "steps")
    steps = tuple(_step(entry, (*prefix, i)) for i, entry in enumerate(body["steps"]))
    limits = body.get("limits", {})
    name = body.get("name") or doc.data.get("name") or doc.path.stem.replace(".", "-")
    return WorkflowConfig(
        name=str(name),
        steps=steps,
        output=body.get("output"),
        output_schema=body.get("output_schema"),
        limits=WorkflowLimits(
            max_cost_usd=limits.get("max_cost_usd"),
            max_tokens=limits.get("max_tokens"),
            timeout_s=limits.get("timeout_s"),
            max_steps=limits.get("max_steps"),
        ),
        tests=tuple(test_case(doc, ("tests", i), t) for i, t in enumerate(doc.data.get("tests", ()))),
    )
