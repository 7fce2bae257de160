"""Run the tool calls of one assistant message: parse, validate, gate, run with a timeout, report.

Every call yields exactly one ``ToolResult``; nothing a tool or a model does makes this module raise.
Unknown names, bad JSON, non-object or schema-violating arguments, a denial, an exception, a timeout
and a result that is not JSON-serializable each become an error result the model can act on.

The one exception is cancellation: ``asyncio.CancelledError`` (Ctrl+C, a client that went away)
propagates so the session stops promptly, as does any exception raised by the ``before`` / ``after``
hooks (they belong to the loop). The caller must then still answer every call in the history, e.g.
with ``interrupted_results`` (providers reject a history with an unanswered call).

A tool runs under ``bounded``: ``KeyboardInterrupt`` and ``SystemExit`` from it are error results, and a
call that outlives its timeout (or the caller's cancellation) by ``bounded.GRACE_S`` is abandoned,
whether it is a sync tool in its worker thread (threads cannot be killed) or an async tool that
swallows ``CancelledError``; its result is discarded.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import json
import time
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from runner.errors import ToolError
from runner.text import valid_record, valid_text
from runner.tools.base import RunContext, Tool, ToolResult
from runner.tools.bounded import Escaped, bounded
from runner.tools.capture import printing_to_stderr
from runner.tools.registry import ToolRegistry

__all__ = [
    "AfterHook",
    "BeforeHook",
    "CallDecision",
    "ParsedCall",
    "ToolCallLike",
    "execute_calls",
    "execute_one",
    "gather_in_order",
    "interrupted_results",
    "parse_arguments",
    "to_text",
]

R = TypeVar("R")

_MAX_LISTED_ERRORS = 5
_MAX_LISTED_TOOLS = 50


class ToolCallLike(Protocol):
    """What the executor needs from a tool call: an id, a tool name and the raw JSON arguments."""

    @property
    def id(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def arguments(self) -> str | Mapping[str, Any] | None: ...


@dataclass(frozen=True)
class ParsedCall:
    """A plain tool call (the loop may pass its own type instead; anything ``ToolCallLike`` works)."""

    id: str
    name: str
    arguments: str | Mapping[str, Any] | None = ""


@dataclass(frozen=True)
class CallDecision:
    """What a ``before`` hook decided: deny with a reason, or run with replaced arguments."""

    deny_reason: str | None = None
    arguments: dict[str, Any] | None = None

    @classmethod
    def deny(cls, reason: str) -> CallDecision:
        """Refuse the call; ``reason`` becomes the (error) result the model reads."""
        return cls(deny_reason=reason)

    @classmethod
    def replace(cls, arguments: dict[str, Any]) -> CallDecision:
        """Run the call with these arguments instead (they are validated again)."""
        return cls(arguments=arguments)


BeforeHook = Callable[[ToolCallLike, Tool, dict[str, Any]], Awaitable[CallDecision | None]]
"""Runs after validation, before the tool; returning None lets the call run unchanged."""
AfterHook = Callable[[ToolCallLike, Tool, ToolResult], Awaitable[ToolResult | str | None]]
"""Runs after the tool ran (also when it failed, not for refused calls); a string replaces the content."""

_validators: weakref.WeakKeyDictionary[Tool, Draft202012Validator | None] = weakref.WeakKeyDictionary()
_quick: weakref.WeakKeyDictionary[Tool, QuickCheck | None] = weakref.WeakKeyDictionary()


async def execute_calls(
    calls: Sequence[ToolCallLike],
    registry: ToolRegistry,
    ctx: RunContext,
    *,
    max_parallel: int,
    default_timeout_s: float,
    output_chars: int,
    before: BeforeHook | None = None,
    after: AfterHook | None = None,
) -> list[ToolResult]:
    """Run the calls of one message concurrently (at most ``max_parallel`` at once); results in call order."""
    semaphore = asyncio.Semaphore(max(1, max_parallel))
    tasks = [
        asyncio.create_task(
            execute_one(
                call,
                registry,
                ctx,
                default_timeout_s=default_timeout_s,
                output_chars=output_chars,
                before=before,
                after=after,
                semaphore=semaphore,
            )
        )
        for call in calls
    ]
    return await gather_in_order(tasks)


async def gather_in_order(tasks: Sequence[asyncio.Task[R]]) -> list[R]:
    """Await started calls; if one raises (or we are cancelled) cancel the rest and re-raise."""
    if not tasks:
        return []
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for task in tasks:
            if task in done and not task.cancelled():
                error = task.exception()
                if error is not None:
                    raise error
        return [task.result() for task in tasks]
    finally:
        pending = [task for task in tasks if not task.done()]
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending)


async def execute_one(
    call: ToolCallLike,
    registry: ToolRegistry,
    ctx: RunContext,
    *,
    default_timeout_s: float,
    output_chars: int,
    before: BeforeHook | None = None,
    after: AfterHook | None = None,
    semaphore: asyncio.Semaphore | None = None,
) -> ToolResult:
    """Run one call and return its result.

    For eager start, wrap each call in a task as soon as its arguments are complete, share one
    ``semaphore`` between the calls of a message, and collect them with ``gather_in_order``.
    """
    tool = registry.get(call.name)
    if tool is None:
        return _error(call, _unknown_tool_message(call.name, registry))
    arguments, problem = parse_arguments(call.arguments)
    if problem is not None:
        return _error(call, f"Invalid arguments for tool {tool.name!r}: {problem}")
    assert arguments is not None
    arguments = _drop_null_optionals(tool, arguments)
    problem = _schema_problems(tool, arguments)
    if problem is not None:
        return _error(call, f"Invalid arguments for tool {tool.name!r}: {problem}", arguments)
    if before is not None:
        decision = await before(call, tool, arguments)
        if decision is not None and decision.deny_reason is not None:
            return _error(call, decision.deny_reason, arguments)
        if decision is not None and decision.arguments is not None:
            arguments = decision.arguments
            problem = _schema_problems(tool, arguments)
            if problem is not None:
                return _error(call, f"Invalid arguments for tool {tool.name!r}: {problem}", arguments)
    if semaphore is None:
        result = await _run(call, tool, arguments, ctx, default_timeout_s)
    else:
        async with semaphore:
            result = await _run(call, tool, arguments, ctx, default_timeout_s)
    result = _limit_output(result, output_chars)
    if after is not None:
        replaced = await after(call, tool, result)
        if isinstance(replaced, str):
            result = dataclasses.replace(result, content=replaced)
        elif replaced is not None:
            result = replaced
    return result


def interrupted_results(
    calls: Sequence[ToolCallLike],
    done: Sequence[ToolResult] = (),
    *,
    reason: str = "Interrupted by the user.",
) -> list[ToolResult]:
    """One result per call, in call order: the finished ones kept, the others answered with ``reason``."""
    finished = {result.call_id: result for result in done}
    return [finished.get(call.id) or _error(call, reason) for call in calls]


def parse_arguments(raw: str | Mapping[str, Any] | None) -> tuple[dict[str, Any] | None, str | None]:
    """Raw tool-call arguments to a dict, or None and a message saying what is wrong with them."""
    if raw is None:
        return {}, None
    if isinstance(raw, Mapping):
        return dict(raw), None
    if not raw.strip():
        return {}, None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        excerpt = raw if len(raw) <= 200 else raw[:200] + "..."
        return None, (
            f"the arguments are not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}): "
            f"{excerpt!r}. Send one complete JSON object."
        )
    if value is None:
        return {}, None
    value = valid_record(value)  # "\ud800" in JSON is a lone surrogate: not text a tool can use
    if not isinstance(value, dict):
        return (
            None,
            f"expected a JSON object of named arguments, got {_json_kind(value)}: {raw.strip()[:200]}",
        )
    return value, None


def to_text(value: Any) -> str:
    """A tool's return value as text: strings unchanged, everything else compact JSON."""
    if isinstance(value, str):
        return valid_text(value)
    return valid_text(json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=_json_default))


