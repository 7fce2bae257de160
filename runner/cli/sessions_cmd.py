"""``runner sessions list`` / ``runner sessions show [ID] [--html]``: saved transcripts.

``list`` shows the 20 newest (``--limit N``, ``--all``) and says how many more there are; it filters
by agent name (``--agent``) and by the revision the agent file was at (``--rev``: resolved to a
commit in the repository each session's agent file came from, the work tree or ``git+`` URL its
header's ``revision`` names or else the one holding its file, and matched against the commit its
header recorded). ``show`` prints the header, the messages, the events that matter, and for each
turn the configuration it ran under: the hash of every file the agent is made of, and, when a
reload changed it, what changed: ``runner diff``'s comparison (``agentdiff.compare``) of the
snapshots the transcript recorded. ``show --html`` writes the session's timeline page instead
(``runner.report``); without an id, ``show`` shows the newest session.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from runner.cli.commands import runtime_settings
from runner.cli.common import display_path
from runner.errors import ConfigError

__all__ = ["LIST_LIMIT", "run_sessions"]

#: How many sessions ``runner sessions list`` shows without ``--limit`` or ``--all`` (the newest).
LIST_LIMIT = 20

#: Transcript events ``sessions show`` prints without ``--all`` (the others are bookkeeping).
SHOWN_EVENTS = frozenset(
    {
        "error",
        "limit",
        "interrupt",
        "hook",
        "reload",
        "reload_failed",
        "resume",
        "queue_drop",
        "undo",
        "step_start",
        "step_end",
        "workflow_end",
    }
)


def _recorded_commits(header: dict[str, Any]) -> set[str]:
    """The commits a transcript's header says its agent file was at."""
    commits = set()
    for key in ("git", "revision"):
        value = header.get(key)
        if isinstance(value, dict) and isinstance(value.get("commit"), str):
            commits.add(value["commit"])
    return commits


class _RevMatcher:
    """Whether a session ran at the commit REV names, REV read in the repository the session's agent
    file came from: the one its header's ``revision`` names (``--rev``, ``git+URL``: the file itself is
    a copy under RUNNER_HOME), else the one holding its ``agent_path``. Where REV names nothing there
    (the repository is gone, or a remote clone lacks a tag), a session still matches when it was run
    with that very REV, or REV is the start of its commit."""

    def __init__(self, rev: str, home: Path) -> None:
        self.rev = rev
        self.home = home
        self.resolved = False  # whether REV named a commit for any session
        self._commits: dict[str, str | None] = {}

    def _commit_in(self, repository: str) -> str | None:
        from runner.agentfile.revisions import commit_at

        if repository not in self._commits:
            self._commits[repository] = commit_at(repository, self.rev, home=self.home)
        return self._commits[repository]

    def matches(self, header: dict[str, Any]) -> bool:
        recorded = _recorded_commits(header)
        value = header.get("revision")
        revision: dict[str, Any] = value if isinstance(value, dict) else {}
        if revision.get("repository"):
            repository = str(revision["repository"])
        else:
            path = str(header.get("agent_path") or "")
            repository = str(Path(path).parent) if path else "."
        commit = self._commit_in(repository)
        if commit is None:
            named = revision.get("rev") == self.rev or (
                len(self.rev) >= 7 and any(c.startswith(self.rev.lower()) for c in recorded)
            )
            self.resolved = self.resolved or named
            return named
        self.resolved = True
        return commit in recorded


def _summary(t: Any) -> str:
    """One line of ``sessions list``: id, status, agent, its size, the input it began with."""
    if "workflow" in t.header:  # its steps, and the input it began with
        ends = [e for e in t.events() if e.get("event") == "step_end"]
        count, unit = sum(1 for e in ends if (e.get("data") or {}).get("kind") == "agent"), "steps"
        first = t.header.get("input") or ""
    else:
        messages = t.messages()
        count, unit = len(messages), "msgs"
        first = next((m.get("content") or "" for m in messages if m.get("role") == "user"), "")
    return (
        f"{t.session_id}  {t.status():<11} {t.header.get('agent', '?'):<16} {count:>4} {unit:<5} "
        f"{' '.join(str(first).split())[:60]}"
    )


def _list(agent: str | None, rev: str | None, limit: int | None) -> None:
    from runner.store.transcript import list_transcripts, read_transcript

    settings = runtime_settings(None)
    paths = list_transcripts(settings.home)
    if not paths:
        typer.echo(f"no sessions under {display_path(str(settings.home))}", err=True)
    shown, more = 0, 0
    matcher = _RevMatcher(rev, settings.home) if rev is not None else None
    filtered = agent is not None or rev is not None
    for index, path in enumerate(reversed(paths)):
        if limit is not None and shown >= limit and not filtered:
            more = len(paths) - index  # every other file is one more session: no need to read them
            break
        try:
            t = read_transcript(path)
        except Exception as exc:  # a broken file should not hide the others
            if not filtered:
                shown += 1
                typer.echo(f"{path.stem}  (unreadable: {exc})")
            continue
        if agent is not None and t.header.get("agent") != agent:
            continue
        if matcher is not None and not matcher.matches(t.header):
            continue
        if limit is not None and shown >= limit:
            more += 1
            continue
        shown += 1
        typer.echo(_summary(t))
    if more:
        typer.echo(
            f"... and {more} older session{'s' if more != 1 else ''} (--limit N shows N, --all every one)",
            err=True,
        )
    if matcher is not None and paths and not matcher.resolved:
        raise ConfigError(
            f"no revision '{rev}' in the repositories of these sessions' agent files",
            hint="give a commit, branch or tag of the agent's repository (git log)",
        )
    if paths and not shown and (agent is not None or rev is not None):
        which = " ".join(f for f in (f"agent {agent}" if agent else "", f"at {rev}" if rev else "") if f)
        typer.echo(f"no sessions of {which}", err=True)


