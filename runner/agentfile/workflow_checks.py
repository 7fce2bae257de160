"""The checks of a team file's ``workflow:`` that its schema cannot make (``runner validate``, issue 17).

Every expression (``when``, ``for_each``, ``until``) and template (``input``, ``vars`` values, the
workflow's ``output``) is parsed with the agents' sandboxed Jinja environment, and every reference
``steps.ID.output.a.0.b`` in it (a ``Getattr``/``Getitem`` chain of constants rooted at the name
``steps``) is checked: the step must exist and have finished by then (not run later, not run at the
same time in a ``parallel``, not be the per-item step inside a ``for_each``), and the field path must
be one the step's agent's ``output:`` schema has (a step whose agent has no ``output:`` answers
text). ``for_each`` must be over a list; a loop needs ``max_iterations``; ids are unique; agents
exist; the names a template reads are ``input``, ``vars``, ``steps``, a loop's ``iteration`` and a
``for_each``'s item. Each problem is a ``ConfigError`` located at the value in the file.

The visibility rules, which the workflow engine follows: a step sees the steps before it; a
``parallel`` step's children see what was done before the ``parallel``, and after it every child is
done; a loop's steps see the steps before them in the same iteration, and after the loop the last
iteration's; the step inside a ``for_each`` is seen only through the ``for_each`` (its output is the
list of the per-item outputs).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import jinja2
from jinja2 import meta, nodes
from jinja2.parser import Parser

from runner.agentfile.config import TemplateSource
from runner.agentfile.sandbox import TemplateLimitError, metered
from runner.agentfile.templates import TemplateEngine
from runner.agentfile.validate import suggest
from runner.agentfile.workflow import Step, WorkflowConfig, build_workflow
from runner.agentfile.workflow_refs import chain as _chain
from runner.agentfile.workflow_refs import guards as _guards
from runner.agentfile.workflow_refs import references as _references
from runner.agentfile.workflow_types import (
    ANY,
    TEXT,
    Missing,
    Shape,
    agent_shapes,
    child,
    is_list,
    item_of,
    list_of,
    record_of,
    what_it_is,
)
from runner.agentfile.yamlsrc import Document, PathKey, error_at, format_path
from runner.errors import ConfigError

__all__ = ["step_shapes", "workflow_errors"]

_STEP_FIELDS = ("output", "status")
_PARSE_ERRORS = (jinja2.TemplateSyntaxError, TemplateLimitError, RecursionError, MemoryError)


@dataclass
class _Scope:
    """What a template sees at one place of the workflow."""

    done: dict[str, Shape] = field(default_factory=dict)
    names: frozenset[str] = frozenset()
    item: tuple[str, Shape] | None = None
    #: Ids of steps running at the same time as this one (the other children of a ``parallel``).
    concurrent: frozenset[str] = frozenset()
    #: Ids of the steps of the loops around this place (a later one's output is the last iteration's).
    loop_ids: frozenset[str] = frozenset()
    #: Ids the step's ``when`` tests with ``steps.ID is defined``.
    guarded: frozenset[str] = frozenset()

    def inner(self, **changes: Any) -> _Scope:
        return replace(self, done=dict(self.done), **changes)


def _all_steps(steps: Iterable[Step]) -> Iterator[Step]:
    for step in steps:
        yield step
        yield from _all_steps(step.steps)
        if step.step is not None:
            yield from _all_steps([step.step])


class _Checker:
    def __init__(
        self, doc: Document, workflow: WorkflowConfig, shapes: dict[str, Shape], extra: frozenset[str]
    ) -> None:
        self.doc = doc
        self.workflow = workflow
        self.shapes = shapes
        self.engine = TemplateEngine(doc.path.parent)
        self.known = frozenset({"input", "vars", "steps"}) | frozenset(self.engine.env.globals) | extra
        self.errors: list[ConfigError] = []
        self.steps: dict[str, Step] = {}
        for step in _all_steps(workflow.steps):
            self.steps.setdefault(step.id, step)
        self.inside_for_each: dict[str, str] = {}
        for step in _all_steps(workflow.steps):
            if step.kind == "for_each" and step.step is not None:
                for inner in _all_steps([step.step]):
                    self.inside_for_each.setdefault(inner.id, step.id)
        self.output_shapes: dict[str, Shape] = {}

    # -- locating ------------------------------------------------------------------------------
    def line_of(self, path: PathKey, lineno: int | None) -> tuple[int, int] | None:
        info = self.doc.sources.value(path)
        if info is None:
            return None
        if not lineno or (lineno == 1 and not info.block_scalar):
            return info.line, info.column
        return info.line + (1 if info.block_scalar else 0) + lineno - 1, 1

    def fail(
        self, message: str, path: PathKey, lineno: int | None = None, *, hint: str | None = None
    ) -> None:
        where = self.line_of(path, lineno)
        info = self.doc.sources.value(path)
        if where is None or info is None:
            self.errors.append(error_at(message, info, path, hint=hint))
            return
        line, column = where
        self.errors.append(
            ConfigError(message, file=info.file, line=line, column=column, path=format_path(path), hint=hint)
        )

    # -- parsing -------------------------------------------------------------------------------
    def expression(self, text: str, path: PathKey) -> nodes.Template | None:
        env = self.engine.env
        try:
            with metered(env.limits):
                parser = Parser(env, text, state="variable")
                expr = parser.parse_expression()
                if not parser.stream.eos:
                    token = parser.stream.current
                    message = f"expected the end of the expression, got '{token.value}'"
                    raise jinja2.TemplateSyntaxError(message, token.lineno)
        except _PARSE_ERRORS as exc:
            self.syntax(exc, path, "expression")
            return None
        tree = nodes.Template([nodes.Output([expr], lineno=1)], lineno=1)
        tree.set_environment(env)
        return tree

    def template(self, text: str, path: PathKey) -> nodes.Template | None:
        info = self.doc.sources.value(path)
        line = info.line + (1 if info.block_scalar else 0) if info is not None else 1
        source = TemplateSource(text=text, origin=self.doc.path, line=line)
        try:
            static = self.engine.static_errors(source)
        except ConfigError as exc:
            self.fail(exc.message, path, _relative(exc.line, line))
            return None
        for error in static:
            self.fail(error.message, path, _relative(error.line, line))
        return None if static else self.engine.parse(source)  # Jinja would repeat an unknown filter

    def syntax(self, exc: BaseException, path: PathKey, what: str) -> None:
        lineno: int | None
        if isinstance(exc, jinja2.TemplateSyntaxError):
            message, lineno = exc.message or "syntax error", exc.lineno
        elif isinstance(exc, TemplateLimitError):
            message, lineno = str(exc.message), exc.lineno
        else:
            message, lineno = "it nests too deeply", None
        self.fail(f"{what}: {message}", path, lineno)

    # -- references ----------------------------------------------------------------------------
    def check(self, tree: nodes.Template | None, path: PathKey, scope: _Scope) -> None:
        """The names and step references of one parsed expression or template."""
        if tree is None:
            return
        known = self.known | scope.names | ({scope.item[0]} if scope.item else set())
        try:
            with metered(self.engine.env.limits):
                undeclared = meta.find_undeclared_variables(tree)
        except _PARSE_ERRORS as exc:
            self.syntax(exc, path, "expression" if path[-1] in ("when", "until", "for_each") else "template")
            return
        for name in sorted(undeclared - known):
            close = suggest(name, known)
            node = next((n for n in tree.find_all(nodes.Name) if n.name == name), None)
            self.fail(
                f"undefined name '{name}'" + (f" (did you mean '{close}'?)" if close else ""),
                path,
                node.lineno if node else None,
                hint="a workflow's templates see input, vars, steps, a loop's iteration, a for_each's item",
            )
        guards = scope.guarded | _guards(tree)
        for ref, root, parts in _references(tree):
            if root == "steps" and "steps" in undeclared:
                self.step_reference(parts, path, ref.lineno, scope, guards)
            elif scope.item and root == scope.item[0] and root in undeclared and parts:
                self.field_path(scope.item[1], parts, root, path, ref.lineno)

    def resolve(self, tree: nodes.Template | None, scope: _Scope) -> tuple[Shape, str] | None:
        """The shape of an expression that is one reference (``steps.plan.output.tasks``, ``input``)."""
        if tree is None:
            return None
        body = tree.body[0]
        expr = body.nodes[0] if isinstance(body, nodes.Output) else None
        found = _chain(expr) if expr is not None else None
        if found is None:
            return None
        root, parts = found
        if root == "input" and not parts:
            return TEXT, "input"
        if scope.item and root == scope.item[0]:
            shape, shown = scope.item[1], root
        elif root == "steps" and len(parts) >= 2 and parts[1] == "output" and parts[0] in scope.done:
            shape, shown, parts = scope.done[str(parts[0])], f"steps.{parts[0]}.output", parts[2:]
        else:
            return None
        for part in parts:
            found_shape = child(shape, part)
            if isinstance(found_shape, Missing):
                return None
            shape, shown = found_shape, f"{shown}.{part}"
        return shape, shown

    def step_reference(
        self, parts: list[str | int], path: PathKey, lineno: int, scope: _Scope, guards: frozenset[str]
    ) -> None:
        if not parts:
            return
        target = str(parts[0])
        if target not in scope.done and target in scope.loop_ids and target in guards:
            # the loop's previous iteration's output, read only where it is tested to be there
            shape = self.static_shape(self.steps[target])
            if len(parts) > 2 and parts[1] == "output":
                self.field_path(shape, parts[2:], f"steps.{target}.output", path, lineno)
            return
        if target not in scope.done:
            self.not_ready(target, path, lineno, scope)
            return
        if len(parts) == 1:
            return
        if parts[1] not in _STEP_FIELDS:
            close = suggest(str(parts[1]), _STEP_FIELDS)
            message = f"steps.{target} has no '{parts[1]}': a step has output and status"
            self.fail(message + (f" (did you mean '{close}'?)" if close else ""), path, lineno)
            return
        if parts[1] == "output":
            self.field_path(scope.done[target], parts[2:], f"steps.{target}.output", path, lineno)

    def not_ready(self, target: str, path: PathKey, lineno: int, scope: _Scope) -> None:
        if target in scope.concurrent:
            self.fail(
                f"steps.{target} runs at the same time as this step (in one parallel): "
                "its output is not ready yet",
                path,
                lineno,
                hint="read it in a step after the parallel one",
            )
        elif target in scope.loop_ids:
            self.fail(
                f"steps.{target} runs later in this loop: in its first iteration it has no output yet",
                path,
                lineno,
                hint=f"to read the previous iteration's, test it first: {{% if steps.{target} is defined %}}",
            )
        elif target in self.inside_for_each:
            outer = self.inside_for_each[target]
            self.fail(
                f"steps.{target} runs once per item inside for_each '{outer}'",
                path,
                lineno,
                hint=f"read steps.{outer}.output: the list of its outputs, in order",
            )
        elif target in self.steps:
            self.fail(
                f"steps.{target} runs later: its output is not ready here",
                path,
                lineno,
                hint="a step sees the steps before it",
            )
        else:
            close = suggest(target, [*scope.done, *self.steps])
            self.fail(f"no step '{target}'" + (f" (did you mean '{close}'?)" if close else ""), path, lineno)

    def field_path(
        self, shape: Shape, parts: list[str | int], shown: str, path: PathKey, lineno: int
    ) -> None:
        for part in parts:
            found = child(shape, part)
            if isinstance(found, Missing):
                what = found.reason
                if shape.kind == "text":
                    what = "is text (its agent has no output: schema)"
                message = (
                    f"{shown} {what}: it has no field '{part}'"
                    if "has no field" not in what
                    else f"{shown} {what}"
                )
                if found.close:
                    message += f" (did you mean '{found.close}'?)"
                self.fail(message, path, lineno, hint="the fields come from the agent's output: schema")
                return
            shape, shown = found, f"{shown}.{part}"

    # -- steps ---------------------------------------------------------------------------------
    def run(self) -> list[ConfigError]:
        self.unique_ids()
        scope = _Scope()
        self.sequence(self.workflow.steps, scope)
        if self.workflow.output is not None:
            path = (*self.workflow.path, "output")
            self.check(self.template(self.workflow.output, path), path, scope)
        if self.workflow.output_schema is not None:
            self.output_schema(self.workflow.output_schema, (*self.workflow.path, "output_schema"))
        return self.errors

    def output_schema(self, schema: Any, path: PathKey) -> None:
        """The workflow's ``output_schema`` is a usable JSON Schema (as an agent's ``output:`` must be)."""
        from runner.agentfile.output_schema import schema_problems

        for where, message in schema_problems(schema):
            at = (*path, *where)
            while len(at) > len(path) and self.doc.sources.value(at) is None:
                at = at[:-1]
            self.fail(message, at)

    def unique_ids(self) -> None:
        first: dict[str, Step] = {}
        for step in _all_steps(self.workflow.steps):
            if step.id in first:
                info = self.doc.sources.value((*first[step.id].path, "id"))
                at = f" (first at line {info.line})" if info else ""
                self.fail(
                    f"duplicate step id '{step.id}'{at}",
                    (*step.path, "id"),
                    hint="each step needs its own id",
                )
            else:
                first[step.id] = step

    def sequence(self, steps: Iterable[Step], scope: _Scope) -> None:
        for step in steps:
            self.step(step, scope)

    def step(self, step: Step, scope: _Scope) -> None:
        if step.when is not None:
            when = self.expression(step.when, (*step.path, "when"))
            self.check(when, (*step.path, "when"), scope)
            guarded = _guards(when)
            if guarded:  # what the step's own `when` tests is there in its input (not in later steps)
                self.step(replace(step, when=None), replace(scope, guarded=scope.guarded | guarded))
                return
        if step.kind == "agent":
            self.agent_step(step, scope)
        elif step.kind == "parallel":
            self.parallel_step(step, scope)
        elif step.kind == "for_each":
            self.for_each_step(step, scope)
        else:
            self.loop_step(step, scope)

    def agent_step(self, step: Step, scope: _Scope) -> None:
        assert step.agent is not None
        if step.agent not in self.shapes:
            close = suggest(step.agent, self.shapes)
            self.fail(
                f"no agent named '{step.agent}' in this file"
                + (f" (did you mean '{close}'?)" if close else ""),
                (*step.path, "agent"),
                hint="agents here: " + ", ".join(self.shapes) if self.shapes else None,
            )
        if step.input is not None:
            path = (*step.path, "input")
            self.check(self.template(step.input, path), path, scope)
        for key, value in step.vars.items():
            if isinstance(value, str):
                path = (*step.path, "vars", key)
                self.check(self.template(value, path), path, scope)
        self.finish(step, self.shapes.get(step.agent, ANY), scope)

    def static_shape(self, step: Step) -> Shape:
        """The shape of a step's output, from its kind and its agents' schemas."""
        if step.kind == "agent":
            return self.shapes.get(step.agent or "", ANY)
        if step.kind == "for_each":
            return list_of(self.static_shape(step.step)) if step.step is not None else ANY
        if step.kind == "parallel":
            return record_of({sub.id: self.static_shape(sub) for sub in step.steps})
        return self.static_shape(step.steps[-1]) if step.steps else ANY  # a loop: its last step's

    def finish(self, step: Step, shape: Shape, scope: _Scope) -> None:
        scope.done[step.id] = shape
        self.output_shapes.setdefault(step.id, shape)

    def parallel_step(self, step: Step, scope: _Scope) -> None:
        ids = [{s.id for s in _all_steps([sub])} for sub in step.steps]
        finished: dict[str, Shape] = {}
        for i, sub in enumerate(step.steps):
            others = frozenset().union(*(ids[:i] + ids[i + 1 :]))
            inner = scope.inner(concurrent=scope.concurrent | others)
            self.step(sub, inner)
            finished.update({k: v for k, v in inner.done.items() if k not in scope.done})
        scope.done.update(finished)
        self.finish(step, self.static_shape(step), scope)

    def for_each_step(self, step: Step, scope: _Scope) -> None:
        assert step.for_each is not None and step.step is not None
        path = (*step.path, "for_each")
        tree = self.expression(step.for_each, path)
        self.check(tree, path, scope)
        resolved = self.resolve(tree, scope)
        item = ANY
        if resolved is not None:
            shape, shown = resolved
            if is_list(shape) is False:
                self.fail(
                    f"for_each needs a list, and {shown} is {what_it_is(shape)}",
                    path,
                    hint="name a field whose schema is type: array",
                )
            else:
                item = item_of(shape)
        inner = scope.inner(item=(step.as_name, item))
        self.step(step.step, inner)
        self.finish(step, list_of(inner.done.get(step.step.id, ANY)), scope)

    def loop_step(self, step: Step, scope: _Scope) -> None:
        if step.max_iterations is None:
            self.fail(
                f"loop '{step.id}' has no max_iterations",
                (*step.path, "loop"),
                hint="give the most iterations it may run: max_iterations: 5",
            )
        body = {s.id for s in _all_steps(step.steps) if s.id not in self.inside_for_each}
        inner = scope.inner(names=scope.names | {"iteration"}, loop_ids=scope.loop_ids | body)
        self.sequence(step.steps, inner)
        if step.until is not None:
            path = (*step.path, "loop", "until")
            self.check(self.expression(step.until, path), path, inner)
        scope.done.update({k: v for k, v in inner.done.items() if k not in scope.done})
        self.finish(step, self.static_shape(step), scope)


def _relative(line: int | None, first: int) -> int | None:
    """A template line (1-based) from a line of the file an engine error named."""
    return line - first + 1 if line else None


def _checked(
    doc: Document,
    bodies: Iterable[tuple[str, PathKey]],
    sound: Callable[[PathKey], bool],
    extra: Iterable[str],
) -> _Checker | None:
    if not isinstance(doc.data, dict) or doc.data.get("workflow") is None or not sound(("workflow",)):
        return None
    workflow = build_workflow(doc)
    if workflow is None:
        return None
    bodies = list(bodies)
    checker = _Checker(doc, workflow, agent_shapes(doc, bodies, sound), frozenset(extra))
    checker.run()
    return checker


def workflow_errors(
    doc: Document,
    *,
    bodies: Iterable[tuple[str, PathKey]],
    sound: Callable[[PathKey], bool],
    extra_vars: Iterable[str] = (),
) -> list[ConfigError]:
    """The problems of the document's ``workflow:`` (none when it has none or the schema refused it),
    and top-level ``tests:`` without a workflow to run."""
    if isinstance(doc.data, dict) and doc.data.get("tests") and doc.data.get("workflow") is None:
        info = doc.sources.entries.get(("tests",))
        return [
            error_at(
                "a team file's own tests run its workflow, and this file has no workflow:",
                info,
                ("tests",),
                key=True,
                hint="add a workflow:, or move each case under the agent it tests (agents.NAME.tests)",
            )
        ]
    checker = _checked(doc, bodies, sound, extra_vars)
    return checker.errors if checker is not None else []


def step_shapes(doc: Document, *, bodies: Iterable[tuple[str, PathKey]]) -> dict[str, Shape]:
    """The output shape of every step of a valid workflow, by id (for ``runner render``)."""
    checker = _checked(doc, bodies, lambda path: True, ())
    return checker.output_shapes if checker is not None else {}
