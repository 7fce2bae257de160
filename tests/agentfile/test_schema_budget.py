"""What a schema and an answer's check may cost (``agentfile/schema_budget.py``, ``answer_check.py``).

The attack of issue 23: a 1.6 KB schema whose ``$defs`` double at each level through ``allOf``
(``d0 = allOf[$ref d1, $ref d1]``, ..., 20 levels) took a minute or more to check any answer
against. It is refused before use, with the path and the limit; answers are checked within a
budget of steps; ``uniqueItems`` is linear; an answer nested 1,000 levels is a problem, not a
``RecursionError``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from runner.agentfile import schema_budget
from runner.agentfile.answer_check import canonical
from runner.agentfile.output_schema import OutputSchema, schema_problems
from runner.agentfile.schema_budget import (
    MAX_ANSWER_DEPTH,
    MAX_EXPANDED_NODES,
    MAX_SCHEMA_DEPTH,
    MAX_SCHEMA_NODES,
    CheckBudget,
    answer_depth,
    schema_cost,
)
from runner.cli import main


def doubling(levels: int) -> dict[str, Any]:
    """The attack: each ``$defs`` entry is ``allOf`` of two references to the next."""
    defs: dict[str, Any] = {
        f"d{i}": {"allOf": [{"$ref": f"#/$defs/d{i + 1}"}, {"$ref": f"#/$defs/d{i + 1}"}]}
        for i in range(levels)
    }
    defs[f"d{levels}"] = {"type": "integer"}
    return {"$ref": "#/$defs/d0", "$defs": defs}


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


# ----------------------------------------------------------------- the schema's budget


def test_the_doubling_schema_is_refused_naming_the_limit_and_where() -> None:
    schema = doubling(20)
    assert len(json.dumps(schema)) < 1600
    ((where, message),) = schema_problems(schema)
    assert message.startswith("the schema is too complex: with its $refs expanded it holds more than 20,000")
    assert "(the limit is 20,000" in message
    assert where == ("$defs", "d8")  # where to look: the first subschema whose expansion is over the budget
    assert schema_cost(schema).expanded == MAX_EXPANDED_NODES + 1  # counted, capped: never built


def test_a_doubling_schema_within_the_budget_is_accepted() -> None:
    assert schema_problems(doubling(8)) == []
    cost = schema_cost(doubling(8))
    assert 2**8 < cost.expanded < MAX_EXPANDED_NODES


def test_a_recursive_schema_counts_its_reference_back_once() -> None:
    tree = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#"}}},
    }
    assert schema_problems(tree) == []
    assert schema_cost(tree).expanded < 20
    answer = {"name": "a", "children": [{"name": "b", "children": [{"name": "c", "children": []}]}]}
    assert OutputSchema(tree).problems(answer) == []
    assert OutputSchema(tree).problems({"children": [{"name": 1}]}) == [
        "at $.children[0].name: 1 is not of type 'string'"
    ]


def test_a_schema_of_too_many_values_is_refused() -> None:
    schema = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(MAX_SCHEMA_NODES)}}
    ((where, message),) = schema_problems(schema)
    assert where == () and f"more than {MAX_SCHEMA_NODES:,} values" in message


def test_a_schema_nested_past_the_depth_limit_is_refused() -> None:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(MAX_SCHEMA_DEPTH):
        schema = {"type": "array", "items": schema}
    ((where, message),) = schema_problems(schema)
    assert where == () and f"(the limit is {MAX_SCHEMA_DEPTH})" in message


def test_a_dynamic_ref_is_counted_and_checked_like_a_ref() -> None:
    schema = doubling(20)
    schema["$defs"]["d3"] = {"allOf": [{"$dynamicRef": "#/$defs/d4"}, {"$dynamicRef": "#/$defs/d4"}]}
    assert "too complex" in schema_problems(schema)[0][1]
    assert schema_problems({"$dynamicRef": "https://example.com/s"})[0][1].startswith(
        "$dynamicRef 'https://example.com/s' points outside the schema"
    )


def test_a_schema_below_the_root_may_not_switch_the_draft() -> None:
    """jsonschema would check that part with its own validator: unmetered, quadratic, Python's re."""
    schema = {
        "type": "object",
        "properties": {"w": {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "string"}},
    }
    message = "only the root of the schema may name a $schema (the draft of all of it)"
    assert schema_problems(schema) == [(("properties", "w", "$schema"), message)]