def _json_default(value: Any) -> Any:
    """JSON forms of the structured values tools commonly return; anything else is refused."""
    if isinstance(value, enum.Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    dump = getattr(value, "model_dump", None)
    if callable(dump):  # pydantic models
        return dump(mode="json")
    isoformat = getattr(value, "isoformat", None)
    if callable(isoformat):  # datetime, date, time
        return isoformat()
    raise TypeError(f"a value of type {type(value).__qualname__} is not JSON-serializable")


async def _run(
    call: ToolCallLike, tool: Tool, arguments: dict[str, Any], ctx: RunContext, default_timeout_s: float
) -> ToolResult:
    timeout = tool.timeout_s if tool.timeout_s is not None else default_timeout_s
    started = time.perf_counter()
    limit = timeout if timeout and timeout > 0 else None
    try:
        value = await bounded(_call(tool, arguments, ctx), limit, isolate=tool.isolated)
    except TimeoutError:  # the deadline's (the tool's own TimeoutError is a ToolError by now)
        content = f"Tool {tool.name!r} timed out after {timeout:g} s and was abandoned."
        return _error(call, content, arguments, started)
    except Escaped as exc:
        return _error(call, f"Tool {tool.name!r} raised {exc}", arguments, started)
    except Exception as exc:
        return _error(call, _describe(exc), arguments, started)
    try:
        content = to_text(value)
    except (TypeError, ValueError) as exc:
        message = f"Tool {tool.name!r} returned a value that cannot be sent as JSON: {exc}"
        return _error(call, message, arguments, started)
    elapsed = time.perf_counter() - started
    return ToolResult(call.id, call.name, content, is_error=False, duration_s=elapsed, arguments=arguments)


async def _call(tool: Tool, arguments: dict[str, Any], ctx: RunContext) -> Any:
    try:
        with printing_to_stderr():
            return await tool.call(arguments, ctx)
    except TimeoutError as exc:  # the tool's own: not to be taken for the call's deadline
        raise ToolError(_describe(exc) if str(exc) else "TimeoutError") from None


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ToolError):
        return str(exc)
    message = str(exc)
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def _error(
    call: ToolCallLike, content: str, arguments: dict[str, Any] | None = None, started: float | None = None
) -> ToolResult:
    elapsed = time.perf_counter() - started if started is not None else 0.0
    return ToolResult(call.id, call.name, content, is_error=True, duration_s=elapsed, arguments=arguments)


