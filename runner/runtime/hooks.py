"""Hook chains (SPEC section 6): ``python``, ``command`` and ``message`` hooks at nine events.

``HookChains`` belongs to a runtime (the chains of one agent file, python hooks imported once); each
run is told by a ``HookReporter`` (the session) how to render ``message`` hooks and where to report
trouble. A chain runs in order; each hook sees what earlier ones changed (arguments, output);
``stop`` or ``deny`` ends the chain. A hook that fails is reported and the loop goes on, unless the
hook is ``required``: its failure then stops (and at ``tool_pre`` denies) like a ``stop``, with
``ChainOutcome.failed`` set. What each field means at each event is ``HOOK_EVENT_RULES``.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from runner.agentfile.config import HOOK_EVENT_RULES, MESSAGE_EVENTS, AgentConfig, HookConfig
from runner.agentfile.imports import resolve_callable
from runner.errors import ConfigError
from runner.text import utf8
from runner.tools.bounded import Escaped, bounded
from runner.tools.capture import printing_to_stderr
from runner.tools.threads import run_in_thread

__all__ = [
    "ChainOutcome",
    "HookChains",
    "HookEvent",
    "HookFailed",
    "HookReporter",
    "HookResult",
    "ignored_fields",
]


@dataclass
class HookEvent:
    """What a hook is told: the event, where the loop is, and the history so far."""

    event: str
    agent: str
    session_id: str
    turn: int
    step: int
    messages: list[dict[str, Any]]
    message: dict[str, Any] | None = None
    tool_call: dict[str, Any] | None = None
    output: str | None = None
    is_error: bool | None = None

    def to_json(self) -> dict[str, Any]:
        """The JSON object a command hook reads on stdin (unset per-event fields left out)."""
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass
class HookResult:
    """What a hook may answer; every field is optional."""

    messages: list[Any] = field(default_factory=list)
    stop: bool = False
    reason: str | None = None
    deny: bool = False
    arguments: dict[str, Any] | None = None
    output: str | None = None

    @classmethod
    def coerce(cls, value: Any) -> HookResult:
        """A hook's return value as a ``HookResult``: None, a HookResult, a mapping or a string."""
        if value is None:
            return cls()
        if isinstance(value, HookResult):
            return value
        if isinstance(value, str):
            return cls(messages=[value] if value.strip() else [])
        if isinstance(value, dict):
            unknown = set(value) - set(cls.__dataclass_fields__)
            if unknown:
                raise ValueError(f"unknown HookResult field(s): {', '.join(sorted(unknown))}")
            data = dict(value)
            messages = data.pop("messages", None) or []
            if isinstance(messages, str | dict):
                messages = [messages]
            if data.get("arguments") is not None and not isinstance(data["arguments"], dict):
                raise ValueError("'arguments' must be an object")
            if data.get("output") is not None and not isinstance(data["output"], str):
                data["output"] = json.dumps(data["output"], ensure_ascii=False)
            return cls(messages=list(messages), **data)
        raise ValueError(
            f"a hook must return None, a HookResult, a dict or a string, not {type(value).__name__}"
        )


@dataclass
class ChainOutcome:
    """The combined result of one event's chain."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    stop: bool = False
    deny: bool = False
    reason: str | None = None
    arguments: dict[str, Any] | None = None
    output: str | None = None
    #: A required hook failed (its failure is the stop, or at ``tool_pre`` the denial).
    failed: bool = False


class HookFailed(Exception):
    """One hook could not run or answered something unusable."""


class HookReporter(Protocol):
    """The session's side of a chain run: rendering ``message`` hooks and hearing of trouble."""

    def render_message(self, hook: HookConfig, event: HookEvent) -> str:
        """The text of a ``message`` hook at ``event``."""
        ...

    def failed(self, hook: HookConfig, event: str, message: str) -> None:
        """A hook could not run or answered something unusable."""
        ...

    def ignored(self, hook: HookConfig, event: str, fields: tuple[str, ...]) -> None:
        """A hook set fields its event has no use for."""
        ...


def ignored_fields(event: str, result: HookResult) -> tuple[str, ...]:
    """The ``HookResult`` fields ``event`` has no use for (``HOOK_EVENT_RULES``) that a hook set."""
    rules = HOOK_EVENT_RULES[event]
    ignored: list[str] = []
    if result.messages and rules.messages is None:
        ignored.append("messages")
    if result.stop and rules.stop is None:
        ignored.append("stop")
    if result.deny and not rules.deny:
        ignored.append("deny")
    if result.arguments is not None and not rules.arguments:
        ignored.append("arguments")
    if result.output is not None and not rules.output:
        ignored.append("output")
    return tuple(ignored)


def _as_message(item: Any, role: str = "user") -> dict[str, Any]:
    if isinstance(item, dict) and "content" in item:
        return {"role": item.get("role", role), "content": str(item["content"])}
    return {"role": role, "content": str(item)}


