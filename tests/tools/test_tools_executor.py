"""Execution: parallel calls in call order, every failure an error result, hooks, limits, cancellation."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import threading
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runner.tools.base import RunContext, Tool, ToolResult
from runner.tools.executor import (
    CallDecision,
    ParsedCall,
    execute_calls,
    execute_one,
    gather_in_order,
    interrupted_results,
)
from runner.tools.python import tool_from_function
from runner.tools.registry import ToolRegistry

_INT_ARG = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


async def _run(
    registry: ToolRegistry, ctx: RunContext, *calls: ParsedCall, **options: Any
) -> list[ToolResult]:
    settings: dict[str, Any] = {"max_parallel": 8, "default_timeout_s": 5.0, "output_chars": 1000}
    settings.update(options)
    return await execute_calls(list(calls), registry, ctx, **settings)


SPANS: list[tuple[float, float]] = []


def _sleepy_sync(n: int) -> int:
    start = time.perf_counter()
    time.sleep(0.2)
    SPANS.append((start, time.perf_counter()))
    return n


async def _sleepy_async(n: int) -> int:
    start = time.perf_counter()
    await asyncio.sleep(0.2)
    SPANS.append((start, time.perf_counter()))
    return n


async def test_four_sync_and_four_async_200ms_tools_run_concurrently(ctx: RunContext) -> None:
    registry = ToolRegistry.from_tools([tool_from_function(_sleepy_sync), tool_from_function(_sleepy_async)])
    calls = [
        ParsedCall(f"c{i}", "_sleepy_sync" if i % 2 else "_sleepy_async", f'{{"n": {i}}}') for i in range(8)
    ]
    SPANS.clear()
    results = await _run(registry, ctx, *calls)
    assert [r.content for r in results] == [str(i) for i in range(8)]
    assert not any(r.is_error for r in results)
    # all eight ran at once: every one started before any finished
    assert max(start for start, _ in SPANS) < min(end for _, end in SPANS)


async def test_results_come_back_in_call_order_not_finish_order(make_tool: Any, ctx: RunContext) -> None:
    async def slow_then_fast(arguments: dict[str, Any], _: RunContext) -> Any:
        await asyncio.sleep(arguments["n"] / 100)
        return arguments["n"]

    registry = ToolRegistry.from_tools([make_tool("t", slow_then_fast, parameters=_INT_ARG)])
    calls = [ParsedCall(f"c{n}", "t", f'{{"n": {n}}}') for n in (5, 3, 1, 0)]
    results = await _run(registry, ctx, *calls)
    assert [(r.call_id, r.content) for r in results] == [("c5", "5"), ("c3", "3"), ("c1", "1"), ("c0", "0")]


async def test_max_parallel_bounds_concurrency(make_tool: Any, ctx: RunContext) -> None:
    running = 0
    peak = 0

    async def counted(arguments: dict[str, Any], _: RunContext) -> Any:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.02)
        running -= 1
        return "ok"

    registry = ToolRegistry.from_tools([make_tool("t", counted)])
    await _run(registry, ctx, *[ParsedCall(f"c{i}", "t", "{}") for i in range(6)], max_parallel=2)
    assert peak == 2


async def test_unknown_tool_gets_an_error_listing_the_tools(make_tool: Any, ctx: RunContext) -> None:
    registry = ToolRegistry.from_tools([make_tool("read"), make_tool("write")])
    [result] = await _run(registry, ctx, ParsedCall("c1", "delete", "{}"))
    assert result.is_error
    assert "'delete'" in result.content
    assert "read, write" in result.content


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"n": 1', "not valid JSON"),
        ("{n: 1}", "not valid JSON"),
        ("[1, 2]", "got an array"),
        ('"text"', "got a string"),
        ("42", "got a number"),
    ],
)
async def test_bad_argument_text_gets_an_error_saying_what_is_wrong(
    make_tool: Any, ctx: RunContext, raw: str, expected: str
) -> None:
    registry = ToolRegistry.from_tools([make_tool("t", parameters=_INT_ARG)])
    [result] = await _run(registry, ctx, ParsedCall("c1", "t", raw))
    assert result.is_error
    assert expected in result.content
    assert "'t'" in result.content


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [('{"n": "five"}', "n: 'five' is not of type 'integer'"), ("{}", "'n' is a required property")],
)
async def test_schema_violations_name_the_argument_and_the_problem(
    make_tool: Any, ctx: RunContext, arguments: str, expected: str
) -> None:
    registry = ToolRegistry.from_tools([make_tool("t", parameters=_INT_ARG)])
    [result] = await _run(registry, ctx, ParsedCall("c1", "t", arguments))
    assert result.is_error
    assert expected in result.content
    assert "Parameters: n." in result.content


@pytest.mark.parametrize("raw", ["", "   ", None, "null"])
async def test_empty_arguments_mean_an_empty_object(make_tool: Any, ctx: RunContext, raw: str | None) -> None:
    registry = ToolRegistry.from_tools([make_tool("t")])
    [result] = await _run(registry, ctx, ParsedCall("c1", "t", raw))
    assert not result.is_error
    assert result.content == "{}"
    assert result.arguments == {}


async def test_a_tool_that_raises_becomes_an_error_result(ctx: RunContext) -> None:
    def broken(n: int) -> int:
        raise ValueError(f"cannot handle {n}")

    registry = ToolRegistry.from_tools([tool_from_function(broken)])
    [result] = await _run(registry, ctx, ParsedCall("c1", "broken", '{"n": 7}'))
    assert result.is_error
    assert result.content == "ValueError: cannot handle 7"
    assert result.arguments == {"n": 7}


async def test_a_tool_error_is_reported_with_its_message_only(ctx: RunContext) -> None:
    from runner.errors import ToolError

    def picky() -> None:
        raise ToolError("the file is locked")

    registry = ToolRegistry.from_tools([tool_from_function(picky)])
    [result] = await _run(registry, ctx, ParsedCall("c1", "picky", ""))
    assert (result.is_error, result.content) == (True, "the file is locked")


async def test_a_hanging_tool_times_out_and_the_batch_goes_on(make_tool: Any, ctx: RunContext) -> None:
    cancelled = asyncio.Event()

    async def hang(arguments: dict[str, Any], _: RunContext) -> Any:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    registry = ToolRegistry.from_tools([make_tool("hang", hang), make_tool("echo")])
    results = await _run(
        registry, ctx, ParsedCall("c1", "hang", "{}"), ParsedCall("c2", "echo", "{}"), default_timeout_s=0.1
    )
    assert results[0].is_error
    assert "timed out after 0.1 s" in results[0].content
    assert cancelled.is_set()
    assert not results[1].is_error


async def test_a_tool_timeout_overrides_the_default(make_tool: Any, ctx: RunContext) -> None:
    async def slow(arguments: dict[str, Any], _: RunContext) -> Any:
        await asyncio.sleep(30)  # far past the timeout, however loaded the machine: only it can end the call
        return "done"

    registry = ToolRegistry.from_tools([make_tool("slow", slow, timeout_s=0.05)])
    [result] = await _run(registry, ctx, ParsedCall("c1", "slow", "{}"), default_timeout_s=10)
    assert result.is_error
    assert "timed out after 0.05 s" in result.content


async def test_a_slow_sync_tool_times_out_too(ctx: RunContext) -> None:
    def stuck() -> str:
        time.sleep(0.3)
        return "late"

    registry = ToolRegistry.from_tools([tool_from_function(stuck)])
    [result] = await _run(registry, ctx, ParsedCall("c1", "stuck", "{}"), default_timeout_s=0.05)
    assert result.is_error
    assert "timed out" in result.content


async def test_a_timeout_error_raised_by_the_tool_itself_is_not_called_a_timeout(ctx: RunContext) -> None:
    def upstream() -> None:
        raise TimeoutError("upstream did not answer")

    registry = ToolRegistry.from_tools([tool_from_function(upstream)])
    [result] = await _run(registry, ctx, ParsedCall("c1", "upstream", "{}"))
    assert result.content == "TimeoutError: upstream did not answer"


async def test_huge_output_is_cut_with_a_note_saying_how_much(ctx: RunContext) -> None:
    def huge() -> str:
        return "x" * 5000

    registry = ToolRegistry.from_tools([tool_from_function(huge)])
    [result] = await _run(registry, ctx, ParsedCall("c1", "huge", "{}"), output_chars=1000)
    assert result.content.startswith("x" * 1000 + "\n")
    assert "4000 more characters" in result.content
    assert len(result.content) < 1200


async def test_a_non_json_serializable_result_is_an_error_naming_the_type(ctx: RunContext) -> None:
    def weird() -> Any:
        return {"lock": threading.Lock()}

    registry = ToolRegistry.from_tools([tool_from_function(weird)])
    [result] = await _run(registry, ctx, ParsedCall("c1", "weird", "{}"))
    assert result.is_error
    assert "lock" in result.content
    assert "not JSON-serializable" in result.content


@dataclasses.dataclass
class _Reading:
    at: datetime.date
    value: float


async def test_structured_results_are_sent_as_compact_json(ctx: RunContext) -> None:
    def reading() -> Any:
        return {"city": "Tromsø", "readings": [_Reading(datetime.date(2024, 1, 2), 1.5)], "ok": True}

    registry = ToolRegistry.from_tools([tool_from_function(reading)])
    [result] = await _run(registry, ctx, ParsedCall("c1", "reading", "{}"))
    assert result.content == '{"city":"Tromsø","readings":[{"at":"2024-01-02","value":1.5}],"ok":true}'


async def test_before_hook_can_deny_and_the_tool_does_not_run(make_tool: Any, ctx: RunContext) -> None:
    ran = False

    async def tool(arguments: dict[str, Any], _: RunContext) -> Any:
        nonlocal ran
        ran = True
        return "ran"

    async def deny(call: Any, tool: Tool, arguments: dict[str, Any]) -> CallDecision:
        return CallDecision.deny(f"{tool.name} is not allowed here")

    registry = ToolRegistry.from_tools([make_tool("t", tool)])
    [result] = await _run(registry, ctx, ParsedCall("c1", "t", "{}"), before=deny)
    assert (result.is_error, result.content) == (True, "t is not allowed here")
    assert not ran


async def test_before_hook_can_replace_arguments_which_are_validated_again(
    make_tool: Any, ctx: RunContext
) -> None:
    async def double(call: Any, tool: Tool, arguments: dict[str, Any]) -> CallDecision:
        return CallDecision.replace({"n": arguments["n"] * 2})

    async def to_text(call: Any, tool: Tool, arguments: dict[str, Any]) -> CallDecision:
        return CallDecision.replace({"n": "two"})

    registry = ToolRegistry.from_tools([make_tool("t", parameters=_INT_ARG)])
    [doubled] = await _run(registry, ctx, ParsedCall("c1", "t", '{"n": 2}'), before=double)
    [invalid] = await _run(registry, ctx, ParsedCall("c1", "t", '{"n": 2}'), before=to_text)
    assert doubled.content == '{"n":4}'
    assert doubled.arguments == {"n": 4}
    assert invalid.is_error and "not of type 'integer'" in invalid.content


async def test_after_hook_can_replace_the_output(make_tool: Any, ctx: RunContext) -> None:
    async def redact(call: Any, tool: Tool, result: ToolResult) -> str:
        return result.content.replace("secret", "[redacted]")

    registry = ToolRegistry.from_tools([make_tool("t")])
    [result] = await _run(registry, ctx, ParsedCall("c1", "t", '{"v": "secret"}'), after=redact)
    assert result.content == '{"v":"[redacted]"}'


async def test_eager_start_then_gather_gives_the_same_ordered_results(
    make_tool: Any, ctx: RunContext
) -> None:
    async def varied(arguments: dict[str, Any], _: RunContext) -> Any:
        await asyncio.sleep((3 - arguments["n"]) / 100)
        return arguments["n"]

    registry = ToolRegistry.from_tools([make_tool("t", varied, parameters=_INT_ARG)])
    calls = [ParsedCall(f"c{n}", "t", f'{{"n": {n}}}') for n in range(4)]
    semaphore = asyncio.Semaphore(8)
    tasks = []
    for call in calls:  # as if each call's arguments completed while the reply was still streaming
        tasks.append(
            asyncio.create_task(
                execute_one(call, registry, ctx, default_timeout_s=5, output_chars=100, semaphore=semaphore)
            )
        )
        await asyncio.sleep(0.005)
    eager = await gather_in_order(tasks)
    batch = await _run(registry, ctx, *calls)
    assert [(r.call_id, r.content) for r in eager] == [(r.call_id, r.content) for r in batch]


async def test_cancellation_propagates_and_cancels_running_tools(make_tool: Any, ctx: RunContext) -> None:
    started = asyncio.Event()
    cancelled = asyncio.Event()

    async def long(arguments: dict[str, Any], _: RunContext) -> Any:
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    registry = ToolRegistry.from_tools([make_tool("long", long)])
    batch = asyncio.create_task(_run(registry, ctx, ParsedCall("c1", "long", "{}")))
    await started.wait()
    batch.cancel()
    with pytest.raises(asyncio.CancelledError):
        await batch
    assert cancelled.is_set()


async def test_a_failing_hook_propagates_and_cancels_the_other_calls(make_tool: Any, ctx: RunContext) -> None:
    cancelled = asyncio.Event()

    async def long(arguments: dict[str, Any], _: RunContext) -> Any:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async def gate(call: Any, tool: Tool, arguments: dict[str, Any]) -> None:
        if call.id == "c2":
            await asyncio.sleep(0.01)
            raise KeyError("hook broke")

    registry = ToolRegistry.from_tools([make_tool("long", long)])
    with pytest.raises(KeyError):
        await _run(registry, ctx, ParsedCall("c1", "long", "{}"), ParsedCall("c2", "long", "{}"), before=gate)
    assert cancelled.is_set()


def test_interrupted_results_answer_every_call_in_order() -> None:
    calls = [ParsedCall("a", "t"), ParsedCall("b", "t"), ParsedCall("c", "t")]
    done = [ToolResult("b", "t", "finished")]
    results = interrupted_results(calls, done)
    assert [r.call_id for r in results] == ["a", "b", "c"]
    assert results[1].content == "finished"
    assert results[0].is_error and results[0].content == "Interrupted by the user."


async def test_duration_is_measured(make_tool: Any, ctx: RunContext) -> None:
    async def nap(arguments: dict[str, Any], _: RunContext) -> Any:
        await asyncio.sleep(0.05)
        return "ok"

    registry = ToolRegistry.from_tools([make_tool("nap", nap)])
    [result] = await _run(registry, ctx, ParsedCall("c1", "nap", "{}"))
    assert 0.04 < result.duration_s < 30  # the nap's 0.05 s, and no bound a loaded machine breaks


async def test_optional_arguments_sent_as_null_count_as_omitted(ctx: RunContext) -> None:
    def greet(name: str, title: str | None = None) -> str:
        return f"{title or 'Dear'} {name}"

    registry = ToolRegistry.from_tools([tool_from_function(greet)])
    [optional, required] = await _run(
        registry,
        ctx,
        ParsedCall("c1", "greet", '{"name": "Ada", "title": null}'),
        ParsedCall("c2", "greet", '{"name": null}'),
    )
    assert (optional.is_error, optional.content) == (False, "Dear Ada")
    assert optional.arguments == {"name": "Ada"}
    assert required.is_error
    assert "None is not of type 'string'" in required.content


_TYPES = ["string", "integer", "number", "boolean", "array", "object", "null"]
_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.floats(allow_nan=False, allow_infinity=False, width=16),
    st.text(max_size=3),
    st.lists(st.integers(0, 2), max_size=2),
    st.dictionaries(st.text(max_size=2), st.integers(0, 2), max_size=2),
)


@st.composite
def _flat_schemas(draw: Any) -> dict[str, Any]:
    names = draw(st.lists(st.sampled_from(["a", "b", "c", "d"]), unique=True, max_size=4))
    properties = {}
    for name in names:
        prop: dict[str, Any] = {"description": "x"} if draw(st.booleans()) else {}
        if draw(st.booleans()):
            prop["type"] = draw(st.sampled_from(_TYPES))
        properties[name] = prop
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    schema["required"] = draw(st.lists(st.sampled_from(names), unique=True)) if names else []
    if draw(st.booleans()):
        schema["additionalProperties"] = draw(st.booleans())
    return schema


@given(
    schema=_flat_schemas(),
    arguments=st.dictionaries(st.sampled_from(["a", "b", "c", "d", "e"]), _VALUES, max_size=5),
)
@settings(max_examples=400, deadline=None)
def test_the_quick_check_never_passes_what_the_full_validation_rejects(
    schema: dict[str, Any], arguments: dict[str, Any]
) -> None:
    from jsonschema import Draft202012Validator

    from runner.tools.executor import quick_check

    check = quick_check(schema)
    assert check is not None  # every flat schema gets one
    if check(arguments):
        assert Draft202012Validator(schema).is_valid(arguments), (schema, arguments)


def test_schemas_the_quick_check_does_not_cover_get_none() -> None:
    from runner.tools.executor import quick_check

    assert quick_check({"type": "object", "properties": {"a": {"type": "string", "enum": ["x"]}}}) is None
    assert quick_check({"type": "object", "properties": {"a": {"type": ["string", "null"]}}}) is None
    assert quick_check({"type": "object", "anyOf": [{}]}) is None
    assert quick_check({"type": "array"}) is None
