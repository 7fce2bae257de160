"""``runner report FILE [-o PAGE]``: the HTML page of a file a run left behind (docs/reports.md).

FILE is a transcript (``$RUNNER_HOME/sessions/ID.jsonl``), a batch output file (``runner batch -o``)
or an eval report (``runner eval --json > eval.json``); which one is read from what it holds. The
page is written to PAGE (default: FILE with ``.html``; ``-`` prints it). Registered on ``app`` when
``runner/cli/main.py`` imports this module; the page builders are imported inside the command.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from runner.cli.app import app
from runner.cli.common import display_path, handles_errors
from runner.errors import ConfigError

if TYPE_CHECKING:
    from runner.redact import Redactor

__all__ = ["page_redactor", "report", "write_report"]


def _kind(path: Path) -> tuple[str, Any]:
    """What FILE holds: ``session``, ``batch`` or ``eval`` (with the eval's JSON)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise ConfigError(f"no file {path}") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:  # one JSON document (runner eval --json): a JSON lines file stops at its second line
        whole = json.loads(text)
    except ValueError:
        whole = None
    if isinstance(whole, dict) and isinstance(whole.get("cases"), list):
        return "eval", whole
    try:
        record = json.loads(text.lstrip().split("\n", 1)[0])
    except ValueError:
        record = None
    if isinstance(record, dict) and record.get("type") in ("header", "message", "event"):
        return "session", None
    if isinstance(record, dict) and "id" in record and "status" in record:
        return "batch", None
    raise ConfigError(
        f"{path}: not a transcript, a batch output file or an eval report",
        hint="give $RUNNER_HOME/sessions/ID.jsonl, runner batch's OUT.jsonl or runner eval --json's output",
    )


def page_redactor() -> Redactor:
    """The secrets a page masks: those the command's output guard knows, and the environment's."""
    from runner.cli.guard import secrets

    secrets.from_environment(os.environ)
    return secrets.redactor


def write_report(source: Path, target: Path | None, *, kind: str | None = None) -> None:
    """Build the page of ``source`` and write it to ``target`` (None: beside it; ``-``: stdout)."""
    from runner.report import batch_page, eval_data, eval_page, session_page, write_page

    found, payload = _kind(source) if kind is None else (kind, None)
    redactor = page_redactor()
    if found == "session":
        page = session_page(source, redactor=redactor)
    elif found == "batch":
        page = batch_page(source, redactor=redactor)
    else:
        assert isinstance(payload, dict)
        other = payload.get("against") if isinstance(payload.get("against"), dict) else None
        page = eval_page(eval_data(payload, before=other), redactor=redactor)
    if target is not None and str(target) == "-":
        typer.echo(page, nl=False)
        return
    target = target if target is not None else source.with_suffix(".html")
    write_page(target, page)
    typer.echo(f"wrote {display_path(str(target))} ({len(page.encode('utf-8')):,} bytes)", err=True)


@app.command()
@handles_errors
def report(
    file: Annotated[
        Path,
        typer.Argument(
            metavar="FILE", help="A transcript, a batch output file or runner eval --json's output."
        ),
    ],
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", metavar="PAGE", help="The page (default FILE.html; - stdout)."),
    ] = None,
) -> None:
    """Write the HTML page of a session, a batch or an eval: one file, no network, opens from disk.

    Example: runner report answers.jsonl -o answers.html; runner report .runner/sessions/ID.jsonl
    """
    write_report(file, out)
