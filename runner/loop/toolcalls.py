"""The gate every tool call passes (SPEC sections 6, 7 and 9): budgets, the repeat guard,
permissions and confirmation, ``tool_pre`` / ``tool_post`` hooks, then the executor.

Decisions are recorded on the turn's state (a declined call, a repeat, a budget end the turn);
every call still gets exactly one result.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from runner.errors import LimitReached
from runner.loop.events import ToolStarted
from runner.models.base import ToolCall
from runner.tools.base import Tool, ToolResult
from runner.tools.executor import CallDecision, execute_one

if TYPE_CHECKING:
    from runner.loop.session import Session, TurnState

NOTE_PREFIX = "[runner] "


class ToolGate:
    """Runs a session's tool calls with every check the session's configuration asks for."""

    def __init__(self, session: Session) -> None:
        self.session = session

    async def execute(self, call: ToolCall, state: TurnState, semaphore: asyncio.Semaphore) -> ToolResult:
        """Run one call through the gate; its result (never an exception but cancellation)."""

        async def before(c: Any, tool: Tool, arguments: dict[str, Any]) -> CallDecision | None:
            return await self._before_tool(call, tool, arguments, state)

        async def after(c: Any, tool: Tool, result: ToolResult) -> ToolResult | str | None:
            return await self._after_tool(call, result, state)

        result = await execute_one(
            call,
            self.session.registry,
            self.session.tool_ctx,
            default_timeout_s=self.session.limits.tool_timeout_s,
            output_chars=self.session.limits.tool_output_chars,
            before=before,
            after=after,
            semaphore=semaphore,
        )
        state.finished[call.id] = result
        if result.is_error and call.id not in state.warned:
            self.session._errors.add(call.id)
        return result

    async def _before_tool(
        self, call: ToolCall, tool: Tool, arguments: dict[str, Any], state: TurnState
    ) -> CallDecision | None:
        self.session.budget.tool_calls += 1
        if self.session.budget.tool_calls > self.session.limits.max_tool_calls:
            note = f"the session reached limits.max_tool_calls ({self.session.limits.max_tool_calls})"
            state.stop, state.stop_note = "limit", note
            state.limit = LimitReached(note, limit="max_tool_calls")
            return CallDecision.deny(f"Not executed: {note}.")
        verdict, count = self.session._repeat.observe(tool.name, arguments)
        if verdict == "stop":
            note = f"{tool.name} was called {count} times with the same arguments (limits.max_repeat)"
            state.stop, state.stop_note = "repeat", note
            state.limit = LimitReached(note, limit="max_repeat")
            return CallDecision.deny(f"Not executed: {note}; the turn stops.")
        if verdict == "warn":
            state.warned[call.id] = count
        decision = await self._permission(tool, arguments, state)
        if decision is not None:
            return decision
        if self.session.hooks.has("tool_pre"):
            event = self.session.hook_glue.event(
                "tool_pre",
                step=state.steps,
                tool_call={"id": call.id, "name": tool.name, "arguments": arguments},
            )
            outcome = await self.session.hooks.run(event)
            if outcome.stop and not outcome.deny:
                state.stop, state.stop_note = "hook", outcome.reason or "a tool_pre hook stopped the turn"
            if outcome.deny:
                if outcome.stop or "required hook failed" in (outcome.reason or ""):
                    state.stop = state.stop or "hook"
                    state.stop_note = state.stop_note or outcome.reason
                return CallDecision.deny(f"Denied by a hook: {outcome.reason or 'no reason given'}")
            if outcome.arguments is not None and outcome.arguments != arguments:
                # The call that runs is the one the rules must judge: check the new arguments again.
                decision = await self._permission(tool, outcome.arguments, state)
                if decision is not None:
                    return decision
                self.session.sink(ToolStarted(call.id, tool.name, outcome.arguments))
                return CallDecision.replace(outcome.arguments)
        self.session.sink(ToolStarted(call.id, tool.name, arguments))
        return None

    async def _permission(
        self, tool: Tool, arguments: dict[str, Any], state: TurnState
    ) -> CallDecision | None:
        match = self.session.permissions.check(tool.name, arguments) if self.session.permissions else None
        verdict = match.verdict if match is not None else None
        if verdict == "deny":
            assert match is not None
            return CallDecision.deny(f"Denied by the permissions rule '{match.pattern}'.")
        if verdict == "allow" or not (verdict == "ask" or tool.confirm):
            return None
        if self.session.options.assume_yes or tool.name in self.session.always_allowed:
            return None
        if self.session.options.confirm is None:
            return CallDecision.deny(
                f"Refused: {tool.name} needs the user's confirmation and this run is not interactive "
                "(run with --yes to allow it)."
            )
        # One question at a time (calls of a message run concurrently); a "no" ends the turn, so
        # the calls still waiting are not asked, and an "always" answers them.
        async with self.session._confirming:
            if state.stop == "declined":
                return CallDecision.deny(f"Not executed: {state.stop_note}.")
            if tool.name in self.session.always_allowed:
                return None
            answer = await self.session.options.confirm(tool, arguments)
            if answer == "always":
                self.session.always_allowed.add(tool.name)
                return None
            if answer == "yes":
                return None
            state.stop, state.stop_note = "declined", f"the user declined {tool.name}"
            return CallDecision.deny("The user declined this tool call.")

    async def _after_tool(
        self, call: ToolCall, result: ToolResult, state: TurnState
    ) -> ToolResult | str | None:
        content = result.content
        if self.session.hooks.has("tool_post"):
            event = self.session.hook_glue.event(
                "tool_post",
                step=state.steps,
                tool_call={"id": call.id, "name": result.name, "arguments": result.arguments or {}},
                output=content,
                is_error=result.is_error,
            )
            outcome = await self.session.hooks.run(event)
            if outcome.output is not None:
                content = outcome.output
            if outcome.stop:
                state.stop, state.stop_note = "hook", outcome.reason or "a tool_post hook stopped the turn"
        count = state.warned.get(call.id)
        if count is not None:
            content += (
                f"\n\n{NOTE_PREFIX}You have called {result.name} {count} times with the same arguments in "
                "this turn. Change course: use the results you have, or try something different."
            )
        return content if content != result.content else None
