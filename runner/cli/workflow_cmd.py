"""``runner run team.yaml -p INPUT`` for a team file with a ``workflow:``, and ``runner resume`` of one.

Progress goes to stderr, a line per step (started; done with its duration and cost); stdout gets the
workflow's output (JSON when it is an object or a list). ``--json`` prints one event per line
instead: ``workflow``, ``step_start``, ``step_end``, ``output``, ``end``. Ctrl+C interrupts every
running child session (each ends its turn cleanly) and exits 130; ``runner resume ID`` goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import typer

from runner.errors import ConfigError
from runner.runnable.target import Target
from runner.runnable.target import shown as display
from runner.runnable.workflow import WorkflowRunner
from runner.runtime.settings import RuntimeSettings
from runner.session.outcome import Outcome
from runner.store.transcript import Transcript
from runner.workflow.progress import step_line

__all__ = ["resume_workflow", "run_workflow"]


class _Progress:
    """Step events: a line each on stderr, or JSON lines on stdout with ``--json``."""

    def __init__(self, json_output: bool) -> None:
        self.json_output = json_output

    def emit(self, record: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
        sys.stdout.flush()

    def __call__(self, event: dict[str, Any]) -> None:
        if self.json_output:
            self.emit(event)
            return
        line = step_line(event)
        if line is not None:
            typer.echo(line, err=True)


def _show_output(value: Any, progress: _Progress) -> None:
    if progress.json_output:
        progress.emit({"type": "output", "output": value})
        return
    if value is None:
        return
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=2)
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    sys.stdout.flush()


async def _watched_run(engine: Any, progress: _Progress, extra_vars: Iterable[str]) -> Any:
    """``--watch``: the run, its files reloaded between steps while it goes."""
    from runner.workflow.watching import watch_workflow

    def report(level: str, text: str) -> None:
        if progress.json_output:
            progress.emit({"type": "reload" if level == "info" else "reload_failed", "message": text})
        else:
            typer.echo(f"{'note' if level == 'info' else 'error'}: {text}", err=True)

    stop = asyncio.Event()
    watcher = asyncio.create_task(watch_workflow(engine, stop=stop, report=report, extra_vars=extra_vars))
    try:
        return await engine.run()
    finally:
        stop.set()
        await asyncio.gather(watcher, return_exceptions=True)


def _drive(
    runner: WorkflowRunner, engine: Any, progress: _Progress, *, watch: bool, extra_vars: Iterable[str]
) -> Outcome:
    """Run the engine in an event loop here; Ctrl+C (SIGINT) interrupts it instead of killing it."""
    loop = asyncio.new_event_loop()
    drive = (lambda e: _watched_run(e, progress, extra_vars)) if watch else None
    try:
        with contextlib.suppress(NotImplementedError, RuntimeError):  # not the main thread, no signals
            loop.add_signal_handler(signal.SIGINT, runner.interrupt)
        try:
            return loop.run_until_complete(runner.run_engine(engine, drive=drive))
        finally:
            loop.run_until_complete(runner.aclose())
    finally:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.remove_signal_handler(signal.SIGINT)
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


def _execute(
    target: Target,
    settings: RuntimeSettings,
    *,
    input: str,
    variables: dict[str, Any],
    json_output: bool,
    resume: Transcript | None,
    yes: bool = False,
    watch: bool = False,
) -> int:
    from runner.cli.guard import note_secrets
    from runner.runnable import WorkflowRunner
    from runner.workflow.cassette import open_cassette

    assert target.workflow is not None
    for config in target.configs.values():
        note_secrets(config)
    # before the transcript: a cassette of another workflow is refused with nothing written
    cassette = open_cassette(
        target.workflow,
        target.path,
        target.configs,
        settings,
        warn=lambda text: typer.echo(f"warning: {text}", err=True),
    )
    runner = WorkflowRunner(target, settings, assume_yes=yes)
    record = runner.record(input, variables, resume=resume)
    progress = _Progress(json_output)
    if json_output:
        progress.emit({"type": "workflow", "session_id": record.session_id, "resumed": resume is not None})
    else:
        verb = "resuming" if resume is not None else "workflow"
        typer.echo(f"({verb} {target.workflow.name}: session {record.session_id})", err=True)
    engine = runner.engine(
        input,
        variables=variables,
        on_event=progress,
        resume=resume,
        cassette=cassette,
        record=record,
    )
    outcome = _drive(runner, engine, progress, watch=watch, extra_vars=variables.keys())
    result = runner.last
    assert result is not None
    code = outcome.exit_code()
    if code in (0, 3) and result.output is not None:
        _show_output(result.output, progress)
    for note in result.notes:
        if not json_output:
            typer.echo(f"note: {note}", err=True)
    if json_output:
        progress.emit({"type": "end", "exit_code": code, "status": outcome.status, "notes": result.notes})
    if code != 0:
        typer.echo(f"(runner resume {result.session_id} goes on from here)", err=True)
    return code


def run_workflow(
    target: Target,
    settings: RuntimeSettings,
    *,
    prompts: list[str],
    variables: dict[str, Any],
    json_output: bool,
    yes: bool = False,
    watch: bool = False,
) -> int:
    """``runner run team.yaml -p INPUT``: the exit code (0, 1 a step failed, 3 a limit, 130 Ctrl+C)."""
    shown = display(target.path)
    if not prompts:
        if sys.stdin.isatty():
            raise ConfigError(
                "nothing to run: give the workflow's input with -p", hint=f"runner run {shown} -p '...'"
            )
        piped = sys.stdin.read()
        if not piped.strip():
            raise ConfigError("nothing to run: standard input was empty", hint=f"runner run {shown} -p '...'")
        prompts = [piped]
    return _execute(
        target,
        settings,
        input="\n\n".join(prompts),
        variables=variables,
        json_output=json_output,
        resume=None,
        yes=yes,
        watch=watch,
    )


def resume_workflow(
    resume: Transcript,
    settings: RuntimeSettings,
    *,
    json_output: bool,
    yes: bool = False,
    watch: bool = False,
) -> int:
    """``runner resume ID`` of a workflow transcript: finished steps reused, the rest run."""
    path = Path(str(resume.header.get("agent_path") or ""))
    if not path.is_file():
        raise ConfigError(f"workflow {resume.session_id}: its team file {path} is gone")
    from runner.runnable import resolve

    target = resolve(path)
    if target.workflow is None:
        raise ConfigError(f"workflow {resume.session_id}: {path} has no workflow: any more")
    from runner.store.transcript import file_sha256

    if resume.header.get("agent_sha256") not in (None, file_sha256(path)):
        typer.echo(
            f"warning: {path} changed since workflow {resume.session_id} began; "
            "the steps it finished keep their recorded outputs",
            err=True,
        )
    variables = resume.header.get("variables")
    return _execute(
        target,
        settings,
        input=str(resume.header.get("input", "")),
        variables=dict(variables) if isinstance(variables, dict) else {},
        json_output=json_output,
        resume=resume,
        yes=yes,
        watch=watch,
    )
