"""What the loop reports while it runs; the CLI and the server render these, the loop never prints."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from runner.models.base import ReasoningDelta, TextDelta, Usage
from runner.tools.base import ToolResult

__all__ = [
    "AnswerDraft",
    "AssistantMessage",
    "EventSink",
    "LoopEvent",
    "Note",
    "OutputReady",
    "ReasoningChunk",
    "StepStarted",
    "TextChunk",
    "ToolFinished",
    "ToolStarted",
    "TurnEnded",
    "UsageUpdate",
    "WorkflowStep",
]


#: A piece of the assistant's text, as it streams: the model layer's ``TextDelta`` itself (one
#: vocabulary for text deltas: the model's stream, the loop's events and the server's pieces).
TextChunk = TextDelta


@dataclass(frozen=True, slots=True)
class AnswerDraft:
    """A piece of the text of an agent with ``output:``: a draft of its answer, not yet checked
    (the answer itself comes as ``OutputReady``)."""

    text: str


@dataclass(frozen=True, slots=True)
class OutputReady:
    """The structured answer of a turn, checked against ``output:``: the value and its JSON text."""

    value: Any
    text: str


#: A piece of the model's reasoning (shown dimmed, never sent back): the model layer's ``ReasoningDelta``.
ReasoningChunk = ReasoningDelta


@dataclass(frozen=True, slots=True)
class StepStarted:
    """A step begins (1-based turn and step numbers)."""

    turn: int
    step: int


@dataclass(frozen=True, slots=True)
class AssistantMessage:
    """The assistant message of a step, complete, as appended to the history."""

    message: dict[str, Any]
    #: Why the model's reply ended, as the provider said (``stop``, ``length``, ``content_filter``, ...).
    finish_reason: str | None = None


@dataclass(frozen=True, slots=True)
class ToolStarted:
    """A tool call passed its checks and is running."""

    call_id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ToolFinished:
    """A tool call's result (also for refused, denied or failed calls)."""

    result: ToolResult


@dataclass(frozen=True, slots=True)
class Note:
    """Something the user should know: a limit, a hook failure, a dropped message."""

    text: str
    level: Literal["info", "warning", "error"] = "info"
    #: ``model``: said by the model layer while the session waited on it (a retry and its wait):
    #: progress for whoever watches, never part of an answer (``runner serve`` logs it).
    source: Literal["session", "model"] = "session"


@dataclass(frozen=True, slots=True)
class UsageUpdate:
    """Usage after a model call: of that call and of the session so far."""

    call: Usage
    session: Usage


@dataclass(frozen=True, slots=True)
class TurnEnded:
    """A turn ended: its final text and why it ended."""

    output: str
    reason: str


@dataclass(frozen=True, slots=True)
class WorkflowStep:
    """A workflow's step started or ended (``data``: the event ``runner run --json`` prints for it:
    ``type`` ``step_start`` / ``step_end`` / ``step_reused``, ``key``, ``status``, ...)."""

    data: dict[str, Any]


LoopEvent = (
    TextChunk
    | AnswerDraft
    | OutputReady
    | ReasoningChunk
    | StepStarted
    | AssistantMessage
    | ToolStarted
    | ToolFinished
    | Note
    | UsageUpdate
    | TurnEnded
    | WorkflowStep
)
EventSink = Callable[[LoopEvent], None]
