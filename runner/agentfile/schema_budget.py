"""What a JSON Schema may cost: a budget for the schema itself, and one for checking each answer.

Every output schema (an agent's ``output:``, a client's ``response_format`` or forced tool, the
Responses API's ``text.format``) passes ``budget_problem`` before it is used, and every answer is
checked under a ``CheckBudget``:

- **the schema** (``budget_problem``, counted without recursion, references followed once each with
  memoization): at most ``MAX_SCHEMA_NODES`` JSON values as written, ``MAX_EXPANDED_NODES`` once
  every ``$ref`` is replaced by what it names (a chain of ``allOf: [{$ref: d1}, {$ref: d1}]`` doubles
  at each level: 20 levels of 1.6 KB expand to two million), and ``MAX_SCHEMA_DEPTH`` levels of
  nesting, references followed. A reference back into itself (a recursive schema) counts once: what
  it costs grows with the answer, which the check's budget bounds.
- **an answer** (``CheckBudget``): nested at most ``MAX_ANSWER_DEPTH`` levels, and checked within
  ``MAX_CHECK_STEPS`` keyword evaluations and ``CHECK_TIME_S`` seconds; past either the answer is
  refused with a message that says so (the model may try a smaller one). ``check_off_loop`` runs a
  check that can be long in a worker thread, so an event loop (``runner serve``) keeps answering.

``schema_nodes`` walks the schema positions of a schema (the values of ``enum``, ``const``,
``default`` and ``examples`` are data; a *property* of such a name is a schema like any other).
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from runner.agentfile.validate import resolve_pointer
from runner.agentfile.yamlsrc import PathKey

__all__ = [
    "CHECK_TIME_S",
    "DATA_KEYWORDS",
    "INLINE_ANSWER_CHARS",
    "INLINE_CHECK_STEPS",
    "MAX_ANSWER_DEPTH",
    "MAX_CHECK_STEPS",
    "MAX_EXPANDED_NODES",
    "MAX_SCHEMA_DEPTH",
    "MAX_SCHEMA_NODES",
    "REF_KEYWORDS",
    "CheckBudget",
    "CheckOverrun",
    "SchemaCost",
    "answer_depth",
    "budget_problem",
    "check_off_loop",
    "current_budget",
    "schema_cost",
    "schema_nodes",
]

#: JSON values (objects, arrays, strings, numbers...) a schema may hold as written.
MAX_SCHEMA_NODES = 20_000
#: JSON values a schema may hold once its references are expanded (counted, never built).
MAX_EXPANDED_NODES = 20_000
#: Levels of nesting of a schema, references followed (a request body nests at most 100).
MAX_SCHEMA_DEPTH = 64
#: Levels of arrays and objects an answer may nest.
MAX_ANSWER_DEPTH = 100
#: Keyword evaluations one answer's check may take (a 1 MB answer of plain objects takes ~300,000).
MAX_CHECK_STEPS = 1_000_000
#: Seconds one answer's check may take.
CHECK_TIME_S = 10.0
#: Keyword evaluations a check may take on the caller's thread before it moves to a worker thread.
INLINE_CHECK_STEPS = 1_000
#: Answers longer than this (characters) are read and checked in a worker thread from the start.
INLINE_ANSWER_CHARS = 4_000
#: Keywords whose values are data, not schemas: a ``$ref`` or ``pattern`` inside them is no keyword.
DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples"})
#: Keywords whose values map names to schemas.
NAMED_SCHEMAS = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"}
)
#: Keywords that refer to another part of the schema.
REF_KEYWORDS = ("$ref", "$dynamicRef", "$recursiveRef")
_T = TypeVar("_T")


def schema_nodes(schema: Any, path: PathKey = ()) -> Iterator[tuple[PathKey, Mapping[str, Any]]]:
    """Every mapping in schema position in ``schema``, with its path (no recursion: any depth)."""
    stack: list[tuple[Any, PathKey, bool]] = [(schema, path, False)]
    while stack:
        item, where, named = stack.pop()
        if isinstance(item, Mapping):
            if not named:
                yield where, item
            stack.extend(
                (value, (*where, key), not named and key in NAMED_SCHEMAS)
                for key, value in item.items()
                if named or key not in DATA_KEYWORDS
            )
        elif isinstance(item, list) and not named:
            stack.extend((value, (*where, index), False) for index, value in enumerate(item))


@dataclass(frozen=True)
class SchemaCost:
    """What a schema costs: ``nodes`` as written, ``expanded`` with references replaced (capped just
    past the budget), ``depth`` with references followed; ``worst`` is the path of the smallest
    subschema whose expansion is over the budget (where to look), if any."""

    nodes: int
    expanded: int
    depth: int
    worst: PathKey | None = None


class _Frame:
    """One value on the counting stack (a plain class: made for every value of the schema)."""

    __slots__ = ("children", "depth", "named", "node", "path", "schema", "size")

    def __init__(self, node: Any, path: PathKey, schema: bool, named: bool) -> None:
        self.node, self.path = node, path
        self.schema = schema  # in schema position (its $ref is followed)
        self.named = named  # a mapping of names to schemas
        self.children: list[tuple[Any, PathKey, bool, bool]] = []
        self.size = 1
        self.depth = 0


def _children(frame: _Frame) -> list[tuple[Any, PathKey, bool, bool]]:
    node, path = frame.node, frame.path
    if isinstance(node, list):
        return [(value, (*path, index), frame.schema, False) for index, value in enumerate(node)]
    if not isinstance(node, Mapping):
        return []
    if not frame.schema:
        return [(value, (*path, key), False, False) for key, value in node.items()]
    if frame.named:
        return [(value, (*path, key), True, False) for key, value in node.items()]
    return [
        (value, (*path, key), key not in DATA_KEYWORDS, key in NAMED_SCHEMAS) for key, value in node.items()
    ]


def _targets(root: Any, frame: _Frame) -> list[tuple[Any, PathKey, bool, bool]]:
    """What a schema mapping's references name in ``root`` (with their written paths), as children:
    each counts again wherever it is used."""
    if not (frame.schema and not frame.named and isinstance(frame.node, Mapping)):
        return []
    found: list[tuple[Any, PathKey, bool, bool]] = []
    for keyword in REF_KEYWORDS:
        ref = frame.node.get(keyword)
        if isinstance(ref, str) and ref.startswith("#"):
            try:
                target = resolve_pointer(root, ref)
            except LookupError:
                continue
            parts = [p.replace("~1", "/").replace("~0", "~") for p in ref[1:].split("/")[1:]]
            found.append((target, tuple(parts), True, False))
    return found


def schema_cost(schema: Any, *, cap: int = MAX_EXPANDED_NODES) -> SchemaCost:
    """The cost of ``schema`` (sizes capped at ``cap + 1``: a count is never a huge number)."""
    written = sum(1 for _ in _values(schema, MAX_SCHEMA_NODES + 1))
    memo: dict[tuple[int, bool, bool], tuple[int, int]] = {}
    active: set[tuple[int, bool, bool]] = set()
    worst: tuple[int, PathKey] | None = None
    stack = [_Frame(schema, (), True, False)]
    stack[0].children = [*_children(stack[0]), *_targets(schema, stack[0])]
    active.add((id(schema), True, False))
    result = (1, 1)
    while stack:
        frame = stack[-1]
        if frame.children:
            node, path, in_schema, named = frame.children.pop()
            key = (id(node), in_schema, named)
            if not isinstance(node, Mapping | list):
                frame.size += 1
            elif key in memo:
                size, depth = memo[key]
                frame.size, frame.depth = min(frame.size + size, cap + 1), max(frame.depth, depth)
            elif key in active:  # a reference back into itself: counted once
                frame.size += 1
            else:
                child = _Frame(node, path, in_schema, named)
                child.children = [*_children(child), *_targets(schema, child)]
                active.add(key)
                stack.append(child)
            continue
        stack.pop()
        key = (id(frame.node), frame.schema, frame.named)
        active.discard(key)
        result = (min(frame.size, cap + 1), frame.depth + 1)
        memo[key] = result
        over = result[0] > cap and frame.schema and not frame.named and isinstance(frame.node, Mapping)
        if over and worst is None:  # the first schema over the budget: all its parts are within
            worst = (result[0], frame.path)
        if stack:
            parent = stack[-1]
            parent.size = min(parent.size + result[0], cap + 1)
            parent.depth = max(parent.depth, result[1])
    return SchemaCost(written, result[0], result[1], None if worst is None else worst[1])


def _values(node: Any, limit: int) -> Iterator[Any]:
    """Up to ``limit`` JSON values of ``node`` (every mapping, list and scalar in it)."""
    stack = [node]
    count = 0
    while stack and count < limit:
        item = stack.pop()
        count += 1
        yield item
        if isinstance(item, Mapping):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def budget_problem(schema: Any) -> tuple[PathKey, str] | None:
    """Why ``schema`` is over the budget (the path to look at and the message), or None."""
    cost = schema_cost(schema)
    if cost.nodes > MAX_SCHEMA_NODES:
        return (), (
            f"the schema is too large: it holds more than {MAX_SCHEMA_NODES:,} values (objects, arrays, "
            f"strings, numbers; the limit is {MAX_SCHEMA_NODES:,})"
        )
    if cost.expanded > MAX_EXPANDED_NODES:
        return cost.worst or (), (
            f"the schema is too complex: with its $refs expanded it holds more than {MAX_EXPANDED_NODES:,} "
            f"values (the limit is {MAX_EXPANDED_NODES:,}; each $ref counts what it names, every time "
            "it is used)"
        )
    if cost.depth > MAX_SCHEMA_DEPTH:
        return (), (
            f"the schema nests {cost.depth} levels deep, its $refs followed (the limit is {MAX_SCHEMA_DEPTH})"
        )
    return None


def answer_depth(value: Any, limit: int = MAX_ANSWER_DEPTH) -> int:
    """How deeply arrays and objects nest in ``value`` (level by level, no recursion; counting stops
    just past ``limit``)."""
    depth = 0
    level = [value] if isinstance(value, dict | list) else []
    while level and depth <= limit:
        depth += 1
        level = [
            child
            for item in level
            for child in (item.values() if isinstance(item, dict) else item)
            if isinstance(child, dict | list)
        ]
    return depth


class CheckOverrun(Exception):
    """A check went past its ``CheckBudget``; ``message`` says which limit, as an answer's problem."""

    def __init__(self, budget: CheckBudget, message: str) -> None:
        super().__init__(message)
        self.budget = budget
        self.message = message


