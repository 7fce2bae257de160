"""Checking a structured answer in a test: values by path (``expect.output_json``) and a JSON Schema
(``expect.output_schema``).

A path names a value inside the answer: keys separated by dots, list items by their index
(``temps.0``, ``days.1.high``). A part is a key when the value there is an object, an index when it
is a list. Values compare as JSON does: ``true`` is not ``1``, ``11`` equals ``11.0``, ``"11"`` is
neither. ``runner test`` uses these; so can a pytest test of an agent::

    from runner.testing.expect import Structured, structured_problems

    assert structured_problems(Structured(result.turns[-1].value), values={"city": "Vancouver"}) == []
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runner.agentfile.config import TestCaseConfig
from runner.agentfile.output_schema import OutputSchema, json_path, schema_problems
from runner.session.outcome import Outcome
from runner.text import counted, one_line

__all__ = [
    "Structured",
    "check_expectations",
    "json_equal",
    "lookup",
    "outcome_problems",
    "output_json_problems",
    "structured_problems",
]

#: How much of a value a message quotes.
QUOTE_CHARS = 120
#: How many of an object's keys a "no key" message lists.
MAX_KEYS_SHOWN = 10


@dataclass(frozen=True)
class Structured:
    """A run's structured answer as a test reads it: the JSON ``value``, or ``missing`` saying why
    there is none."""

    value: Any = None
    missing: str | None = None

    @classmethod
    def from_text(cls, text: str) -> Structured:
        """The answer of an agent without ``output:``: its whole text parsed as JSON (strictly:
        a program reading the answer would parse it the same way)."""
        try:
            return cls(json.loads(text))
        except ValueError as exc:
            shown = quoted(text) if text.strip() else "an empty answer"
            return cls(
                missing=f"the answer is not JSON ({exc}): {shown} "
                "(hint: give the agent an output: schema for a structured answer)"
            )


def quoted(value: Any) -> str:
    """``value`` as JSON on one short line."""
    return one_line(json.dumps(value, ensure_ascii=False, default=str), QUOTE_CHARS)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, Mapping):
        return "an object"
    return f"a {type(value).__name__}"


def json_equal(expected: Any, got: Any) -> bool:
    """Whether two JSON values are equal as JSON sees them (a boolean is not a number)."""
    if isinstance(expected, bool) or isinstance(got, bool):
        return isinstance(expected, bool) and isinstance(got, bool) and expected == got
    if isinstance(expected, int | float) or isinstance(got, int | float):
        return isinstance(expected, int | float) and isinstance(got, int | float) and expected == got
    if isinstance(expected, list | tuple) or isinstance(got, list | tuple):
        return (
            isinstance(expected, list | tuple)
            and isinstance(got, list | tuple)
            and len(expected) == len(got)
            and all(json_equal(a, b) for a, b in zip(expected, got, strict=True))
        )
    if isinstance(expected, Mapping) or isinstance(got, Mapping):
        return (
            isinstance(expected, Mapping)
            and isinstance(got, Mapping)
            and set(expected) == set(got)
            and all(json_equal(expected[key], got[key]) for key in expected)
        )
    return type(expected) is type(got) and bool(expected == got)


def _index(part: str) -> int | None:
    return int(part) if part.isascii() and part.isdigit() and (part == "0" or part[0] != "0") else None


def lookup(value: Any, path: str) -> tuple[Any, str | None]:
    """The value at ``path`` inside ``value``: (found, None), or (None, why it is not there)."""
    parts = path.split(".")
    if "" in parts:
        return None, "the path has an empty part (keys are separated by single dots: temps.0)"
    here = value
    for depth, part in enumerate(parts):
        where = ".".join(parts[:depth]) or "the output"
        if isinstance(here, Mapping):
            if part not in here:
                keys = [str(k) for k in here]
                listed = ", ".join(keys[:MAX_KEYS_SHOWN]) + (", ..." if len(keys) > MAX_KEYS_SHOWN else "")
                has = f"its keys: {listed}" if keys else "it has no keys"
                return None, f"missing: {where} has no key {part!r} ({has})"
            here = here[part]
        elif isinstance(here, list | tuple):
            index = _index(part)
            if index is None:
                return None, f"{where} is a list, and {part!r} is not an index (list items are 0, 1, ...)"
            if index >= len(here):
                size = f"only {len(here)} items" if here else "no items"
                return None, f"index {index} is out of range: {where} has {size}"
            here = here[index]
        else:
            return None, f"{where} is {_kind(here)} ({quoted(here)}), not an object or a list"
    return here, None


def output_json_problems(value: Any, expected: Mapping[str, Any]) -> list[str]:
    """How ``value`` misses the values ``expected`` by path (empty when it has them all)."""
    problems = []
    for path, want in expected.items():
        got, why = lookup(value, path)
        if why is not None:
            problems.append(f"output_json {path}: {why}")
        elif not json_equal(want, got):
            problems.append(f"output_json {path}: expected {quoted(want)}, got {quoted(got)}")
    return problems


def structured_problems(
    answer: Structured, *, schema: Mapping[str, Any] | None = None, values: Mapping[str, Any] | None = None
) -> list[str]:
    """How ``answer`` misses ``schema`` (``expect.output_schema``) and ``values`` (``expect.output_json``)."""
    if schema is None and not values:
        return []
    if answer.missing is not None:
        checks = " and ".join(
            name for name, given in (("output_schema", schema is not None), ("output_json", values)) if given
        )
        return [f"{checks} cannot be checked: {answer.missing}"]
    problems: list[str] = []
    if schema is not None:
        invalid = schema_problems(schema)
        if invalid:
            where, message = invalid[0]
            problems.append(f"expect.output_schema is unusable at {json_path(where)}: {message}")
        else:
            checked = OutputSchema(schema, where="expect.output_schema")
            problems.extend(
                f"the output does not match expect.output_schema: {problem}"
                for problem in checked.problems(answer.value)
            )
    if values:
        problems.extend(output_json_problems(answer.value, values))
    return problems


def outcome_problems(case: TestCaseConfig, outcome: Outcome) -> list[str]:
    """How the run's end missed ``expect.status`` (without it: a run that ended with a limit, an
    interruption or an error fails) and ``expect.tools_refused``."""
    expect, problems = case.expect, []
    wanted = expect.status
    if wanted is not None and outcome.status != wanted:
        why = outcome.why()
        problems.append(f"the run ended {outcome.status}" + (f" ({why})" if why else "") + f", not {wanted}")
    elif wanted is None and not outcome.ok:
        problems.append(f"the run ended {outcome.status}: {outcome.why()}")
    missing = [name for name in expect.tools_refused if name not in outcome.refused]
    if missing:
        refused = list(outcome.refused)
        problems.append(f"tools not refused: {missing} (refused: {refused}; called: {list(outcome.tools)})")
    return problems


def check_expectations(
    case: TestCaseConfig,
    output: str,
    tools: list[str],
    steps: int,
    *,
    structured: Structured | None = None,
    outcome: Outcome | None = None,
) -> list[str]:
    """The ways the run missed ``case.expect`` (empty when it met them all); ``structured`` is the
    answer ``output_schema`` and ``output_json`` check (None: ``output`` parsed as JSON);
    ``outcome``, how the run ended (``status``, ``tools_refused``)."""
    expect = case.expect
    problems = outcome_problems(case, outcome) if outcome is not None else []
    for text in expect.output_contains:
        if text not in output:
            problems.append(f"the output does not contain {text!r}")
    if expect.output_matches is not None and re.search(expect.output_matches, output) is None:
        problems.append(f"the output does not match /{expect.output_matches}/")
    if expect.tools_called:
        if expect.ordered:
            position = 0
            for name in tools:
                if position < len(expect.tools_called) and name == expect.tools_called[position]:
                    position += 1
            if position < len(expect.tools_called):
                problems.append(
                    f"tools were not called in the order {list(expect.tools_called)} (called: {tools})"
                )
        else:
            missing = [name for name in expect.tools_called if name not in tools]
            if missing:
                problems.append(f"tools not called: {missing} (called: {tools})")
    if expect.max_steps is not None and steps > expect.max_steps:
        problems.append(f"took {counted(steps, 'step')} (expected at most {expect.max_steps})")
    if expect.output_schema is not None or expect.output_json:
        answer = structured if structured is not None else Structured.from_text(output)
        problems.extend(structured_problems(answer, schema=expect.output_schema, values=expect.output_json))
    return problems
