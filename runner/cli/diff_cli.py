"""``runner diff [REV1] [REV2] AGENT``: what changed in an agent's resolved configuration."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from runner.cli.app import TEXT_ARG, app
from runner.cli.common import handles_errors
from runner.errors import ConfigError

__all__ = ["diff"]


@app.command()
@handles_errors
def diff(
    args: Annotated[
        list[str],
        typer.Argument(
            click_type=TEXT_ARG,
            metavar="[REV1] [REV2] AGENT",
            help="The agent, after up to two revisions (default: HEAD against the work tree).",
        ),
    ],
    json_output: Annotated[bool, typer.Option("--json", help="The whole diff as JSON.")] = False,
    exit_code: Annotated[
        bool,
        typer.Option("--exit-code", help="Exit 1 when the configurations differ, 0 when they are the same."),
    ] = False,
    agent_name: Annotated[
        str | None,
        typer.Option(
            "--agent",
            metavar="NAME",
            help="Only this agent of a team file (default: every agent and the workflow).",
        ),
    ] = None,
    import_code: Annotated[
        bool,
        typer.Option(
            "--import-code",
            help="Import the Python tools and output models of both revisions for exact schemas. "
            "This runs their code: use it only on revisions you trust.",
        ),
    ] = False,
) -> None:
    """Semantic diff of an agent file at two revisions (a team file: every agent and the workflow).

    Prompts, tools and their schemas, model, limits, hooks, permissions, output schema.
    Runs no code of the agent: Python tools are read from their source (--import-code imports them).

    Example: runner diff agent.yaml (HEAD vs the work tree); runner diff main HEAD agent.yaml --json
    """
    from runner.agentdiff import diff_agent, format_file_diff

    if len(args) > 3:
        raise ConfigError("runner diff takes at most two revisions and an agent: [REV1] [REV2] AGENT")
    *revs, ref = args
    old_rev, new_rev = [*revs, None, None][:2] if revs else ("HEAD", None)
    result = diff_agent(ref, old_rev, new_rev, agent=agent_name, run_code=import_code)
    if json_output:
        typer.echo(json.dumps(result.to_json(), indent=2, ensure_ascii=False))
    else:
        typer.echo(format_file_diff(result), nl=False)
    raise typer.Exit(1 if exit_code and not result.same else 0)