def test_output_over_the_budget_is_a_located_error_of_validate(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(main._state, "debug", False)
    schema = json.dumps(doubling(20))
    Path("a.yaml").write_text(f"version: 1\nname: a\nmodel: openai/gpt-4o-mini\noutput: {schema}\n")
    result = CliRunner().invoke(main.app, ["validate", "a.yaml"])
    assert result.exit_code == 2, result.output
    (line,) = result.output.splitlines()
    assert line.startswith("a.yaml:4:") and ": output.$defs." in line
    assert "the schema is too complex" in line and "the limit is 20,000" in line
    assert "Traceback" not in result.output


# ----------------------------------------------------------------- uniqueItems


def mixed(count: int) -> list[Any]:
    """``count`` distinct items of every JSON kind: jsonschema cannot sort them, so it compared pairs."""
    kinds = [
        lambda i: i,
        lambda i: str(i),
        lambda i: {"k": i, "v": [i, "x"]},
        lambda i: [i, {"n": i}],
        lambda i: i + 0.5,
    ]
    return [kinds[i % len(kinds)](i) for i in range(count)] + [None, True, False]


def test_8000_mixed_unique_items_pass() -> None:
    assert OutputSchema({"type": "array", "uniqueItems": True}).problems(mixed(8000)) == []


@pytest.mark.parametrize(
    ("duplicate", "of"),
    [
        ({"v": [7002, "x"], "k": 7002}, 7002),  # an object: key order does not matter
        ([7003, {"n": 7003}], 7003),
        (7000.0, 7000),  # 1 and 1.0 are the same number
        ("7001", 7001),
        (None, 8000),
        (True, 8001),
    ],
)
def test_a_duplicate_among_8000_mixed_items_is_caught(duplicate: Any, of: int) -> None:
    items = mixed(8000)
    (problem,) = OutputSchema({"type": "array", "uniqueItems": True}).problems([*items, duplicate])
    assert problem == f"at $: an array of 8,004 items has non-unique elements (item 8003 repeats item {of})"


@pytest.mark.parametrize(
    "items",
    [[1, True], [0, False], [[1, 2], [2, 1]], [{"a": 1}, {"a": True}], [1, "1"], [None, False], [[], {}]],
)
def test_values_json_deems_different_are_unique(items: list[Any]) -> None:
    assert OutputSchema({"uniqueItems": True}).problems(items) == []
    assert canonical(items[0]) != canonical(items[1])


def test_unique_items_false_and_non_arrays_are_not_checked() -> None:
    assert OutputSchema({"uniqueItems": False}).problems([1, 1]) == []
    assert OutputSchema({"uniqueItems": True}).problems({"a": 1}) == []


# ----------------------------------------------------------------- an answer's check


def test_an_answer_nested_1000_levels_is_a_problem_not_a_recursion_error() -> None:
    (problem,) = OutputSchema({"type": "array"}).problems(nested(1000))
    assert problem == f"the answer nests arrays and objects more than {MAX_ANSWER_DEPTH} levels deep"
    assert answer_depth(nested(MAX_ANSWER_DEPTH)) == MAX_ANSWER_DEPTH
    assert OutputSchema({"type": "array"}).problems(nested(MAX_ANSWER_DEPTH)) == []


def test_a_check_past_its_steps_is_refused_with_a_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(schema_budget, "MAX_CHECK_STEPS", 1000)
    schema = OutputSchema({"type": "array", "items": {"type": "object", "properties": {"a": {}}}})
    (problem,) = schema.problems([{"a": i} for i in range(2000)])
    assert problem == "the answer could not be checked within 1,000 steps (MAX_CHECK_STEPS)"
    assert schema.problems([{"a": 1}]) == []


def test_a_check_past_its_time_is_refused_with_a_message() -> None:
    schema = OutputSchema({"type": "array", "items": {"type": "integer"}})
    with CheckBudget(seconds=0.0).active():
        (problem,) = schema.problems(list(range(5000)))
    assert problem == "the answer could not be checked within 0 s"


def test_every_reference_of_a_subschema_counts_not_only_its_first() -> None:
    """``{$ref: leaf, $dynamicRef: next}``: jsonschema follows both, so the count does too."""
    levels = 20
    defs: dict[str, Any] = {
        f"d{i}": {"allOf": [{"$ref": "#/$defs/leaf", "$dynamicRef": f"#/$defs/d{i + 1}"}] * 2}
        for i in range(levels)
    }
    defs[f"d{levels}"] = defs["leaf"] = {"type": "integer"}
    assert "too complex" in schema_problems({"$ref": "#/$defs/d0", "$defs": defs})[0][1]
