"""What checking a 1 MB answer costs (issue 23), against jsonschema alone, measured in one run.

Each row reads a reply of about 1 MB (``MAX_ANSWER_CHARS``) as a turn does (``OutputPlan.read``:
find the JSON, check it against the schema) within a fresh ``CheckBudget``, as the worker thread of
``check_off_loop`` does. The floor is jsonschema's own validator over the same records answer and
schema (the cost of the library, without metering, without reading). The rows:

- records: 1 MB of closed objects — accepted; judged within 1.3x of the floor (metering's cost);
- uniqueItems over 1 MB of mixed items (jsonschema alone compares them pairwise: 75 KB took 104 s);
- an ``anyOf`` of 20 object branches, each item matching only the last;
- the largest doubling ``$defs`` chain the schema budget accepts (8 levels), over 1 MB of integers;
- a recursive tree schema over a 1 MB tree.

Every row must end (accepted, or refused with the budget's message) within ``CHECK_TIME_S``.

Run: ``python -m bench.answer_check [--runs N]``. Medians of interleaved rounds; paired ratios.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from bench.common import paired_ratios, report

TARGET = 1.3
FLOOR = "jsonschema alone, records (floor)"


def _records() -> tuple[dict[str, Any], Any]:
    item = {
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            "name": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "price": {"type": "number"},
        },
        "required": ["id", "name", "tags", "price"],
        "additionalProperties": False,
    }
    schema = {
        "type": "object",
        "properties": {"items": {"type": "array", "items": item}},
        "required": ["items"],
    }
    count = 13_500
    return schema, {
        "items": [{"id": i, "name": f"item {i}", "tags": ["a", "b"], "price": i / 2} for i in range(count)]
    }


def _unique() -> tuple[dict[str, Any], Any]:
    kinds: list[Callable[[int], Any]] = [
        lambda i: i,
        lambda i: f"s{i}",
        lambda i: {"k": i, "v": [i, "x"]},
        lambda i: [i, {"n": i}],
        lambda i: i + 0.5,
    ]
    return {"type": "array", "uniqueItems": True}, [kinds[i % 5](i) for i in range(60_000)]


def _union() -> tuple[dict[str, Any], Any]:
    branches = [
        {
            "type": "object",
            "properties": {"kind": {"const": f"k{n}"}, "v": {"type": "integer"}},
            "required": ["kind"],
        }
        for n in range(20)
    ]
    return {"type": "array", "items": {"anyOf": branches}}, [{"kind": "k19", "v": i} for i in range(30_000)]


def _doubling() -> tuple[dict[str, Any], Any]:
    levels = 8
    defs: dict[str, Any] = {
        f"d{i}": {"allOf": [{"$ref": f"#/$defs/d{i + 1}"}, {"$ref": f"#/$defs/d{i + 1}"}]}
        for i in range(levels)
    }
    defs[f"d{levels}"] = {"type": "integer"}
    return {"type": "array", "items": {"$ref": "#/$defs/d0"}, "$defs": defs}, list(range(130_000))


def _tree() -> tuple[dict[str, Any], Any]:
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#"}}},
        "required": ["name"],
    }

    def grow(depth: int) -> Any:
        return {"name": f"n{depth}", "children": [grow(depth - 1) for _ in range(3)] if depth else []}

    return schema, grow(9)


CASES: dict[str, Callable[[], tuple[dict[str, Any], Any]]] = {
    "records (accepted)": _records,
    "uniqueItems, mixed items": _unique,
    "anyOf of 20 branches": _union,
    "doubling $defs, 8 levels": _doubling,
    "recursive tree": _tree,
}


def _checker(schema: dict[str, Any], answer: Any) -> tuple[Callable[[], tuple[str, ...]], int]:
    from runner.agentfile.output_schema import OutputSchema, schema_problems
    from runner.agentfile.schema_budget import CheckBudget
    from runner.models.base import Reply
    from runner.modes.structured import OutputPlan

    assert schema_problems(schema) == [], schema_problems(schema)
    plan = OutputPlan(OutputSchema(schema), "response_format")
    reply = Reply(content=json.dumps(answer))

    def check() -> tuple[str, ...]:
        with CheckBudget().active():
            verdict = plan.read(reply)
        assert verdict is not None
        return verdict.problems

    return check, len(reply.content or "")


def _floor(schema: dict[str, Any], answer: Any) -> Callable[[], tuple[str, ...]]:
    import jsonschema

    validator = jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )
    return lambda: tuple(e.message for e in validator.iter_errors(answer))


def measure(runs: int) -> tuple[dict[str, list[float]], dict[str, str]]:
    schema, answer = _records()
    contenders: dict[str, Callable[[], tuple[str, ...]]] = {FLOOR: _floor(schema, answer)}
    sizes: dict[str, int] = {}
    for name, make in CASES.items():
        contenders[name], sizes[name] = _checker(*make())
    outcomes: dict[str, str] = {}
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(runs):
        for name, check in contenders.items():
            start = time.perf_counter()
            problems = check()
            samples[name].append(time.perf_counter() - start)
            size = f"{sizes[name] / 1e6:.2f} MB" if name in sizes else ""
            outcomes[name] = f"{size}: " + (f"refused: {problems[0][:70]}" if problems else "accepted")
    return samples, outcomes


def main(argv: list[str] | None = None) -> int:
    from runner.agentfile.schema_budget import CHECK_TIME_S

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    samples, outcomes = measure(args.runs)
    medians = {name: statistics.median(values) for name, values in samples.items()}
    ok = report(
        "checking a 1 MB answer (read and checked, as a turn does) vs jsonschema alone",
        medians,
        floor=FLOOR,
        target=TARGET,
        ratios=paired_ratios(samples, FLOOR),
        judged=["records (accepted)"],
    )
    bounded = all(max(values) <= CHECK_TIME_S + 1 for name, values in samples.items() if name != FLOOR)
    for name, outcome in outcomes.items():
        if name != FLOOR:
            print(f"  {name:<30} {outcome}")
    print(f"every check within CHECK_TIME_S ({CHECK_TIME_S:g} s): {'ok' if bounded else 'NO'}")
    return 0 if ok and bounded else 1


if __name__ == "__main__":
    raise SystemExit(main())
