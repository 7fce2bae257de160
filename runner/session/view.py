"""What the parts of a session (its records, hooks, answers, turns) see of it: ``SessionView``.

``Session`` (``session.py``) builds those parts and hands itself to them; they name it through this
protocol, not the class, so they never import ``session.py`` back and the session layer has no
import cycle. ``Session`` matches it structurally (mypy checks that where each part is built);
``turn.py`` widens it with what a turn needs besides (``TurnSession``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, Protocol

from runner.agentfile.config import TemplateSource
from runner.models.base import Model
from runner.modes.structured import OutputPlan
from runner.runtime.runtime import AgentRuntime
from runner.session.conversation import Conversation
from runner.session.events import EventSink
from runner.session.options import RunOptions

__all__ = ["SessionView"]


class SessionView(Protocol):
    """A session as its parts use it: its runtime and conversation, where events and notes go."""

    @property
    def runtime(self) -> AgentRuntime: ...
    @property
    def options(self) -> RunOptions: ...
    @property
    def session_id(self) -> str: ...
    @property
    def model(self) -> Model: ...
    @property
    def variables(self) -> dict[str, Any]: ...
    @property
    def conversation(self) -> Conversation: ...
    @property
    def sink(self) -> EventSink: ...
    @property
    def output_plan(self) -> OutputPlan | None: ...
    @property
    def client_names(self) -> frozenset[str]: ...

    def enqueue(self, text: str, *, origin: str = "user") -> bool: ...
    def render(self, source: TemplateSource, extra: Mapping[str, Any] | None = None) -> str: ...
    def note(self, text: str, level: Literal["info", "warning", "error"] = "info") -> None: ...
    def record_event(self, name: str, **data: Any) -> None: ...
