"""``runner mcp``: the command's options; its body is in ``runner/serve/mcp/stdio.py`` (imported when run)."""

from __future__ import annotations

from typing import Annotated

import typer

from runner.cli.app import TEXT_ARG, app
from runner.cli.common import handles_errors
from runner.cli.otel_switch import OtelOption, start_telemetry

__all__ = ["mcp"]


@app.command()
@handles_errors
def mcp(
    paths: Annotated[
        list[str] | None,
        typer.Argument(
            click_type=TEXT_ARG,
            metavar="PATH...",
            help="Agent files or folders (searched recursively); default ./agents.",
        ),
    ] = None,
    watch: Annotated[
        bool, typer.Option("--watch", help="Reload agent files when they change; running calls finish.")
    ] = False,
    no_transcripts: Annotated[
        bool,
        typer.Option(
            "--no-transcripts", help="Do not write a transcript per call (session_id cannot continue)."
        ),
    ] = False,
    otel: OtelOption = False,
) -> None:
    """Serve agents as MCP tools over stdio (Claude Desktop, Claude Code, Codex, Cursor, ...).

    Example config: {"command": "runner", "args": ["mcp", "agents/"]}
    """
    start_telemetry(otel)
    from runner.cli.mcp_cmd import run_mcp

    raise typer.Exit(run_mcp(paths or [], watch=watch, transcripts=not no_transcripts))