def _limit_output(result: ToolResult, output_chars: int) -> ToolResult:
    if output_chars <= 0 or len(result.content) <= output_chars:
        return result
    cut = len(result.content) - output_chars
    note = f"\n[output cut: {cut} more characters not shown; the limit is {output_chars} characters]"
    return dataclasses.replace(result, content=result.content[:output_chars] + note)


def _unknown_tool_message(name: str, registry: ToolRegistry) -> str:
    names = registry.names()
    if not names:
        return f"Unknown tool {name!r}: no tools are available."
    listed = ", ".join(names[:_MAX_LISTED_TOOLS])
    more = f" and {len(names) - _MAX_LISTED_TOOLS} more" if len(names) > _MAX_LISTED_TOOLS else ""
    return f"Unknown tool {name!r}. Available tools: {listed}{more}."


def _validator(tool: Tool) -> Draft202012Validator | None:
    """The cached validator of a tool's schema; None when the schema itself is invalid."""
    if tool in _validators:
        return _validators[tool]
    validator: Draft202012Validator | None
    try:
        Draft202012Validator.check_schema(tool.parameters)
        validator = Draft202012Validator(tool.parameters)
    except SchemaError:
        validator = None
    _validators[tool] = validator
    return validator


def _drop_null_optionals(tool: Tool, arguments: dict[str, Any]) -> dict[str, Any]:
    """Treat an optional argument sent as ``null`` as omitted (schema hygiene removed the null type)."""
    if not any(value is None for value in arguments.values()):
        return arguments
    required = tool.parameters.get("required", ())
    return {key: value for key, value in arguments.items() if value is not None or key in required}


QuickCheck = Callable[[Mapping[str, Any]], bool]

#: JSON types by name, as Python values of parsed JSON (a bool is not an integer or a number).
_JSON_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
    "null": lambda v: v is None,
}
_PLAIN_OBJECT_KEYS = frozenset(
    {"type", "properties", "required", "additionalProperties", "title", "description"}
)
_PLAIN_PROPERTY_KEYS = frozenset({"type", "title", "description", "default", "examples"})


def quick_check(schema: Mapping[str, Any]) -> QuickCheck | None:
    """A fast test of arguments against a flat schema (typed properties, ``required``), or None.

    It answers True only when the full validation would find nothing; False means "validate
    fully" (which then explains what is wrong). Most tools' schemas are this simple, and the full
    validation costs more than the rest of the call's bookkeeping.
    """
    if schema.get("type") != "object" or not set(schema) <= _PLAIN_OBJECT_KEYS:
        return None
    properties = schema.get("properties", {})
    extra = schema.get("additionalProperties", True)
    required = schema.get("required", [])
    if not isinstance(properties, dict) or extra not in (True, False) or not isinstance(required, list):
        return None
    checks: dict[str, Callable[[Any], bool]] = {}
    for name, prop in properties.items():
        if not isinstance(prop, dict) or not set(prop) <= _PLAIN_PROPERTY_KEYS:
            return None
        kind = prop.get("type")
        if kind is None:
            checks[name] = lambda v: True
        elif isinstance(kind, str) and kind in _JSON_TYPES:
            checks[name] = _JSON_TYPES[kind]
        else:
            return None
    needed = tuple(required)

    def check(arguments: Mapping[str, Any]) -> bool:
        for name in needed:
            if name not in arguments:
                return False
        for name, value in arguments.items():
            test = checks.get(name)
            if test is None:
                if not extra:
                    return False
            elif not test(value):
                return False
        return True

    return check


def _quick_check(tool: Tool) -> QuickCheck | None:
    if tool in _quick:
        return _quick[tool]
    check = _quick[tool] = quick_check(tool.parameters) if _validator(tool) is not None else None
    return check


def _schema_problems(tool: Tool, arguments: dict[str, Any]) -> str | None:
    quick = _quick_check(tool)
    if quick is not None and quick(arguments):
        return None
    validator = _validator(tool)
    if validator is None:
        return None
    errors = sorted(validator.iter_errors(arguments), key=lambda e: ([str(p) for p in e.path], e.message))
    if not errors:
        return None
    lines = []
    for error in errors[:_MAX_LISTED_ERRORS]:
        where = ".".join(str(part) for part in error.path)
        lines.append(f"- {where}: {error.message}" if where else f"- {error.message}")
    if len(errors) > _MAX_LISTED_ERRORS:
        lines.append(f"- ... and {len(errors) - _MAX_LISTED_ERRORS} more")
    expected = ", ".join(tool.parameters.get("properties", {})) or "none"
    return "\n".join(
        ["the arguments do not match the tool's parameters:", *lines, f"Parameters: {expected}."]
    )


def _json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return type(value).__name__
