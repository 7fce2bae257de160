"""A session's side of its hook chains: the events it builds, where answers go, reports of trouble.

``SessionHooks.run`` runs one event's chain with the session's state; ``apply`` puts what a chain
returned where ``HOOK_EVENT_RULES`` says (the history, or the prompt queue) and gives back the stop,
if the event has one. Hooks that fail or set fields their event cannot use are reported once, as
notes and transcript events.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from runner.agentfile.config import HOOK_EVENT_RULES, HookConfig
from runner.runtime.hooks import ChainOutcome, HookEvent
from runner.session.view import SessionView
from runner.telemetry import decisions
from runner.text import one_line

__all__ = ["HookStop", "SessionHooks"]


@dataclass(frozen=True)
class HookStop:
    """A chain asked to stop: what it ends (``HOOK_EVENT_RULES[event].stop``) and why."""

    scope: str
    reason: str


def _where(field: str) -> str:
    events = [
        event
        for event, rules in HOOK_EVENT_RULES.items()
        if (field == "messages" and rules.messages)
        or (field == "stop" and rules.stop)
        or (field in ("deny", "arguments", "output") and getattr(rules, field))
    ]
    return f"{field} only at {', '.join(events)}"


class SessionHooks:
    """Builds ``HookEvent``s from a session's state and reports hook trouble to it."""

    def __init__(self, session: SessionView) -> None:
        self.session = session
        self._warned: set[tuple[str, str, str, tuple[str, ...]]] = set()

    def has(self, event: str) -> bool:
        """Whether any hook of the session's runtime listens to ``event``."""
        return self.session.runtime.hooks.has(event)

    def event(self, name: str, *, step: int = 0, **fields: Any) -> HookEvent:
        """The event a hook at ``name`` is told about, with the history so far."""
        session = self.session
        return HookEvent(
            event=name,
            agent=session.runtime.name,
            session_id=session.session_id,
            turn=session.conversation.turn,
            step=step,
            messages=list(session.conversation.history),
            **fields,
        )

    async def run(self, event: str, *, step: int = 0, **fields: Any) -> ChainOutcome:
        """Run ``event``'s chain (its answers not applied yet: see ``apply``)."""
        outcome = await self.session.runtime.hooks.run(self.event(event, step=step, **fields), self)
        decisions.hook_decision(event, outcome)
        return outcome

    def apply(self, event: str, outcome: ChainOutcome) -> HookStop | None:
        """Route the chain's messages by the table; the stop it asks for, if its event has one."""
        rules = HOOK_EVENT_RULES[event]
        conversation = self.session.conversation
        for message in outcome.messages:
            if rules.messages == "history":
                conversation.append(message)
            elif rules.messages == "queue":
                text = str(message["content"])
                if self.session.enqueue(text, origin=f"{event} hook"):
                    self.session.note(f"{event} hook queued: {one_line(text, 80)}")
        if outcome.stop and rules.stop is not None:
            return HookStop(rules.stop, outcome.reason or f"a {event} hook stopped the {rules.stop}")
        return None

    # ----------------------------------------------------------------- HookReporter

    def render_message(self, hook: HookConfig, event: HookEvent) -> str:
        """A ``message`` hook's text, rendered with the session's variables and the event's fields."""
        from runner.agentfile.config import TemplateSource
        from runner.agentfile.templates import HOOK_EVENT_NAMES

        source = TemplateSource(text=hook.value, origin=self.session.runtime.config.path)
        fields = {name: getattr(event, name, None) for name in HOOK_EVENT_NAMES}
        return self.session.render(source, fields)

    def ignored(self, hook: HookConfig, event: str, fields: tuple[str, ...]) -> None:
        """A hook set fields its event has no use for: say so once per hook, never drop it silently."""
        key = (event, hook.kind, hook.value, fields)
        if key in self._warned:
            return
        self._warned.add(key)
        self.session.record_event(
            "hook", hook_event=event, kind=hook.kind, value=hook.value, ignored=list(fields)
        )
        where = "; ".join(_where(name) for name in fields)
        self.session.note(
            f"{event} hook {hook.value!r} returned {', '.join(fields)}, which {event} hooks cannot use, "
            f"so it was ignored ({where})",
            "warning",
        )

    def failed(self, hook: HookConfig, event: str, message: str) -> None:
        """A hook could not run: reported, as an error when the hook is required."""
        self.session.record_event(
            "hook", hook_event=event, kind=hook.kind, value=hook.value, error=message, required=hook.required
        )
        self.session.note(f"{event} hook failed: {message}", "error" if hook.required else "warning")