class CheckBudget:
    """The steps and seconds one answer's check may take; ``tick`` raises ``CheckOverrun`` past them.

    ``inline`` marks the small budget of a check tried on the caller's thread first: its overrun is
    not the answer's fault, the check goes on in a worker thread with the full budget."""

    def __init__(
        self, *, steps: int | None = None, seconds: float | None = None, inline: bool = False
    ) -> None:
        self.steps = MAX_CHECK_STEPS if steps is None else steps
        self.seconds = CHECK_TIME_S if seconds is None else seconds
        self.inline = inline
        self.used = 0
        self.deadline = time.monotonic() + self.seconds
        self._next_clock = 0

    def tick(self, steps: int = 1) -> None:
        """Count ``steps`` keyword evaluations (the clock is read every 1,000 steps)."""
        self.used += steps
        if self.used > self.steps:
            raise CheckOverrun(
                self, f"the answer could not be checked within {self.steps:,} steps (MAX_CHECK_STEPS)"
            )
        if self.used >= self._next_clock:
            self._next_clock = self.used + 1000
            if time.monotonic() > self.deadline:
                raise CheckOverrun(self, f"the answer could not be checked within {self.seconds:g} s")

    @contextlib.contextmanager
    def active(self) -> Iterator[CheckBudget]:
        """This budget as the one checks in this context count against."""
        token = _BUDGET.set(self)
        try:
            yield self
        finally:
            _BUDGET.reset(token)


