"""How a run ended, decided once for every door: ``Outcome`` and its one exit rule.

Every runnable thing (an agent's session, a team file's workflow) ends in one ``Outcome``: its
status, the answer (text and structured data), usage, the session id, the tools it called and the
ones whose confirmation was refused, the limit it reached, the error and whether that error may pass
on a retry. ``exit_code`` is the one place a status becomes an exit code; ``runner run``, a batch
line, ``runner eval``, a workflow step, a sub-agent's result, ``runner serve`` and ``runner.Agent``
all read the same ``Outcome`` (docs/decisions.md, "How a run ends").

| end of the run | status | exit |
| --- | --- | --- |
| the model answered (or called a client's tool) | ``ok`` | 0 |
| a hook's ``stop`` (any event), a "no" to a confirmation in a chat | ``stopped`` | 0 |
| a limit (steps, tokens, cost, time, repeats, ``max_turns``) or queued input dropped by one | ``limit`` | 3 |
| Ctrl+C, a cancelled request | ``interrupted`` | 130 (0 in a chat) |
| an error (the model unreachable after retries, a tool's escape, a wrong structured answer) | ``error`` | 1 |

A confirmation refused because nobody can be asked (no ``--yes`` off a terminal) is not an end: the
model reads the refusal and goes on; the tool's name is in ``Outcome.refused``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from runner.errors import Interrupted, LimitReached, ModelError, RunnerError
from runner.models.base import Usage
from runner.session.decisions import LIMIT_REASONS

__all__ = ["EXIT_CODES", "STATUSES", "Outcome", "Status", "status_of"]

Status = Literal["ok", "stopped", "limit", "interrupted", "error"]

#: Every status, best first.
STATUSES: tuple[Status, ...] = ("ok", "stopped", "limit", "interrupted", "error")

#: The exit code of each status (``interrupted`` is 0 in an interactive chat).
EXIT_CODES: dict[str, int] = {"ok": 0, "stopped": 0, "limit": 3, "interrupted": 130, "error": 1}

#: Turn reasons that mean a hook or a person stopped the turn.
STOP_REASONS = frozenset({"hook", "declined"})


def status_of(reasons: Sequence[str], *, dropped: int = 0, stopped: bool = False) -> Status:
    """The status of a run whose turns ended for ``reasons`` (in order), which dropped ``dropped``
    queued inputs to a limit, and whose run of queued inputs a hook stopped (``stopped``).

    Ctrl+C anywhere wins, then a limit anywhere (a dropped input included), then a stop.
    """
    if "interrupted" in reasons:
        return "interrupted"
    if dropped or any(reason in LIMIT_REASONS for reason in reasons):
        return "limit"
    if stopped or (reasons and reasons[-1] in STOP_REASONS):
        return "stopped"
    return "ok"


@dataclass(frozen=True)
class Outcome:
    """How one run of an agent or a workflow ended (``status``) and what it gave."""

    status: Status
    #: The finer reason: a turn's (``done``, ``hook``, ``declined``, ``client_tools``, ``limit``,
    #: ``max_steps``, ``repeat``, ``interrupted``), ``error``, or a workflow's ``workflow``.
    reason: str = "done"
    #: The answer's text (a workflow's output as text).
    answer: str = ""
    #: The structured answer (``output:`` / ``output_schema``) as JSON data; None without one.
    data: Any = None
    usage: Usage = field(default_factory=Usage)
    session_id: str | None = None
    #: The tools the model called, in order (a name once per call).
    tools: tuple[str, ...] = ()
    #: The tools whose call was refused for want of a confirmation (no ``--yes``, nobody to ask).
    refused: tuple[str, ...] = ()
    #: What the limit that ended the run said (status ``limit``).
    limit: str | None = None
    #: What went wrong (status ``error``), or why the run stopped (``stopped``, ``interrupted``).
    error: str | None = None
    #: The error may pass when the run is tried again (429, 5xx, network, timeout).
    transient: bool = False
    #: Seconds the model's server asked to wait before a retry (``Retry-After``).
    retry_after: float | None = None
    #: Queued inputs a limit dropped.
    dropped: int = 0
    steps: int = 0

    @property
    def ok(self) -> bool:
        """Whether the run ended as it should (``ok``, or ``stopped`` by the agent's own hooks)."""
        return self.status in ("ok", "stopped")

    def exit_code(self, *, interactive: bool = False) -> int:
        """The one exit code of this outcome (0 ok / stopped, 1 error, 3 limit, 130 interrupted;
        an interrupted turn in a chat is 0: the prompt comes back)."""
        if self.status == "interrupted" and interactive:
            return 0
        return EXIT_CODES[self.status]

    def why(self) -> str | None:
        """In words, why the run did not simply answer (None when it did)."""
        if self.status == "ok":
            return None
        return self.limit or self.error or self.reason

    @classmethod
    def of_error(
        cls,
        exc: BaseException,
        *,
        session_id: str | None = None,
        usage: Usage | None = None,
        tools: Sequence[str] = (),
        refused: Sequence[str] = (),
    ) -> Outcome:
        """The outcome of a run that raised ``exc`` (a limit raised is ``limit``, Ctrl+C ``interrupted``)."""
        common: dict[str, Any] = {
            "session_id": session_id,
            "usage": usage if usage is not None else Usage(),
            "tools": tuple(tools),
            "refused": tuple(refused),
        }
        message = (
            exc.message if isinstance(exc, RunnerError) else f"internal error: {type(exc).__name__}: {exc}"
        )
        if isinstance(exc, LimitReached):
            return cls("limit", "limit", limit=message, **common)
        if isinstance(exc, KeyboardInterrupt | Interrupted):
            return cls("interrupted", "interrupted", error="interrupted", **common)
        transient = isinstance(exc, ModelError) and exc.transient
        retry_after = exc.retry_after if isinstance(exc, ModelError) else None
        return cls("error", "error", error=message, transient=transient, retry_after=retry_after, **common)

    def as_dict(self) -> dict[str, Any]:
        """The outcome as JSON data (``--json``, a served response's ``runner`` field)."""
        return {
            "status": self.status,
            "reason": self.reason,
            "exit_code": self.exit_code(),
            "session_id": self.session_id,
            "tools": list(self.tools),
            "refused": list(self.refused),
            "limit": self.limit,
            "error": self.error,
            "transient": self.transient,
        }
