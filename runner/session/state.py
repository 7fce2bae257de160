"""What a session holds and tells (``SessionState``): the read-only view of its fields, the prompt
queue, the notes, events and usage it reports, and its prompts (the system prompt, template
rendering, fitting the context). ``Session`` (``session.py``) builds the fields and adds the
lifecycle (open, run, close) and the controls; the parts of a session see this
state through ``view.SessionView``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import runner.telemetry as telemetry
from runner.agentfile.config import AgentConfig, LimitsConfig, TemplateSource
from runner.models.base import Model, Usage
from runner.modes.structured import OutputPlan
from runner.runtime.host import RuntimeHost
from runner.runtime.prompts import compose_system
from runner.runtime.runtime import AgentRuntime
from runner.session.conversation import Conversation
from runner.session.events import EventSink, Note, UsageUpdate
from runner.session.gate import Confirmation
from runner.session.hookglue import SessionHooks
from runner.session.limits import Budget
from runner.session.options import RunOptions, lowered_limits
from runner.text import counted
from runner.tools.base import RunContext

__all__ = ["SessionState"]


class SessionState:
    """The fields of one session, read-only from outside (only ``sink`` and ``current_input`` are
    assigned by the doors), with the queue and the reporting every part of the session uses."""

    sink: EventSink
    current_input: str
    _runtime: AgentRuntime
    _host: RuntimeHost | None
    _options: RunOptions
    _session_id: str
    _variables: dict[str, Any]
    _limits: LimitsConfig
    _budget: Budget
    _confirmation: Confirmation
    _hooks: SessionHooks
    _model: Model | None
    _calls: list[str]
    _ended: str | None
    _dropped: int
    _conversation: Conversation
    _output_plan: OutputPlan | None
    _tool_context: RunContext
    _stream: bool
    _request_params: dict[str, Any]
    _client_tools: list[dict[str, Any]]
    _client_names: frozenset[str]
    _next_turn_events: list[tuple[str, dict[str, Any]]]

    # ----------------------------------------------------------------- read-only state

    @property
    def runtime(self) -> AgentRuntime:
        """The runtime the session runs on (a reload or a mode switch moves it to another)."""
        return self._runtime

    @property
    def host(self) -> RuntimeHost | None:
        """The host the session follows through reloads (None: it keeps its runtime)."""
        return self._host

    @property
    def options(self) -> RunOptions:
        """How the session was opened: variables, limits, confirmations, client tools."""
        return self._options

    @property
    def session_id(self) -> str:
        """The session's id (its transcript's name)."""
        return self._session_id

    @property
    def variables(self) -> dict[str, Any]:
        """The template variables (the agent's, then the options'; ``set_variables`` changes them)."""
        return self._variables

    @property
    def limits(self) -> LimitsConfig:
        """The agent's limits, lowered by the options and ``lower_limits``."""
        return self._limits

    @property
    def budget(self) -> Budget:
        """What the session has spent of its limits."""
        return self._budget

    @property
    def confirmation(self) -> Confirmation:
        """Who answers ``ask`` tools, and what was refused."""
        return self._confirmation

    @property
    def hooks(self) -> SessionHooks:
        """The session's hook chains."""
        return self._hooks

    @property
    def calls(self) -> list[str]:
        """The tools the model called, in order (each run's share is its ``RunResult.tools``)."""
        return self._calls

    @property
    def ended(self) -> str | None:
        """Why a ``session_start`` hook ended the session; no turn runs after that."""
        return self._ended

    @property
    def conversation(self) -> Conversation:
        """The history, system prompt, prompt queue, turn counter and transcript."""
        return self._conversation

    @property
    def output_plan(self) -> OutputPlan | None:
        """How the session asks for a structured answer (None: no ``output:``)."""
        return self._output_plan

    @property
    def tool_context(self) -> RunContext:
        """What a tool sees of the session."""
        return self._tool_context

    @property
    def stream(self) -> bool:
        """Whether model calls stream."""
        return self._stream

    @property
    def request_params(self) -> dict[str, Any]:
        """The model parameters every request carries."""
        return self._request_params

    @property
    def client_tools(self) -> list[dict[str, Any]]:
        """The caller's tools (a served client's), after the agent's own."""
        return self._client_tools

    @property
    def client_names(self) -> frozenset[str]:
        """The names of the caller's tools."""
        return self._client_names

    @property
    def model(self) -> Model:
        """The model this session talks to."""
        return self._model if self._model is not None else self.runtime.model

    @property
    def config(self) -> AgentConfig:
        """The agent's configuration of the moment."""
        return self.runtime.config

    @property
    def history(self) -> list[dict[str, Any]]:
        """The conversation so far (without the system prompt)."""
        return self.conversation.history

    @property
    def queue(self) -> Any:
        """The prompt queue."""
        return self.conversation.queue

    @property
    def usage(self) -> Usage:
        """Tokens and cost so far (sub-agents and selectors included)."""
        return self.budget.usage

    # ----------------------------------------------------------------- the queue

    def enqueue(self, text: str, *, origin: str = "user") -> bool:
        """Add an input to the prompt queue, within ``max_queue`` and ``max_turns``; False if dropped."""
        conversation, limits = self.conversation, self.limits
        if len(conversation.queue) >= limits.max_queue:
            self._dropped_one(
                origin, "max_queue", f"the queue is full (limits.max_queue = {limits.max_queue})"
            )
            return False
        if origin != "user" and conversation.turn + len(conversation.queue) >= limits.max_turns:
            self._dropped_one(origin, "max_turns", f"it would exceed limits.max_turns ({limits.max_turns})")
            return False
        conversation.queue.append(text)
        return True

    def _dropped_one(self, origin: str, reason: str, why: str) -> None:
        self.note(f"dropped a queued message from {origin}: {why}", "warning")
        self.record_event("queue_drop", origin=origin, reason=reason)
        self._dropped += 1

    def _drop_queue(self, reason: str, why: str) -> None:
        dropped = self.conversation.drop_queue()
        if not dropped:
            return
        self.note(f"dropped {counted(len(dropped), 'queued message')}: {why}", "warning")
        self.record_event("queue_drop", origin="queue", reason=reason, count=len(dropped))
        if reason in ("max_turns", "max_queue"):
            self._dropped += len(dropped)

    def clear_queue(self) -> int:
        """Ctrl+C at the prompt: drop what is queued (recorded); how many messages."""
        dropped = self.conversation.drop_queue()
        if dropped:
            self.record_event("queue_drop", origin="queue", reason="user", count=len(dropped))
        return len(dropped)

    # ----------------------------------------------------------------- reporting

    def lower_limits(self, lower: Mapping[str, Any]) -> None:
        """Lower this session's limits now (a budget it shares with others was spent meanwhile);
        the next step's check applies them."""
        self._limits = self.budget.limits = lowered_limits(self.limits, lower)

    def count_usage(self, usage: Usage) -> None:
        """Add a model call's usage (the session's, a selector's, a sub-agent's) and report it."""
        unpriced = self.budget.add(usage)
        self.sink(UsageUpdate(usage, self.budget.usage))
        if unpriced:
            self.note(unpriced, "warning")

    def note(self, text: str, level: Literal["info", "warning", "error"] = "info") -> None:
        """Tell the user something."""
        self.sink(Note(text, level))

    def _model_notice(self, text: str) -> None:
        """What the model layer says while this session waits on it (a retry, its wait)."""
        self.sink(Note(text, "warning", source="model"))

    def record_event(self, name: str, **data: Any) -> None:
        """Write an event record to the transcript (the ones a trace shows, on the current span too)."""
        self.conversation.event(name, **data)
        if name in _TRACED and telemetry.active():
            telemetry.count(f"runner.{name}", _attributes(data))

    def record_for_next_turn(self, name: str, **data: Any) -> None:
        """Write an event of what applies from the next turn on (a reload) to the transcript now;
        a trace shows it on the span of the run that next starts a turn (between runs, no span is
        current to hold it)."""
        self.conversation.event(name, **data)
        if telemetry.active():
            self._next_turn_events.append((f"runner.{name}", _attributes(data)))

    def _count_next_turn_events(self) -> None:
        """The events kept for this turn (``record_for_next_turn``), on the current span now."""
        while self._next_turn_events:
            telemetry.count(*self._next_turn_events.pop(0))

    def _span_fields(self) -> dict[str, Any]:
        """What the ``invoke_agent`` span says of a run: agent, conversation, model, file, revision."""
        runtime = self.runtime
        where = runtime.provenance.revision or runtime.provenance.git or {}
        return {
            "name": runtime.name,
            "conversation_id": self.session_id,
            "model": self.model.name,
            "path": str(runtime.config.path),
            "revision": where.get("commit") or runtime.provenance.config_sha256[:16] or None,
            "secrets": runtime.config.secrets,
        }

    # ----------------------------------------------------------------- prompts and context

    def ensure_system_prompt(self, first_input: str) -> None:
        """Compose the system prompt the first time a turn needs it."""
        if self.conversation.system is None:
            if self.conversation.first_input is None:
                self.conversation.first_input = first_input
            self._compose_system()

    def _compose_system(self) -> None:
        first = self.conversation.first_input or ""
        system = self.runtime.prompts.system(first, self.variables)
        section = self.output_plan.section() if self.output_plan is not None else None
        self.conversation.set_system(compose_system(system, (), section) if section else system)

    def render(self, source: TemplateSource, extra: Mapping[str, Any] | None = None) -> str:
        """Render one of the agent's templates with the session's variables and current input."""
        return self.runtime.prompts.render(source, self.current_input, self.variables, extra)

    def fit_context(self) -> None:
        """Compress old tool outputs when the prompt would exceed ``limits.context_tokens``."""
        from runner.session import context as ctxmod

        limit = self.limits.context_tokens
        if limit is None:
            return
        system = self.conversation.system
        fixed = (ctxmod.message_chars(system) if system else 0) + self.runtime.tools_chars
        done = self.conversation.compress(limit_tokens=limit, fixed_chars=fixed)
        if done:
            self.record_event(
                "compress",
                replaced=[{"index": c.index, "name": c.name, "chars": c.original_chars} for c in done],
                estimated_tokens=ctxmod.estimate_tokens(self.conversation.chars + fixed),
            )
            self.note(
                f"compressed {counted(len(done), 'old tool output')} to fit limits.context_tokens ({limit})"
            )


#: The transcript events that are span events as well.
_TRACED = frozenset({"limit", "hook", "interrupt", "queue_drop", "compress", "model"})


def _attributes(data: dict[str, Any]) -> dict[str, Any]:
    """An event's data as span attributes: ``runner.``-named, plain values only."""
    return {f"runner.{k}": v for k, v in data.items() if _plain(v)}


def _plain(value: object) -> bool:
    return isinstance(value, str | int | float | bool)
