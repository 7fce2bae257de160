"""The budget of one template render (or compile): steps, characters built, output, depth and time.

``TemplateLimits`` says what a template may cost; ``metered(limits)`` opens a ``Budget`` for the code
it encloses (a render, a compile) and every bounded operation of the sandbox charges it. Going over
a limit raises ``TemplateLimitError``, a Jinja ``SecurityError`` that carries which limit it was.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from jinja2.exceptions import SecurityError

__all__ = ["LIMITS", "Budget", "TemplateLimitError", "TemplateLimits", "current_budget", "metered"]


@dataclass(frozen=True)
class TemplateLimits:
    """What one template may cost (see the module docstring)."""

    source_chars: int = 1_000_000
    source_tokens: int = 50_000
    steps: int = 250_000
    built_chars: int = 50_000_000
    output_chars: int = 10_000_000
    range_items: int = 100_000
    depth: int = 100
    int_bits: int = 10_000
    seconds: float = 3.0


LIMITS = TemplateLimits()


class TemplateLimitError(SecurityError):
    """A template went over one of its ``TemplateLimits`` (``limit`` names which)."""

    def __init__(self, message: str, *, limit: str, lineno: int | None = None) -> None:
        super().__init__(message)
        self.limit = limit
        self.lineno = lineno


class Budget:
    """What one render (or compile) has spent so far."""

    def __init__(self, limits: TemplateLimits) -> None:
        self.limits = limits
        self.steps = 0
        self.built = 0
        self.output = 0
        self.depth = 0
        self.deadline = time.monotonic() + limits.seconds

    def step(self, count: int = 1) -> None:
        """Count ``count`` steps; over the step or time limit, stop the template."""
        self.steps += count
        if self.steps > self.limits.steps:
            raise TemplateLimitError(
                f"the template takes more than {self.limits.steps:,} steps (loop iterations, calls, "
                "filters and items built): a loop that never ends, or nested loops over big ranges?",
                limit="steps",
            )
        if time.monotonic() > self.deadline:
            raise TemplateLimitError(
                f"the template ran for more than {self.limits.seconds:g} s", limit="seconds"
            )

    def need_steps(self, count: int, what: str) -> None:
        """Refuse an operation that would put ``count`` items into lists before it runs."""
        if self.steps + count <= self.limits.steps:
            return
        if count > self.limits.steps:
            message = f"{what} would make {count:,} items"
        else:
            message = f"the template has taken {self.steps:,} steps and {what} would make {count:,} items"
        raise TemplateLimitError(
            f"{message}: a template may make at most {self.limits.steps:,} items and steps in one render",
            limit="steps",
        )

    def need_chars(self, count: int, what: str) -> None:
        """Refuse an operation that would build a string of ``count`` characters before it runs."""
        if self.built + count <= self.limits.built_chars:
            return
        if count > self.limits.built_chars:
            message = f"{what} would build a string of {count:,} characters"
        else:
            message = f"the template has built {self.built:,} characters and {what} would add {count:,}"
        raise TemplateLimitError(
            f"{message}: a template may build at most {self.limits.built_chars:,} characters in one render",
            limit="built_chars",
        )

    def charge(self, value: Any, *, unless: Iterable[Any] = ()) -> None:
        """Count what an operation built: characters of a string, items of a container."""
        if any(value is other for other in unless):
            return  # handed back one of its inputs: nothing was built
        if isinstance(value, str | bytes):
            self.built += len(value)
            if self.built > self.limits.built_chars:
                raise TemplateLimitError(
                    f"the template built more than {self.limits.built_chars:,} characters of strings",
                    limit="built_chars",
                )
        elif isinstance(value, list | tuple | dict | set | frozenset):
            self.step(len(value))

    def emit(self, count: int) -> None:
        """Count characters of output."""
        self.output += count
        if self.output > self.limits.output_chars:
            raise TemplateLimitError(
                f"the template's output is longer than {self.limits.output_chars:,} characters",
                limit="output_chars",
            )

    def enter(self) -> None:
        """One call deeper; refuse runaway recursion before Python's own limit is near."""
        self.depth += 1
        if self.depth > self.limits.depth:
            raise TemplateLimitError(
                f"calls nest more than {self.limits.depth} deep (a macro or recursive loop that calls "
                "itself without end?)",
                limit="depth",
            )


_BUDGET: ContextVar[Budget | None] = ContextVar("runner_template_budget", default=None)


@contextlib.contextmanager
def metered(limits: TemplateLimits) -> Iterator[Budget]:
    """Run the enclosed render or compile on one fresh budget."""
    budget = Budget(limits)
    token = _BUDGET.set(budget)
    try:
        yield budget
    finally:
        _BUDGET.reset(token)


def current_budget(limits: TemplateLimits) -> Budget:
    """The active budget, or a fresh one (per-operation limits still hold outside a render)."""
    return _BUDGET.get() or Budget(limits)
