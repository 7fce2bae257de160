"""A session's side of its hook chains: the events it builds, message hooks, and reports of trouble."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from runner.agentfile.config import MESSAGE_EVENTS
from runner.loop.hooks import HookEvent, HookRunner

if TYPE_CHECKING:
    from runner.loop.session import Session

#: Where each HookResult field has an effect (SPEC 6).
_USED_AT: dict[str, tuple[str, ...]] = {
    "messages": MESSAGE_EVENTS,
    "deny": ("tool_pre",),
    "arguments": ("tool_pre",),
    "output": ("tool_post",),
}


class SessionHooks:
    """Builds ``HookEvent``s from the session's state and turns hook trouble into notes and records."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self._warned: set[tuple[str, str, str, tuple[str, ...]]] = set()

    def runner(self) -> HookRunner:
        """The hook chains of the session's current agent spec."""
        return HookRunner(
            self.session.spec,
            render_message=self._render_message,
            on_failure=self._failed,
            on_ignored=self._ignored,
        )

    def event(self, name: str, *, step: int = 0, **fields: Any) -> HookEvent:
        """The event a hook at ``name`` is told about, with the history so far."""
        session = self.session
        return HookEvent(
            event=name,
            agent=session.spec.name,
            session_id=session.session_id,
            turn=session.turn,
            step=step,
            messages=list(session.history),
            **fields,
        )

    def _render_message(self, hook: Any, event: HookEvent) -> str:
        from runner.agentfile.config import TemplateSource
        from runner.agentfile.templates import HOOK_EVENT_NAMES

        source = TemplateSource(text=hook.value, origin=self.session.spec.path)
        fields = {name: getattr(event, name, None) for name in HOOK_EVENT_NAMES}
        return self.session.renderer.render(source, self.session.current_input, fields)

    def _ignored(self, hook: Any, event: str, fields: tuple[str, ...]) -> None:
        """A hook set fields its event has no use for: say so once per hook, never drop it silently."""
        key = (event, hook.kind, hook.value, fields)
        if key in self._warned:
            return
        self._warned.add(key)
        self.session.record_event(
            "hook", hook_event=event, kind=hook.kind, value=hook.value, ignored=list(fields)
        )
        where = "; ".join(f"{name} only at {', '.join(_USED_AT[name])}" for name in fields)
        self.session.note(
            f"{event} hook {hook.value!r} returned {', '.join(fields)}, which {event} hooks cannot use, "
            f"so it was ignored ({where})",
            "warning",
        )

    def _failed(self, hook: Any, event: str, message: str) -> None:
        self.session.record_event(
            "hook", hook_event=event, kind=hook.kind, value=hook.value, error=message, required=hook.required
        )
        self.session.note(f"{event} hook failed: {message}", "error" if hook.required else "warning")
