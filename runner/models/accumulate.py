"""Merge streamed tool-call deltas into whole ``ToolCall``s, reporting each as soon as it is complete.

Providers stream a call as several deltas that share an ``index``: the id and the name arrive
once, the arguments in fragments. A call is complete when a later index begins (and its text so
far is empty or valid JSON), when its text ends with ``}`` and parses as a JSON object, or when the
stream ends. Calls are reported exactly once each, in index order.
"""

from __future__ import annotations

import json
import os
from bisect import bisect
from typing import Any

from runner.models.base import ToolCall, ToolCallReady

__all__ = ["ToolCallAccumulator", "new_call_id"]


def new_call_id() -> str:
    """A fresh tool-call id for providers that send none."""
    return "call_" + os.urandom(12).hex()


def _get(obj: Any, key: str) -> Any:
    if isinstance(obj, dict):
        return obj.get(key)
    return getattr(obj, key, None)


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


class _Partial:
    __slots__ = ("complete", "id", "index", "name", "parts")

    def __init__(self, index: int) -> None:
        self.index = index
        self.id = ""
        self.name = ""
        self.parts: list[str] = []
        self.complete = False

    def text(self) -> str:
        return "".join(self.parts)

    def closes_as_object(self) -> bool:
        try:
            return isinstance(json.loads(self.text()), dict)
        except ValueError:
            return False

    def to_call(self) -> ToolCall:
        arguments = self.text().strip()
        return ToolCall(id=self.id or new_call_id(), name=self.name, arguments=arguments or "{}")


class ToolCallAccumulator:
    """Collects streamed tool-call deltas (OpenAI dicts or litellm objects) by ``index``."""

    def __init__(self) -> None:
        self._partials: dict[int, _Partial] = {}
        self._order: list[int] = []
        self._emitted: list[ToolCall] = []
        self._last: _Partial | None = None

    @property
    def calls(self) -> tuple[ToolCall, ...]:
        """Every call reported so far, in index order."""
        return tuple(self._emitted)

    @property
    def has_calls(self) -> bool:
        """Whether any call has begun (complete or not)."""
        return bool(self._partials)

    @property
    def has_open_call(self) -> bool:
        """Whether a call has begun whose arguments are not complete yet (a cut stream ends inside it)."""
        return any(not partial.complete for partial in self._partials.values())

    def feed(self, delta: Any) -> list[ToolCall]:
        """Add one ``delta.tool_calls`` item; return the calls that became ready because of it."""
        function = _get(delta, "function")
        call_id = _get(delta, "id")
        name = _get(function, "name") if function is not None else None
        arguments = _get(function, "arguments") if function is not None else None
        partial = self._partial_for(_get(delta, "index"), call_id)
        if call_id and not partial.id:
            partial.id = call_id
        if name and name != partial.name:
            partial.name += name
        if arguments:
            if not isinstance(arguments, str):
                arguments = json.dumps(arguments)
            partial.parts.append(arguments)
            if not partial.complete and arguments.rstrip().endswith("}") and partial.closes_as_object():
                partial.complete = True
        return self._flush()

    def feed_events(self, delta: Any) -> list[ToolCallReady]:
        """``feed`` as stream events, each with its call's position in the reply."""
        return self._events(self.feed(delta))

    def finish_events(self) -> list[ToolCallReady]:
        """``finish`` as stream events, each with its call's position in the reply."""
        return self._events(self.finish())

    def _events(self, ready: list[ToolCall]) -> list[ToolCallReady]:
        first = len(self._emitted) - len(ready)
        return [ToolCallReady(first + offset, call) for offset, call in enumerate(ready)]

    def finish(self) -> list[ToolCall]:
        """The stream ended: return every call not reported yet, in index order."""
        for partial in self._partials.values():
            partial.complete = True
        return self._flush()

    def _partial_for(self, index: Any, call_id: Any) -> _Partial:
        if index is None:
            # Some servers omit the index: a new id starts a new call, anything else continues the last.
            last = self._last
            if last is not None and (not call_id or not last.id or call_id == last.id):
                return last
            index = self._order[-1] + 1 if self._order else 0
        partial = self._partials.get(index)
        if partial is None:
            for earlier in self._partials.values():
                if earlier.index < index and not earlier.complete:
                    text = earlier.text()
                    earlier.complete = not text.strip() or _is_json(text)
            partial = self._partials[index] = _Partial(index)
            # Never place a late, lower index before calls already reported: each is reported once.
            self._order.insert(max(bisect(self._order, index), len(self._emitted)), index)
        self._last = partial
        return partial

    def _flush(self) -> list[ToolCall]:
        ready: list[ToolCall] = []
        order = self._order
        while len(self._emitted) < len(order):
            partial = self._partials[order[len(self._emitted)]]
            if not partial.complete:
                break
            call = partial.to_call()
            self._emitted.append(call)
            ready.append(call)
        return ready