_BUDGET: contextvars.ContextVar[CheckBudget | None] = contextvars.ContextVar("check_budget", default=None)


def current_budget() -> CheckBudget | None:
    """The budget of the check running in this context (None: none set, a check makes its own)."""
    return _BUDGET.get()


def _inline(work: Callable[[], _T]) -> tuple[bool, _T | None]:
    try:
        with CheckBudget(steps=INLINE_CHECK_STEPS, inline=True).active():
            return True, work()
    except CheckOverrun as exc:
        if not exc.budget.inline:
            raise
        return False, None


def _threaded(work: Callable[[], _T]) -> _T:
    with CheckBudget().active():
        return work()


async def check_off_loop(work: Callable[[], _T], *, size: int, late: Callable[[str], _T]) -> _T:
    """``work()`` (a check of an answer of ``size`` characters) without holding the event loop.

    A small answer is checked on the loop within ``INLINE_CHECK_STEPS`` (microseconds); past them, or
    for a long answer, in a worker thread within the full budget. A thread that has not answered
    ``CHECK_TIME_S`` (and a second) later is left to finish alone: ``late(why)`` is the result."""
    import asyncio  # not at import: ``runner validate`` reads schemas without an event loop

    if size <= INLINE_ANSWER_CHARS:
        done, result = _inline(work)
        if done:
            return result  # type: ignore[return-value]
    try:
        return await asyncio.wait_for(asyncio.to_thread(_threaded, work), CHECK_TIME_S + 1)
    except TimeoutError:
        return late(f"the answer could not be checked within {CHECK_TIME_S:g} s")