def _header(t: Any) -> None:
    h = t.header
    git = h.get("git") or {}
    typer.echo(f"session  {t.session_id}")
    typer.echo(f"agent    {h.get('agent')}  ({h.get('agent_path')})")
    typer.echo(f"sha256   {h.get('agent_sha256')}")
    if git:
        typer.echo(f"git      {git.get('commit')}{' (dirty)' if git.get('dirty') else ''}")
    revision = h.get("revision")
    if isinstance(revision, dict):
        typer.echo(f"revision {revision.get('rev')} = {revision.get('commit')}")
    typer.echo(
        f"model    {h.get('model')}   started {h.get('started_at')}   runner {h.get('runner_version')}"
    )
    typer.echo(f"status   {t.status()}")


def _message(record: dict[str, Any]) -> None:
    content = record.get("content") or ""
    calls = record.get("tool_calls") or []
    label = record["role"] + (f" {record['name']}" if record.get("name") else "")
    text = " ".join(str(content).split())[:200]
    if calls:
        text += " -> " + ", ".join(
            f"{c['function']['name']}({c['function']['arguments'][:60]})" for c in calls
        )
    typer.echo(f"[{label}] {text}")


def _show(session_id: str, *, show_all: bool) -> None:
    from runner.agentdiff import compare, format_diff
    from runner.store.transcript import find_transcript, read_transcript

    t = read_transcript(find_transcript(runtime_settings(None).home, session_id))
    _header(t)
    snapshots: dict[str, dict[str, Any]] = {}
    current: str | None = None
    for record in t.records:
        event, data = record.get("event"), record.get("data") or {}
        if record.get("type") == "message":
            _message(record)
        elif event == "config" and isinstance(data.get("snapshot"), dict):
            digest = str(data.get("hash"))
            if current is not None and current in snapshots and digest != current:
                typer.echo(f"  (configuration changed: {current} -> {digest})")
                diff = compare(snapshots[current], data["snapshot"], old_label=current, new_label=digest)
                lines = format_diff(diff).splitlines()[2:] if not diff.same else []
                for line in lines or ["(only the files changed: nothing runner diff compares)"]:
                    typer.echo(f"    {line}")
            snapshots[digest] = data["snapshot"]
            current = digest
        elif event == "turn":
            used = data.get("config") or "not recorded"
            continued = " (continued)" if data.get("continued") else ""
            typer.echo(f"  (turn {data.get('turn')}{continued}, configuration {used})")
        elif show_all or event in SHOWN_EVENTS:
            typer.echo(f"  ({event}: {json.dumps(data, ensure_ascii=False)[:160]})")


def _newest() -> str:
    """The id of the session written to last (``sessions show`` without an id): after a workflow's
    run, the workflow's own transcript (its steps' sessions end before it does)."""
    from runner.store.transcript import list_transcripts

    home = runtime_settings(None).home
    paths = list_transcripts(home)
    if not paths:
        raise ConfigError(f"no sessions under {display_path(str(home))}", hint="runner run AGENT writes one")

    def written(path: Path) -> int:
        try:
            return path.stat().st_mtime_ns
        except OSError:  # removed meanwhile
            return 0

    times = {path: written(path) for path in paths}
    last = [path for path in paths if times[path] == max(times.values())]
    # Written in the same clock tick (a workflow and its last step): the workflow's own transcript.
    return max(last, key=lambda path: (_is_workflow(path), path.name)).stem


def _is_workflow(path: Path) -> bool:
    try:
        with path.open(encoding="utf-8", errors="replace") as file:
            header = json.loads(file.readline() or "{}")
    except (OSError, ValueError):
        return False
    return isinstance(header, dict) and "workflow" in header


def _page(session_id: str, out: Path | None) -> None:
    """``sessions show --html``: the timeline page, to ``out`` (default ``./ID.html``; ``-`` stdout)."""
    from runner.cli.report_cli import page_redactor
    from runner.report import session_page, write_page
    from runner.store.transcript import find_transcript

    path = find_transcript(runtime_settings(None).home, session_id)
    page = session_page(path, redactor=page_redactor())
    if out is not None and str(out) == "-":
        typer.echo(page, nl=False)
        return
    target = out if out is not None else Path(f"{path.stem}.html")
    write_page(target, page)
    typer.echo(f"wrote {display_path(str(target))} ({len(page.encode('utf-8')):,} bytes)", err=True)


def run_sessions(
    action: str,
    session_id: str | None,
    *,
    show_all: bool = False,
    agent: str | None = None,
    rev: str | None = None,
    limit: int | None = LIST_LIMIT,
    html: bool = False,
    out: Path | None = None,
) -> None:
    """``runner sessions list`` (the ``limit`` newest, with a status) / ``runner sessions show [ID]``."""
    if action == "list" and not html and out is None:
        _list(agent, rev, limit)
        return
    if action != "show":
        raise ConfigError(
            "usage: runner sessions list [--agent NAME] [--rev REV] [--limit N | --all]"
            " | runner sessions show [ID] [--all] [--html [-o FILE]]"
        )
    if out is not None and not html:
        raise ConfigError("--out is where --html writes the page: give --html too")
    session_id = session_id or _newest()
    if html:
        _page(session_id, out)
    else:
        _show(session_id, show_all=show_all)
