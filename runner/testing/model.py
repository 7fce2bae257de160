"""ScriptedModel: a Model that answers in process from a script and records every request."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

from runner.models.base import (
    Completed,
    ReasoningDelta,
    Reply,
    Request,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallReady,
    Usage,
)

__all__ = ["ScriptedModel", "Step", "pieces", "text", "tool_call", "tool_calls"]

Step = Reply | str | BaseException | Callable[[Request], "Reply | str"]

#: The id of a call made by ``tool_call``/``tool_calls``: the model that serves the reply numbers it.
UNSET_ID = ""


def text(content: str, *, reasoning: str | None = None, usage: Usage | None = None) -> Reply:
    """A scripted reply that only says ``content``."""
    return Reply(content=content, reasoning=reasoning, usage=usage or Usage(), finish_reason="stop")


def tool_call(name: str, /, **arguments: Any) -> Reply:
    """A scripted reply with one tool call: ``tool_call("weather", city="Paris")``."""
    return tool_calls((name, arguments))


def tool_calls(
    *calls: tuple[str, Mapping[str, Any]], content: str | None = None, usage: Usage | None = None
) -> Reply:
    """A scripted reply with several tool calls: ``tool_calls(("a", {...}), ("b", {...}))``.

    The calls get their ids from the ``ScriptedModel`` that serves the reply: ``call_1``, ``call_2``, ...
    in the order that model serves them, so the same script gives the same ids in every model.
    """
    return Reply(
        content=content,
        tool_calls=tuple(ToolCall(UNSET_ID, name, json.dumps(dict(args))) for name, args in calls),
        usage=usage or Usage(),
        finish_reason="tool_calls",
    )


def pieces(value: str, count: int) -> list[str]:
    """``value`` cut into about ``count`` pieces (how scripted replies stream)."""
    if not value:
        return []
    size = max(1, -(-len(value) // max(1, count)))
    return [value[i : i + size] for i in range(0, len(value), size)]


class ScriptedModel:
    """A ``Model`` that answers from a script of steps, in process, and records every request.

    A step is a ``Reply`` (see ``text``/``tool_call``/``tool_calls``), a plain string (a text reply),
    an exception instance (raised, e.g. ``ModelError("down", retryable=True)``), or a callable
    ``(Request) -> Reply | str`` for dynamic behaviour.

    Tool calls without an id (those of ``tool_call``/``tool_calls``) are numbered by this model, in the
    order it serves them: ``call_1``, ``call_2``, ..., skipping ids the request's messages already hold
    (a resumed conversation); a call built with an id keeps it.
    """

    supports_tools: bool | None = True

    def __init__(
        self,
        script: Iterable[Step],
        *,
        name: str = "scripted",
        chunk_delay_s: float = 0.0,
        structured_output: str = "response_format",
    ) -> None:
        self.name = name
        #: How an agent with ``output:`` asks this model for its answer: ``response_format`` (a
        #: provider that takes it with tools) or ``tool`` (one that cannot: a final-answer tool).
        self.structured_output = structured_output
        self.requests: list[Request] = []
        self.closed = False
        self._script = list(script)
        self._position = 0
        self._chunk_delay_s = chunk_delay_s
        self._ids = itertools.count(1)

    @property
    def remaining(self) -> int:
        """How many steps have not been requested yet."""
        return len(self._script) - self._position

    def assert_complete(self) -> None:
        """Fail if some scripted steps were never requested."""
        if self.remaining:
            raise AssertionError(
                f"ScriptedModel {self.name!r}: {self.remaining} of {len(self._script)} scripted step(s) "
                f"were never requested (the model was called {len(self.requests)} time(s))"
            )

    async def complete(self, request: Request) -> Reply:
        """Record the request and answer with the next step."""
        return self._next(request)

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        """Record the request and stream the next step: text in a few chunks, then each tool call."""
        reply = self._next(request)
        events: list[StreamEvent] = [ReasoningDelta(piece) for piece in pieces(reply.reasoning or "", 3)]
        events += [TextDelta(piece) for piece in pieces(reply.content or "", 3)]
        events += [ToolCallReady(index, call) for index, call in enumerate(reply.tool_calls)]
        for event in events:
            yield event
            if self._chunk_delay_s:
                await asyncio.sleep(self._chunk_delay_s)
        yield Completed(reply)

    async def aclose(self) -> None:
        """Mark the model closed (tests may check that the runner closes its models)."""
        self.closed = True

    def _next(self, request: Request) -> Reply:
        self.requests.append(request)
        if self._position >= len(self._script):
            last = request.messages[-1] if request.messages else None
            raise AssertionError(
                f"ScriptedModel {self.name!r}: unexpected model call #{len(self.requests)}; the script has "
                f"only {len(self._script)} step(s). Last message: {last!r}"
            )
        step = self._script[self._position]
        self._position += 1
        if isinstance(step, BaseException):
            raise step
        if callable(step):
            step = step(request)
        if isinstance(step, str):
            step = text(step)
        if not isinstance(step, Reply):
            raise TypeError(f"ScriptedModel step #{self._position} gave {type(step).__name__}, not a Reply")
        if any(call.id == UNSET_ID for call in step.tool_calls):
            step = replace(step, tool_calls=self._numbered(step.tool_calls, request))
        return step if step.model else replace(step, model=self.name)

    def _numbered(self, calls: tuple[ToolCall, ...], request: Request) -> tuple[ToolCall, ...]:
        """``calls`` with an id each: this model's next ``call_N`` not already in the conversation (a
        resumed one holds the ids another model gave), as a provider keeps ids unique in one."""
        taken = {str(m.get("tool_call_id")) for m in request.messages if m.get("role") == "tool"}
        taken |= {str(c.get("id")) for m in request.messages for c in m.get("tool_calls") or ()}
        numbered = []
        for call in calls:
            if call.id == UNSET_ID:
                call = replace(call, id=next(i for i in (f"call_{n}" for n in self._ids) if i not in taken))
            numbered.append(call)
        return tuple(numbered)
