"""The ``prompt`` mode's selector (SPEC section 8, Open WebUI's non-native function calling).

Before the steps of a turn, a selector request (``selector.model``, else the agent's model) gets the
tool specs as JSON, the last ``selector.history`` messages and the input, and answers
``{"tool_calls": [{"name", "parameters"}]}``. The calls run in parallel through the same checks as
any call (permissions, hooks, validation); their outputs go to the main model as one context
message, and the main model answers without tools. With ``selector.rounds > 1`` the selector runs
again with the new outputs until it picks nothing or the rounds are spent. Its usage counts.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from runner.loop.events import Note, UsageUpdate
from runner.models.base import Request
from runner.models.selector import context_message, extract_selection, selection_context, selector_query
from runner.tools.executor import gather_in_order, parse_arguments

if TYPE_CHECKING:
    from runner.loop.session import Session, TurnState


def _selector_system(session: Session, history: list[dict[str, Any]], text: str) -> str:
    """The selector's system prompt: the packaged template, or the agent's ``prompts.tool_selection``."""
    from runner.models.selector import render_selector_prompt

    specs = session._tools or []
    override = session.spec.prompts.tool_selection
    if override is None:
        return render_selector_prompt(specs, history, text)
    extra = selection_context(specs, history, text)
    return session.renderer.render(override, text, extra)


async def select_tools(session: Session, state: TurnState, text: str) -> None:
    """Run the selector rounds of one turn; append the context message when tools ran."""
    specs = session._tools or []
    by_name = {s["function"]["name"]: s["function"] for s in specs}
    selector = session.spec.selector
    model = session.selector_model or session.model
    executed: list[tuple[str, Any, str, bool]] = []
    notes: list[str] = []
    semaphore = asyncio.Semaphore(session.limits.max_parallel)
    for _ in range(selector.rounds):
        history = session.history[-selector.history :] if selector.history else []
        source_history = [*history, *_results_as_messages(executed)]
        messages = [
            {"role": "system", "content": _selector_system(session, source_history, text)},
            {"role": "user", "content": selector_query(source_history, text)},
        ]
        reply = await model.complete(Request(model=model.name, messages=messages, tools=None, params={}))
        session.budget.add(reply.usage)
        session.sink(UsageUpdate(reply.usage, session.budget.usage))
        selection = extract_selection(reply.content or "", by_name)
        round_notes = selection.notes()
        session.record_event(
            "selector",
            calls=[name for name, _ in selection.calls],
            unknown=selection.unknown,
            dropped=selection.dropped,
            problems=selection.problems,
        )
        for note in round_notes:
            session.sink(Note(f"selector: {note}", "warning"))
        notes.extend(round_notes)
        calls = selection.tool_calls()
        if not calls:
            break
        tasks = [asyncio.create_task(session.gate.execute(call, state, semaphore)) for call in calls]
        for call, result in zip(calls, await gather_in_order(tasks), strict=True):
            arguments, _ = parse_arguments(call.arguments)
            executed.append((result.name, arguments, result.content, result.is_error))
            session.sink_tool_finished(result)
        if state.stop is not None:
            break
    content = context_message(executed, notes)
    if content:
        session.append_context(content)


def _results_as_messages(executed: list[tuple[str, Any, str, bool]]) -> list[dict[str, Any]]:
    """Earlier rounds' outputs, as the next round's selector sees them."""
    if not executed:
        return []
    return [{"role": "user", "content": context_message(executed)}]
