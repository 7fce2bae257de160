"""What one item of a batch gave: ``ItemResult``, a plain record that is one line of the output file."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

# A line's status is its run's ``Outcome`` status; ``interrupted`` lines are never written.
from runner.session.outcome import Outcome, Status

__all__ = ["ItemResult", "Status"]


@dataclass(slots=True)
class ItemResult:
    """One item's result: what ``run_batch`` yields and what a line of ``OUT.jsonl`` holds.

    Every field is JSON-serializable (``as_record``); an item run elsewhere (another process, a
    worker) sends back the same record.
    """

    id: str | int
    line: int
    status: Status
    answer: str = ""
    """The last turn's answer text."""
    output: Any = None
    """The structured answer (the agent has ``output:``): its JSON value; None otherwise."""
    error: str | None = None
    reason: str | None = None
    """Why the run stopped (``done``, ``limit``, ``max_steps``, ...); None when it failed."""
    usage: dict[str, Any] = field(default_factory=dict)
    cost_usd: float | None = None
    duration_s: float = 0.0
    tools: list[str] = field(default_factory=list)
    """The names of the tools the model called, in order."""
    refused: list[str] = field(default_factory=list)
    """The tools refused for want of a confirmation (no ``--yes``)."""
    steps: int = 0
    """Model steps over the item's turns."""
    session_id: str | None = None
    """The transcript of the item's (last) attempt: ``runner sessions show ID``."""
    attempts: int = 1
    transient: bool = False
    """The error was transient (a retryable model error: 429, 5xx, network); ``--retries`` retries it."""
    input_sha256: str = ""
    agent_sha256: str = ""
    interrupted: bool = False
    """Ctrl+C stopped it: not written, the next run does it again."""
    retry_after: float | None = None
    """Seconds the model's server asked to wait before a retry (not written)."""

    @property
    def ok(self) -> bool:
        """Whether the item ended as it should: ``ok``, or ``stopped`` by the agent's own hook."""
        return self.status in ("ok", "stopped")

    def outcome(self) -> Outcome:
        """The run's ``Outcome`` as far as the line keeps it (status, reason, error, tools, refused):
        what ``runner eval`` grades a run on."""
        return Outcome(
            self.status,
            self.reason or "",
            answer=self.answer,
            error=self.error,
            tools=tuple(self.tools),
            refused=tuple(self.refused),
            transient=self.transient,
        )

    def as_record(self) -> dict[str, Any]:
        """The output line (without the ``interrupted`` flag and the wait, which are never written)."""
        record = asdict(self)
        del record["interrupted"], record["retry_after"]
        return record

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> ItemResult:
        """An ``ItemResult`` from a line written by ``as_record`` (unknown keys ignored)."""
        known = {name: record[name] for name in cls.__dataclass_fields__ if name in record}
        return cls(**known)
