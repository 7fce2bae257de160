"""The gate every tool call passes (SPEC sections 6, 7 and 9): the call budget, the repeat guard,
permissions and confirmation, ``tool_pre`` / ``tool_post`` hooks, then the executor.

The gate works through a narrow interface (``GateParts``): the budget, the repeat guard, the
permissions, the confirmation, a hook caller and an event sink; never the session. Each call gives
a ``GateResult``: its one result, and the ``EndTurn`` it asks for, if any (a limit, a repeat, a
declined call, a hook's stop). The calls of one step share a ``StepCalls`` (the semaphore of
``max_parallel``, the results so far, and whether the user declined one).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import runner.telemetry as telemetry
from runner.agentfile.config import LimitsConfig
from runner.errors import LimitReached
from runner.models.base import ToolCall
from runner.runtime.hooks import ChainOutcome
from runner.session.conversation import NOTE_PREFIX
from runner.session.decisions import EndTurn
from runner.session.events import EventSink, ToolStarted
from runner.session.limits import Budget, RepeatGuard
from runner.telemetry import decisions
from runner.text import counted
from runner.tools.base import RunContext, Tool, ToolResult
from runner.tools.executor import CallDecision, execute_one
from runner.tools.permissions import Permissions
from runner.tools.registry import ToolRegistry

__all__ = [
    "ConfirmAnswer",
    "ConfirmFn",
    "Confirmation",
    "GateParts",
    "GateResult",
    "StepCalls",
    "ToolGate",
    "confirming_call",
]

ConfirmAnswer = Literal["yes", "no", "always"]
ConfirmFn = Callable[[Tool, dict[str, Any]], Awaitable[ConfirmAnswer]]

_confirming: contextvars.ContextVar[ToolCall | None] = contextvars.ContextVar(
    "runner_confirming", default=None
)


def confirming_call() -> ToolCall | None:
    """The call a ``ConfirmFn`` is asked about, while it is asked (a door that shows the user the
    call by its id, as ACP's ``session/request_permission`` does, reads it)."""
    return _confirming.get()


class HookCaller(Protocol):
    """Runs one event's hook chain with the session's state (``SessionHooks``)."""

    def has(self, event: str) -> bool:
        """Whether any hook listens to ``event``."""
        ...

    async def run(self, event: str, *, step: int = 0, **fields: Any) -> ChainOutcome:
        """The outcome of ``event``'s chain."""
        ...


class Confirmation:
    """Who allows the calls that need confirmation, for one session: ``--yes``, the user, "always"."""

    def __init__(self, *, assume_yes: bool = False, ask: ConfirmFn | None = None) -> None:
        self.assume_yes = assume_yes
        self.ask = ask
        self.always: set[str] = set()
        #: The tools refused because nobody could be asked (no ``--yes``, not interactive), in order.
        self.refused: list[str] = []
        self._asking = asyncio.Lock()

    async def check(self, tool: Tool, arguments: dict[str, Any], step: StepCalls) -> CallDecision | None:
        """None to run the call, or a denial the model reads (a "no" also ends the turn)."""
        if self.assume_yes or tool.name in self.always:
            return None
        if self.ask is None:
            self.refused.append(tool.name)
            return CallDecision.deny(
                f"Refused: {tool.name} needs the user's confirmation and this run is not interactive "
                "(run with --yes to allow it)."
            )
        # One question at a time (calls of a message run concurrently); a "no" ends the turn, so
        # the calls still waiting are not asked, and an "always" answers them.
        async with self._asking:
            if step.declined is not None:
                return CallDecision.deny(f"Not executed: {step.declined.note}.")
            if tool.name in self.always:
                return None
            answer = await self.ask(tool, arguments)
            if answer == "always":
                self.always.add(tool.name)
                return None
            if answer == "yes":
                return None
            step.declined = EndTurn("declined", f"the user declined {tool.name}")
            return CallDecision.deny("The user declined this tool call.")


@dataclass
class StepCalls:
    """What the calls of one step share."""

    number: int
    semaphore: asyncio.Semaphore
    finished: dict[str, ToolResult] = field(default_factory=dict)
    #: Calls started while the reply was still streaming (eager start), in the order they started.
    started: list[ToolCall] = field(default_factory=list)
    declined: EndTurn | None = None


@dataclass(frozen=True)
class GateResult:
    """A call's one result, and how it ends the turn (None: it does not)."""

    result: ToolResult
    end: EndTurn | None = None


@dataclass(frozen=True)
class GateParts:
    """Everything the gate uses; the session builds one per turn from its runtime and state."""

    registry: ToolRegistry
    context: RunContext
    limits: LimitsConfig
    budget: Budget
    repeat: RepeatGuard
    permissions: Permissions
    confirmation: Confirmation
    hooks: HookCaller
    sink: EventSink


class _Call:
    """One call's way through the gate: what it decided before running and after."""

    def __init__(self, parts: GateParts, call: ToolCall, step: StepCalls) -> None:
        self.parts = parts
        self.call = call
        self.step = step
        self.end: EndTurn | None = None
        self.warn_count: int | None = None

    async def before(self, _call: Any, tool: Tool, arguments: dict[str, Any]) -> CallDecision | None:
        parts = self.parts
        parts.budget.tool_calls += 1
        if parts.budget.tool_calls > parts.limits.max_tool_calls:
            note = f"the session reached limits.max_tool_calls ({parts.limits.max_tool_calls})"
            self.end = EndTurn.for_limit(LimitReached(note, limit="max_tool_calls"))
            return CallDecision.deny(f"Not executed: {note}.")
        verdict, count = parts.repeat.observe(tool.name, arguments, self.step.number)
        if verdict == "stop":
            steps = counted(count, "step")
            note = f"{tool.name} was called in {steps} with the same arguments (limits.max_repeat)"
            self.end = EndTurn.for_limit(LimitReached(note, limit="max_repeat"), "repeat")
            return CallDecision.deny(f"Not executed: {note}; the turn stops.")
        if verdict == "warn":
            self.warn_count = count
        decision = await self._permission(tool, arguments)
        if decision is not None:
            return decision
        if parts.hooks.has("tool_pre"):
            outcome = await parts.hooks.run(
                "tool_pre",
                step=self.step.number,
                tool_call={"id": self.call.id, "name": tool.name, "arguments": arguments},
            )
            if outcome.stop:
                self.end = EndTurn("hook", outcome.reason or "a tool_pre hook stopped the turn")
            if outcome.deny:
                return CallDecision.deny(f"Denied by a hook: {outcome.reason or 'no reason given'}")
            if outcome.arguments is not None and outcome.arguments != arguments:
                # The call that runs is the one the rules must judge: check the new arguments again.
                decision = await self._permission(tool, outcome.arguments)
                if decision is not None:
                    return decision
                parts.sink(ToolStarted(self.call.id, tool.name, outcome.arguments))
                return CallDecision.replace(outcome.arguments)
        parts.sink(ToolStarted(self.call.id, tool.name, arguments))
        return None

    async def _permission(self, tool: Tool, arguments: dict[str, Any]) -> CallDecision | None:
        permissions = self.parts.permissions
        match = permissions.check(tool.name, arguments, paths=tool.path_view) if permissions else None
        verdict = match.verdict if match is not None else None
        rule = match.pattern if match is not None else None
        if verdict == "deny":
            assert match is not None
            why = f" ({match.reason}; write it as plain commands)" if match.reason else ""
            decisions.permission(tool.name, "deny", rule=rule)
            return CallDecision.deny(f"Denied by the permissions rule '{match.pattern}'{why}.")
        if verdict == "allow" or not (verdict == "ask" or tool.confirm):
            if verdict == "allow":
                decisions.permission(tool.name, "allow", rule=rule)
            return None
        token = _confirming.set(self.call)
        try:
            decision = await self.parts.confirmation.check(tool, arguments, self.step)
        finally:
            _confirming.reset(token)
        decisions.permission(tool.name, "ask", rule=rule, answer="deny" if decision else "allow")
        return decision

    async def after(self, _call: Any, tool: Tool, result: ToolResult) -> ToolResult | str | None:
        content = result.content
        parts = self.parts
        if parts.hooks.has("tool_post"):
            outcome = await parts.hooks.run(
                "tool_post",
                step=self.step.number,
                tool_call={"id": self.call.id, "name": result.name, "arguments": result.arguments or {}},
                output=content,
                is_error=result.is_error,
            )
            if outcome.output is not None:
                content = outcome.output
            if outcome.stop:
                self.end = EndTurn("hook", outcome.reason or "a tool_post hook stopped the turn")
        if self.warn_count is not None:
            content += (
                f"\n\n{NOTE_PREFIX}You have called {result.name} {self.warn_count} times with the same "
                "arguments in this turn. Change course: use the results you have, or try something different."
            )
        return content if content != result.content else None


class ToolGate:
    """Runs calls with every check the session's configuration asks for."""

    def __init__(self, parts: GateParts) -> None:
        self.parts = parts

    async def run(self, call: ToolCall, step: StepCalls) -> GateResult:
        """Run one call through the gate; its result (never an exception but cancellation)."""
        passage = _Call(self.parts, call, step)
        agent = self.parts.context.agent
        with telemetry.tool(call.name, call_id=call.id, agent_name=agent, step=step.number) as scope:
            result = await execute_one(
                call,
                self.parts.registry,
                self.parts.context,
                default_timeout_s=self.parts.limits.tool_timeout_s,
                output_chars=self.parts.limits.tool_output_chars,
                before=passage.before,
                after=passage.after,
                semaphore=step.semaphore,
            )
            scope.tool_result(result, self.parts.registry.get(call.name))
        step.finished[call.id] = result
        return GateResult(result, passage.end or step.declined)
