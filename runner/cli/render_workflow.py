"""``runner render team.yaml`` for a team file with a ``workflow:``: the steps as a tree (issue 17).

Each step shows its id, kind, agent, input template, ``vars``, ``when`` and the type of its output
(``object{tasks: array}`` from the agent's ``output:`` schema, ``text`` without one, ``array[...]``
for a ``for_each``); ``--json`` prints the same as data. Nothing is run and no model is called.
"""

from __future__ import annotations

import json
from typing import Any

import typer

from runner.agentfile.files import AgentFile
from runner.agentfile.workflow import Step, WorkflowConfig, build_workflow
from runner.agentfile.workflow_checks import step_shapes
from runner.agentfile.workflow_types import ANY, Shape, describe
from runner.cli.common import display_path

__all__ = ["has_workflow", "render_workflow", "workflow_tree"]


def has_workflow(agent_file: AgentFile) -> bool:
    """Whether the file is a team with a ``workflow:``."""
    data = agent_file.document.data
    return agent_file.is_team and isinstance(data, dict) and data.get("workflow") is not None


def _step(step: Step, shapes: dict[str, Shape]) -> dict[str, Any]:
    entry: dict[str, Any] = {"id": step.id, "kind": step.kind}
    if step.kind == "agent":
        entry.update(agent=step.agent, input=step.input if step.input is not None else "{{ input }}")
        if step.vars:
            entry["vars"] = dict(step.vars)
    elif step.kind == "for_each":
        assert step.step is not None
        entry.update(
            for_each=step.for_each,
            as_name=step.as_name,
            max_parallel=step.max_parallel,
            step=_step(step.step, shapes),
        )
    elif step.kind == "loop":
        entry.update(until=step.until, max_iterations=step.max_iterations)
    if step.steps:
        entry["steps"] = [_step(sub, shapes) for sub in step.steps]
    if step.when is not None:
        entry["when"] = step.when
    if step.on_error != "stop":
        entry["on_error"] = step.on_error
    entry["output_type"] = describe(shapes.get(step.id, ANY))
    return entry


def workflow_tree(agent_file: AgentFile) -> dict[str, Any]:
    """The workflow of a valid team file as data: its name, steps (nested) and output."""
    workflow: WorkflowConfig | None = build_workflow(agent_file.document)
    assert workflow is not None
    bodies = [(name, agent_file.prefix(name)) for name in agent_file.names]
    shapes = step_shapes(agent_file.document, bodies=bodies)
    tree: dict[str, Any] = {
        "workflow": workflow.name,
        "file": display_path(str(agent_file.path)),
        "steps": [_step(step, shapes) for step in workflow.steps],
        "output": workflow.output,
    }
    if workflow.output_schema is not None:
        tree["output_schema"] = workflow.output_schema
    return tree


def _one_line(expression: Any) -> str:
    """An expression written over several lines, on one (its line breaks are only spacing)."""
    return " ".join(str(expression).split())


def _indented(text: Any, indent: str) -> str:
    """A template's text with its later lines under its first, at ``indent`` (the tree stays whole)."""
    return str(text).rstrip("\n").replace("\n", "\n" + indent)


def _head(entry: dict[str, Any]) -> str:
    kind = entry["kind"]
    if kind == "agent":
        text = f"{entry['id']}: agent {entry['agent']}"
    elif kind == "for_each":
        text = f"{entry['id']}: for_each {_one_line(entry['for_each'])} as {entry['as_name']}"
        text += f" (max_parallel {entry['max_parallel']})"
    elif kind == "loop":
        until = f" until {_one_line(entry['until'])}" if entry.get("until") else ""
        text = f"{entry['id']}: loop{until} (max_iterations {entry['max_iterations']})"
    else:
        text = f"{entry['id']}: parallel"
    if "output_type" in entry:
        text += f" -> {entry['output_type']}"
    return text


def _lines(entries: list[dict[str, Any]], indent: str) -> list[str]:
    out: list[str] = []
    for i, entry in enumerate(entries):
        last = i == len(entries) - 1
        out.append(f"{indent}{'└─ ' if last else '├─ '}{_head(entry)}")
        inner = indent + ("   " if last else "│  ")
        details = [
            ("when", entry.get("when")),
            ("on_error", entry.get("on_error")),
            ("input", entry.get("input")),
        ]
        details += [(f"vars.{key}", value) for key, value in (entry.get("vars") or {}).items()]
        for key, value in details:
            if value is None:
                continue
            shown = _one_line(value) if key == "when" else _indented(value, inner + " " * (len(key) + 4))
            out.append(f"{inner}  {key}: {shown}")
        children = entry.get("steps") or ([entry["step"]] if "step" in entry else [])
        out += _lines(children, inner)
    return out


def render_workflow(agent_file: AgentFile, *, json_output: bool) -> None:
    """Print the workflow of ``agent_file`` as a tree (or as JSON)."""
    tree = workflow_tree(agent_file)
    if json_output:
        typer.echo(json.dumps(tree, indent=2, ensure_ascii=False))
        return
    typer.echo(f"# workflow: {tree['workflow']} ({tree['file']})")
    typer.echo("\n".join(_lines(tree["steps"], "")))
    output = tree["output"]
    typer.echo(f"output: {_indented(output, ' ' * 8) if output is not None else 'the last step’s output'}")
