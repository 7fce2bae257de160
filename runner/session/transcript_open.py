"""A session's transcript: opened with its header (or a resume event), and the system prompt a
resumed session sends again."""

from __future__ import annotations

from typing import Any

from runner.errors import RunnerError
from runner.session.view import SessionView
from runner.store.transcript import REDACTED, Redactor, Transcript, TranscriptWriter, sessions_dir

__all__ = ["open_transcript", "restored_system"]


def open_transcript(session: SessionView, resume: Transcript | None) -> TranscriptWriter | None:
    """The session's transcript writer (None when transcripts are off): a new file with its header,
    or the resumed file with a ``resume`` event."""
    runtime = session.runtime
    write = session.options.transcript
    if write is None:
        write = runtime.settings.write_transcript
    if not write:
        return None
    path = sessions_dir(runtime.settings.home) / f"{session.session_id}.jsonl"
    transcript = TranscriptWriter(path, Redactor(runtime.config.secrets), fsync=runtime.settings.fsync)
    settings = runtime.settings
    if resume is None:
        transcript.header(
            session_id=session.session_id,
            agent=runtime.name,
            agent_path=str(runtime.config.path),
            agent_sha256=runtime.provenance.sha256,
            git=runtime.provenance.git,
            **({"revision": runtime.provenance.revision} if runtime.provenance.revision else {}),
            model=session.model.name,
            replay=str(settings.replay) if settings.replay else None,
            record=str(settings.record) if settings.record else None,
        )
    else:
        transcript.event("resume", agent_sha256=runtime.provenance.sha256)
    return transcript


def restored_system(session: SessionView, resume: Transcript) -> dict[str, Any] | None:
    """The recorded system prompt; when secrets were redacted out of it, the same prompt composed
    again with them (what is written is redacted, what is sent never is)."""
    recorded = resume.system_prompt()
    if recorded is None or REDACTED not in str(recorded.get("content")):
        return recorded
    first = next((m.get("content") for m in resume.history() if m.get("role") == "user"), "")
    runtime = session.runtime
    try:
        composed = runtime.prompts.system(first if isinstance(first, str) else "", session.variables)
    except RunnerError:
        return recorded
    if composed is not None and Redactor(runtime.config.secrets).record(composed) == recorded:
        return composed
    return recorded  # the agent file changed since: keep what ran, as it was written
