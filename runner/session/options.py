"""What a session is told (``RunOptions``) and what a run gives back (``RunResult``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from runner.agentfile.config import LimitsConfig
from runner.agentfile.output_schema import OutputSchema
from runner.errors import LimitReached
from runner.models.base import ToolCall, Usage
from runner.session.gate import ConfirmFn
from runner.session.outcome import Outcome, status_of
from runner.session.results import TurnResult

__all__ = ["RunOptions", "RunResult", "lowered_limits"]


@dataclass
class RunOptions:
    """How this session differs from the agent file (CLI flags, request parameters, a parent's caps)."""

    variables: dict[str, Any] = field(default_factory=dict)
    stream: bool | None = None
    assume_yes: bool = False
    confirm: ConfirmFn | None = None
    params: dict[str, Any] = field(default_factory=dict)
    #: Tools the caller runs itself (OpenAI tool definitions, sent after the agent's own): a reply
    #: that calls one ends the turn with reason "client_tools", its calls left for the caller.
    client_tools: list[dict[str, Any]] = field(default_factory=list)
    #: Limits that may only lower the agent's own (``runner serve`` requests, sub-agents).
    limits: dict[str, Any] = field(default_factory=dict)
    #: Write a transcript (None: as the runtime's settings say).
    transcript: bool | None = None
    #: The shape the answer must have when the agent has no ``output:`` (a client's ``response_format``).
    output: OutputSchema | None = None


@dataclass
class RunResult:
    """What one ``Session.run`` did: its turns and why it stopped."""

    turns: list[TurnResult]
    session_id: str
    usage: Usage = field(default_factory=Usage)
    #: Queued messages dropped because a limit (``max_queue``, ``max_turns``) left no room for them.
    dropped: int = 0
    #: Why ``session_start`` ended the session, when it did.
    ended: str | None = None
    #: The tools the model called in this run, in order, and those refused for want of a confirmation.
    tools: tuple[str, ...] = ()
    refused: tuple[str, ...] = ()
    #: A ``turn_post`` / ``loop_continue`` hook stopped the run of queued inputs.
    stopped: bool = False

    @property
    def output(self) -> str:
        """The answer of the last turn ("" when none ran)."""
        return self.turns[-1].output if self.turns else ""

    @property
    def data(self) -> Any:
        """The last turn's structured answer (``output:``): a pydantic instance for a ``python:`` model,
        else the JSON value; None when the agent has no ``output:`` or the turn gave no answer."""
        return self.turns[-1].data if self.turns else None

    @property
    def reason(self) -> str:
        """Why the run stopped: the last turn's reason; "hook" when ``session_start`` ended it."""
        if self.ended is not None:
            return "hook"
        return self.turns[-1].reason if self.turns else "done"

    @property
    def steps(self) -> int:
        """Steps over all turns."""
        return sum(t.steps for t in self.turns)

    @property
    def limit(self) -> LimitReached | None:
        """The limit that ended a turn, if one did."""
        return next((t.limit for t in reversed(self.turns) if t.limit is not None), None)

    @property
    def client_calls(self) -> list[ToolCall]:
        """Calls of client tools waiting for the caller's results (reason "client_tools")."""
        return self.turns[-1].client_calls if self.turns else []

    @property
    def outcome(self) -> Outcome:
        """How the run ended, as every door reads it (``runner.session.outcome``)."""
        reasons = [turn.reason for turn in self.turns]
        status = status_of(reasons, dropped=self.dropped, stopped=self.stopped or self.ended is not None)
        last = self.turns[-1] if self.turns else None
        return Outcome(
            status,
            self.reason,
            answer=self.output,
            data=last.value if last is not None and last.structured else None,
            usage=self.usage,
            session_id=self.session_id,
            tools=self.tools,
            refused=self.refused,
            limit=self._limit_text() if status == "limit" else None,
            error=self._why(status),
            dropped=self.dropped,
            steps=self.steps,
        )

    def _limit_text(self) -> str:
        limit = self.limit
        if limit is not None:
            return limit.message
        if self.dropped:
            return f"{self.dropped} queued input(s) dropped (limits.max_queue / limits.max_turns)"
        return self.reason

    def _why(self, status: str) -> str | None:
        if status == "stopped":
            return self.ended or f"the turn was stopped ({self.reason})"
        if status == "interrupted":
            return "interrupted"
        return None

    def exit_code(self, *, interactive: bool = False) -> int:
        """The outcome's exit code: 0 done or stopped, 3 a limit ended a turn or dropped queued input,
        130 interrupted (0 interactively)."""
        return self.outcome.exit_code(interactive=interactive)


def lowered_limits(limits: LimitsConfig, lower: Mapping[str, Any]) -> LimitsConfig:
    """``limits`` with each of ``lower`` applied where it is lower (None in ``limits``: no limit)."""
    if not lower:
        return limits
    changes: dict[str, Any] = {}
    for key, value in lower.items():
        if value is None:
            continue
        current = getattr(limits, key)
        lowered = value if current is None else min(current, value)
        changes[key] = lowered if key in ("timeout_s", "max_cost_usd") else int(lowered)
    return dataclasses.replace(limits, **changes)
