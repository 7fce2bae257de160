"""``runner batch``: the command's options; its body is in ``runner/cli/batch_cmd.py`` (imported when run)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from runner.cli.app import TEXT_ARG, RevOption, VarOption, app
from runner.cli.common import at_rev, handles_errors, parse_vars
from runner.cli.otel_switch import OtelOption, start_telemetry

__all__ = ["batch"]


@app.command()
@handles_errors
def batch(
    agent: Annotated[
        str,
        typer.Argument(
            click_type=TEXT_ARG,
            metavar="AGENT",
            help="Agent file or name; a team file with a workflow: runs the workflow per item.",
        ),
    ],
    inputs: Annotated[
        str,
        typer.Argument(
            click_type=TEXT_ARG,
            metavar="INPUTS.jsonl",
            help='One item per line: a JSON string, or {"id", "input", "vars"}; - reads standard input.',
        ),
    ],
    out: Annotated[Path, typer.Option("--out", "-o", metavar="OUT.jsonl", help="Where the results go.")],
    concurrency: Annotated[int, typer.Option("--concurrency", "-c", metavar="N", help="Items at once.")] = 8,
    backend: Annotated[
        str, typer.Option("--backend", metavar="local|ray", help="Where items run.")
    ] = "local",
    address: Annotated[
        str | None, typer.Option("--address", metavar="ADDR", help="The Ray cluster to connect to.")
    ] = None,
    agent_name: Annotated[
        str | None,
        typer.Option(
            "--agent", metavar="NAME", help="Run this agent of a team file per item, not its workflow."
        ),
    ] = None,
    var: VarOption = None,
    max_cost_usd: Annotated[
        float | None, typer.Option("--max-cost-usd", metavar="X", help="Start no item once the batch cost X.")
    ] = None,
    max_tokens: Annotated[
        int | None,
        typer.Option("--max-tokens", metavar="N", help="Start no item once the batch used N tokens."),
    ] = None,
    rpm: Annotated[
        int | None, typer.Option("--rpm", metavar="N", help="Model requests per minute, all items.")
    ] = None,
    tpm: Annotated[
        int | None, typer.Option("--tpm", metavar="N", help="Tokens per minute, all items.")
    ] = None,
    retries: Annotated[
        int,
        typer.Option(
            "--retries", metavar="N", help="Run an item again after a transient failure (429, 5xx)."
        ),
    ] = 0,
    limit: Annotated[int | None, typer.Option("--limit", metavar="N", help="Only the first N items.")] = None,
    unordered: Annotated[
        bool, typer.Option("--unordered", help="Leave the lines in the order items finished.")
    ] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Reuse an output file of another agent or input (its lines go).")
    ] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Allow tools that ask for confirmation.")] = False,
    json_output: Annotated[bool, typer.Option("--json", help="Print the summary as JSON on stdout.")] = False,
    otel: OtelOption = False,
    rev: RevOption = None,
    html: Annotated[
        Path | None,
        typer.Option(
            "--html", metavar="FILE", help="Then write a page of OUT's items (runner report OUT also)."
        ),
    ] = None,
) -> None:
    """Run an agent, or a team file's workflow, over many inputs, resumable: one result line per item.

    Exit 0 all ok, 1 some failed, 3 a budget stopped it, 130 Ctrl+C (rerun the same command to resume).

    Example: runner batch agent.yaml tickets.jsonl -o answers.jsonl --concurrency 16 --max-cost-usd 5
    """
    start_telemetry(otel)
    from runner.batch import BatchLimits
    from runner.cli.batch_cmd import BatchCommand, run_batch_command
    from runner.cli.commands import runtime_settings

    command = BatchCommand(
        agent=at_rev(agent, rev),
        inputs=inputs,
        out=out,
        limits=BatchLimits(
            concurrency=concurrency,
            max_cost_usd=max_cost_usd,
            max_tokens=max_tokens,
            rpm=rpm,
            tpm=tpm,
            retries=retries,
            limit=limit,
        ),
        variables=parse_vars(var),
        agent_name=agent_name,
        backend=backend,
        address=address,
        ordered=not unordered,
        force=force,
        yes=yes,
        json_output=json_output,
    )
    code = run_batch_command(command, runtime_settings(None))
    if html is not None:
        from runner.cli.report_cli import write_report

        write_report(out, html, kind="batch")
    raise typer.Exit(code)
