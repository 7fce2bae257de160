"""``runner audit AGENT``: what the file will run or reach, listed without running any of it."""

from __future__ import annotations

import json
import os
from typing import Annotated

import typer

from runner.cli.app import TEXT_ARG, RevOption, app
from runner.cli.common import at_rev, display_path, handles_errors

__all__ = ["audit"]


@app.command()
@handles_errors
def audit(
    agent: Annotated[str, typer.Argument(click_type=TEXT_ARG, metavar="AGENT", help="Agent file or name.")],
    json_output: Annotated[
        bool, typer.Option("--json", help="The listing as JSON (its shape: docs/audit.md).")
    ] = False,
    agent_name: Annotated[
        str | None, typer.Option("--agent", metavar="NAME", help="Which agent of a team file.")
    ] = None,
    rev: RevOption = None,
) -> None:
    """List what the agent will run or reach (modules, commands, URLs, variables...), running none of it.

    Nothing is imported, started or fetched. The groups and the --json shape: docs/audit.md.

    Example: runner audit agent.yaml; runner audit agent.yaml --rev main --json
    """
    from runner.agentfile import find_agent
    from runner.audit import audit_agent, audit_context, listing, load_for_audit
    from runner.cli.guard import note_secrets, secrets

    env = dict(os.environ)
    config = load_for_audit(find_agent(at_rev(agent, rev)), agent=agent_name, env=env)
    note_secrets(config)  # a secret that reached an argument or a URL is never printed
    report = audit_agent(config, audit_context(env))
    # a variable the file uses as a URL's password is a secret whatever its name
    secrets.add(env[v.name] for a in report.walk() for v in a.variables if v.secret and v.name in env)
    if json_output:
        typer.echo(json.dumps(report.to_json(), indent=2, ensure_ascii=False))
        return
    for line in listing(report, lambda path: display_path(path)):
        typer.echo(line)
