"""``runner serve``: the command's options; its body is in ``runner/cli/serve_cmd.py`` (imported when run)."""

from __future__ import annotations

from typing import Annotated

import typer

from runner.cli.app import TEXT_ARG, RevOption, app
from runner.cli.common import at_rev, handles_errors
from runner.cli.otel_switch import OtelOption, start_telemetry

__all__ = ["serve"]


@app.command()
@handles_errors
def serve(
    paths: Annotated[
        list[str] | None,
        typer.Argument(
            click_type=TEXT_ARG,
            metavar="PATH...",
            help="Agent files or folders (searched recursively); default ./agents.",
        ),
    ] = None,
    host: Annotated[
        str | None,
        typer.Option("--host", metavar="HOST", help="Interface to bind (RUNNER_SERVE_HOST, 127.0.0.1)."),
    ] = None,
    port: Annotated[
        int | None, typer.Option("--port", metavar="PORT", help="Port (RUNNER_SERVE_PORT, 8000).")
    ] = None,
    watch: Annotated[
        bool, typer.Option("--watch", help="Reload agent files when they change; running requests finish.")
    ] = False,
    no_transcripts: Annotated[
        bool, typer.Option("--no-transcripts", help="Do not write a transcript per request.")
    ] = False,
    allow_origin: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-origin",
            metavar="ORIGIN",
            help="A browser origin to answer, with CORS (repeatable; RUNNER_SERVE_ALLOWED_ORIGINS).",
        ),
    ] = None,
    plain: Annotated[
        bool,
        typer.Option(
            "--plain",
            help="Answer with the text only, without the <details> blocks that show tool calls "
            "(for clients that do not render them; RUNNER_SERVE_TOOL_DETAILS=false).",
        ),
    ] = False,
    otel: OtelOption = False,
    rev: RevOption = None,
) -> None:
    """Serve agents as models behind an OpenAI-compatible API (Open WebUI, the openai SDK, ...).

    Example: runner serve agents/ --port 8000 --watch
    """
    start_telemetry(otel)
    from runner.cli.serve_cmd import run_serve

    raise typer.Exit(
        run_serve(
            [at_rev(p, rev) for p in paths or ([] if rev is None else ["agents"])],
            host=host,
            port=port,
            watch=watch,
            transcripts=not no_transcripts,
            allow_origins=allow_origin or [],
            tool_details=False if plain else None,
        )
    )
