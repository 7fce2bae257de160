"""The workflow's own transcript under ``RUNNER_HOME/sessions``, and what a resume reads back.

The header says ``workflow`` (its name) beside ``agent_path``; then ``step_start`` (the step's key,
its rendered input) and ``step_end`` (status, output, duration, cost, the child session's id)
events, and ``workflow_end``. A step's key is its id, with the loop iteration (``review#2/critic``)
or the ``for_each`` item (``research[3]/search``) it ran in, so that a resume finds each step it
already finished (``step_end`` with status ``ok``) and uses the output it recorded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.models.base import Usage
from runner.store.transcript import (
    Redactor,
    Transcript,
    TranscriptWriter,
    file_sha256,
    new_session_id,
    sessions_dir,
)

__all__ = ["ResumeState", "WorkflowRecord", "open_record", "resume_state"]


@dataclass
class ResumeState:
    """What a resumed workflow reuses: finished steps' outputs and what they spent."""

    outputs: dict[str, Any] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)
    agent_steps: int = 0


class WorkflowRecord:
    """Writes one workflow's events (nothing when ``writer`` is None: transcripts are off)."""

    def __init__(self, session_id: str, writer: TranscriptWriter | None) -> None:
        self.session_id = session_id
        self.writer = writer

    def event(self, name: str, **data: Any) -> None:
        if self.writer is not None:
            self.writer.event(name, **data)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def open_record(
    home: Path,
    *,
    workflow: str,
    path: Path,
    input: str,
    variables: dict[str, Any],
    secrets: frozenset[str],
    models: str = "",
    write: bool = True,
    fsync: bool = False,
    resume: Transcript | None = None,
) -> WorkflowRecord:
    """A new workflow transcript with its header, or the resumed one with a ``resume`` event."""
    session_id = resume.session_id if resume is not None else new_session_id()
    if not write:
        return WorkflowRecord(session_id, None)
    target = resume.path if resume is not None else sessions_dir(home) / f"{session_id}.jsonl"
    writer = TranscriptWriter(target, Redactor(secrets), fsync=fsync)
    sha = file_sha256(path)
    if resume is None:
        writer.header(
            session_id=session_id,
            workflow=workflow,
            agent=workflow,
            agent_path=str(path),
            agent_sha256=sha,
            model=models,
            input=input,
            variables=variables,
        )
    else:
        writer.event("resume", agent_sha256=sha)
    return WorkflowRecord(session_id, writer)


def resume_state(transcript: Transcript) -> ResumeState:
    """The steps a workflow transcript recorded as finished (``step_end`` ok), with their outputs."""
    state = ResumeState()
    for record in transcript.events():
        if record.get("event") != "step_end":
            continue
        data = record.get("data") or {}
        if data.get("status") not in ("ok", "stopped") or not isinstance(data.get("key"), str):
            continue
        state.outputs[data["key"]] = data.get("output")
        if data.get("kind") == "agent":
            state.agent_steps += 1
            state.usage = state.usage + Usage(
                total_tokens=int(data.get("tokens") or 0), cost_usd=data.get("cost_usd")
            )
    return state
