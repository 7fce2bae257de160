"""Merging streamed tool-call deltas (SPEC section 7, "Execution")."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from runner.models.accumulate import ToolCallAccumulator
from runner.models.base import ToolCall


def delta(
    index: int | None, *, id: str | None = None, name: str | None = None, args: str | None = None
) -> Any:
    item: dict[str, Any] = {"function": {}}
    if index is not None:
        item["index"] = index
    if id is not None:
        item["id"] = id
    if name is not None:
        item["function"]["name"] = name
    if args is not None:
        item["function"]["arguments"] = args
    return item


def test_fragmented_arguments_are_joined_and_id_and_name_kept() -> None:
    acc = ToolCallAccumulator()
    assert acc.feed(delta(0, id="call_1", name="weather", args="")) == []
    assert acc.feed(delta(0, args='{"ci')) == []
    assert acc.feed(delta(0, args='ty": "Pa')) == []
    assert acc.feed(delta(0, args='ris"}')) == [ToolCall("call_1", "weather", '{"city": "Paris"}')]
    assert acc.finish() == []
    assert acc.calls == (ToolCall("call_1", "weather", '{"city": "Paris"}'),)


def test_call_is_ready_as_soon_as_its_arguments_close() -> None:
    acc = ToolCallAccumulator()
    acc.feed(delta(0, id="a", name="first"))
    ready = acc.feed(delta(0, args='{"n": 1}'))
    assert [call.id for call in ready] == ["a"]
    assert acc.feed(delta(1, id="b", name="second", args='{"n":')) == []
    assert [call.id for call in acc.finish()] == ["b"]


def test_brace_inside_a_string_or_nested_object_does_not_end_the_call_early() -> None:
    acc = ToolCallAccumulator()
    acc.feed(delta(0, id="a", name="f"))
    assert acc.feed(delta(0, args='{"text": "}')) == []
    assert acc.feed(delta(0, args='", "nested": {"b": 1}')) == []
    ready = acc.feed(delta(0, args="}"))
    assert json.loads(ready[0].arguments) == {"text": "}", "nested": {"b": 1}}


def test_call_is_ready_when_the_next_index_begins() -> None:
    acc = ToolCallAccumulator()
    acc.feed(delta(0, id="a", name="no_args"))
    ready = acc.feed(delta(1, id="b", name="other"))
    assert ready == [ToolCall("a", "no_args", "{}")]


def test_empty_arguments_mean_an_empty_object() -> None:
    acc = ToolCallAccumulator()
    acc.feed(delta(0, id="a", name="now"))
    assert acc.finish() == [ToolCall("a", "now", "{}")]


def test_missing_ids_are_generated_and_unique() -> None:
    acc = ToolCallAccumulator()
    acc.feed(delta(0, name="a", args="{}"))
    acc.feed(delta(1, name="b", args="{}"))
    calls = acc.calls + tuple(acc.finish())
    ids = [call.id for call in calls]
    assert all(i.startswith("call_") and len(i) > len("call_") for i in ids)
    assert len(set(ids)) == 2


def test_interleaved_indices_are_grouped_and_reported_in_index_order() -> None:
    acc = ToolCallAccumulator()
    reported: list[ToolCall] = []
    reported += acc.feed(delta(0, id="a", name="fa", args='{"x": '))
    reported += acc.feed(delta(1, id="b", name="fb", args='{"y": 2}'))
    assert reported == []  # b is complete, but a (index 0) is not: order is kept
    reported += acc.feed(delta(0, args="1}"))
    reported += acc.finish()
    assert [(c.id, json.loads(c.arguments)) for c in reported] == [("a", {"x": 1}), ("b", {"y": 2})]


def test_events_carry_each_call_position_even_when_two_become_ready_at_once() -> None:
    acc = ToolCallAccumulator()
    acc.feed_events(delta(0, id="a", name="fa", args='{"x": '))
    acc.feed_events(delta(1, id="b", name="fb", args="{}"))
    events = acc.feed_events(delta(0, args="1}"))
    assert [(event.index, event.call.id) for event in events] == [(0, "a"), (1, "b")]
    acc.feed_events(delta(2, id="c", name="fc"))
    assert [(event.index, event.call.id) for event in acc.finish_events()] == [(2, "c")]


def test_deltas_without_index_use_the_id_to_tell_calls_apart() -> None:
    acc = ToolCallAccumulator()
    acc.feed(delta(None, id="a", name="fa", args='{"x"'))
    acc.feed(delta(None, args=": 1}"))
    acc.feed(delta(None, id="b", name="fb", args="{}"))
    calls = acc.calls + tuple(acc.finish())
    assert [(c.id, c.name, c.arguments) for c in calls] == [("a", "fa", '{"x": 1}'), ("b", "fb", "{}")]


def test_repeated_name_and_id_chunks_are_not_doubled() -> None:
    acc = ToolCallAccumulator()
    acc.feed(delta(0, id="a", name="weather", args='{"c'))
    acc.feed(delta(0, id="a", name="weather", args='": 1}'))
    assert acc.calls == (ToolCall("a", "weather", '{"c": 1}'),)


def test_litellm_style_objects_are_accepted() -> None:
    acc = ToolCallAccumulator()
    first = SimpleNamespace(index=0, id="a", function=SimpleNamespace(name="f", arguments='{"k":'))
    rest = SimpleNamespace(index=0, id=None, function=SimpleNamespace(name=None, arguments=' "v"}'))
    acc.feed(first)
    assert acc.feed(rest) == [ToolCall("a", "f", '{"k": "v"}')]


def test_non_object_arguments_are_reported_at_the_end_for_the_tool_layer_to_reject() -> None:
    acc = ToolCallAccumulator()
    assert acc.feed(delta(0, id="a", name="f", args="[1, 2]")) == []
    assert acc.finish() == [ToolCall("a", "f", "[1, 2]")]


calls_strategy = st.lists(
    st.tuples(
        st.from_regex(r"[a-z_]{1,12}", fullmatch=True),
        st.dictionaries(st.text(max_size=5), st.one_of(st.integers(), st.text(max_size=8)), max_size=3),
    ),
    min_size=1,
    max_size=4,
)


@settings(max_examples=60, deadline=None)
@given(calls=calls_strategy, cuts=st.lists(st.integers(min_value=1, max_value=7), min_size=1, max_size=20))
def test_any_fragmentation_gives_each_call_exactly_once_in_order(
    calls: list[tuple[str, dict[str, Any]]], cuts: list[int]
) -> None:
    acc = ToolCallAccumulator()
    reported: list[ToolCall] = []
    for index, (name, arguments) in enumerate(calls):
        reported += acc.feed(delta(index, id=f"id{index}", name=name))
        text, step = json.dumps(arguments), 0
        while text:
            size = cuts[step % len(cuts)]
            reported += acc.feed(delta(index, args=text[:size]))
            text, step = text[size:], step + 1
    reported += acc.finish()
    assert [(c.id, c.name, json.loads(c.arguments)) for c in reported] == [
        (f"id{i}", name, arguments) for i, (name, arguments) in enumerate(calls)
    ]
    assert acc.calls == tuple(reported)