class HookChains:
    """The hook chains of one agent (a runtime's); python hooks are imported on first use."""

    def __init__(self, config: AgentConfig) -> None:
        self.chains = config.hooks
        self._callables: dict[tuple[str, str], Callable[..., Any]] = {}

    def has(self, event: str) -> bool:
        """Whether any hook listens to ``event`` (so the loop can skip building the event)."""
        return bool(self.chains.get(event))

    async def run(self, event: HookEvent, reporter: HookReporter) -> ChainOutcome:
        """Run the chain of ``event.event``; never raises for a failing hook."""
        rules = HOOK_EVENT_RULES[event.event]
        outcome = ChainOutcome()
        for hook in self.chains.get(event.event, ()):
            try:
                result = await self._run_one(hook, event, reporter)
            except HookFailed as exc:
                reporter.failed(hook, event.event, str(exc))
                if hook.required:
                    outcome.failed = outcome.stop = True
                    outcome.deny = rules.deny
                    outcome.reason = f"a required hook failed: {exc}"
                    break
                continue
            ignored = ignored_fields(event.event, result)
            if ignored:
                reporter.ignored(hook, event.event, ignored)
            if rules.messages:
                role = hook.role if hook.kind == "message" else "user"
                outcome.messages.extend(_as_message(m, role) for m in result.messages)
            if result.arguments is not None and rules.arguments and event.tool_call is not None:
                outcome.arguments = result.arguments
                event.tool_call = {**event.tool_call, "arguments": result.arguments}
            if result.output is not None and rules.output:
                outcome.output = result.output
                event.output = result.output
            stop = result.stop and rules.stop is not None
            deny = rules.deny and (result.deny or stop)
            if stop or deny:
                outcome.stop, outcome.deny, outcome.reason = stop, deny, result.reason
                break
        return outcome

    async def _run_one(self, hook: HookConfig, event: HookEvent, reporter: HookReporter) -> HookResult:
        if hook.kind == "message":
            try:
                return HookResult(messages=[reporter.render_message(hook, event)])
            except ConfigError as exc:
                raise HookFailed(str(exc)) from None
        if hook.kind == "python":
            return await self._run_python(hook, event)
        return await self._run_command(hook, event)

    async def _run_python(self, hook: HookConfig, event: HookEvent) -> HookResult:
        key = (str(hook.base_dir), hook.value)
        fn = self._callables.get(key)
        if fn is None:
            try:
                found = resolve_callable(hook.value, hook.base_dir)
            except ConfigError as exc:
                raise HookFailed(exc.message) from None
            if not callable(found):
                raise HookFailed(f"{hook.value} is not callable")
            fn = self._callables[key] = found
        try:
            with printing_to_stderr():  # what a hook prints must not land in the answer
                is_async = inspect.iscoroutinefunction(fn)
                work = fn(event) if is_async else run_in_thread(fn, event)
                value = await bounded(work, hook.timeout_s, isolate=is_async)
            return HookResult.coerce(value)
        except TimeoutError:
            raise HookFailed(f"{hook.value} timed out after {hook.timeout_s:g} s") from None
        except Escaped as exc:
            raise HookFailed(f"{hook.value} raised {exc}") from None
        except Exception as exc:
            raise HookFailed(f"{hook.value} raised {type(exc).__name__}: {exc}") from None

    async def _run_command(self, hook: HookConfig, event: HookEvent) -> HookResult:
        payload = utf8(json.dumps(event.to_json(), ensure_ascii=False, default=str))
        out, err = bytearray(), bytearray()
        from runner.tools.procs import Child  # ctypes and the reaper: only for command hooks

        try:
            child = await Child.start(
                ["/bin/sh", "-c", hook.value],
                on_output=lambda fd, data: (out if fd == 1 else err).extend(data),
                cwd=hook.base_dir,
                env=None,
                stdin=asyncio.subprocess.PIPE,
            )
        except OSError as exc:
            raise HookFailed(f"cannot start `{hook.value}`: {exc}") from None
        try:
            child.send(payload)
            # The child ends with everything it started (the reaper), so no pipe outlives it.
            ended = await child.wait(hook.timeout_s)
        finally:
            await child.stop()
        if not ended:
            raise HookFailed(f"`{hook.value}` timed out after {hook.timeout_s:g} s")
        stdout = out.decode(errors="replace").strip()
        stderr = err.decode(errors="replace").strip()
        if child.returncode == 0:
            if stdout.startswith("{"):
                try:
                    data = json.loads(stdout)
                except json.JSONDecodeError:
                    data = None
                if isinstance(data, dict):
                    try:
                        return HookResult.coerce(data)
                    except (ValueError, TypeError) as exc:
                        raise HookFailed(f"`{hook.value}` printed an invalid HookResult: {exc}") from None
            # Plain text is a message only where messages go (SPEC 6); elsewhere it is just output.
            return HookResult(messages=[stdout] if stdout and event.event in MESSAGE_EVENTS else [])
        if child.returncode == 2:
            reason = stderr or f"`{hook.value}` exited with 2"
            if event.event == "tool_pre":
                return HookResult(deny=True, reason=reason)
            return HookResult(stop=True, reason=reason)
        tail = (stderr or stdout)[-300:]
        raise HookFailed(f"`{hook.value}` exited with {child.returncode}" + (f": {tail}" if tail else ""))
