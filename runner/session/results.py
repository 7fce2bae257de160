"""What a turn returns (``TurnResult``): a leaf of the session layer.

The run's options and the turns both name it, so it sits below both (``options.py`` imports it
without importing the turn).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from runner.errors import LimitReached
from runner.models.base import ToolCall
from runner.session.decisions import StopReason

__all__ = ["TurnResult"]


@dataclass
class TurnResult:
    """How a turn ended."""

    output: str
    reason: StopReason
    steps: int
    limit: LimitReached | None = None
    #: With reason "client_tools": the calls of client tools waiting for the caller's results.
    client_calls: list[ToolCall] = field(default_factory=list)
    #: With ``output:``: whether the turn ended with an answer that matched it, the answer's JSON
    #: value, and that value as Python callers get it (a pydantic instance for a ``python:`` model).
    structured: bool = False
    value: Any = None
    data: Any = None
