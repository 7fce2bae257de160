"""``runner init``, ``validate``, ``schema``, ``render``, ``tools``: the commands that read an agent file.

None runs it. Their options are here; the bodies, imported when a command runs, are in
``commands.py`` and ``scaffold.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from runner.cli.app import TEXT_ARG, RevOption, VarOption, app
from runner.cli.common import at_rev, display_path, handles_errors, parse_vars
from runner.errors import ConfigError

__all__ = ["init", "render", "schema", "tools", "validate"]


@app.command()
@handles_errors
def validate(
    agents: Annotated[
        list[str],
        typer.Argument(click_type=TEXT_ARG, metavar="AGENT...", help="Agent files (or names) to check."),
    ],
    json_output: Annotated[bool, typer.Option("--json", help="Print the errors as JSON.")] = False,
    explain: Annotated[
        bool, typer.Option("--explain", help="Show which file of an extends chain set each value.")
    ] = False,
    var: VarOption = None,
    rev: RevOption = None,
) -> None:
    """Check agent files against the schema and what the schema cannot see. Exit 2 if any is invalid.

    Example: runner validate agent.yaml; runner validate agents/ --json
    """
    from runner.cli.commands import run_validate

    code = run_validate(
        [at_rev(a, rev) for a in agents], json_output=json_output, explain=explain, variables=parse_vars(var)
    )
    raise typer.Exit(code)


@app.command()
@handles_errors
def schema(
    name: Annotated[
        str,
        typer.Argument(
            click_type=TEXT_ARG, metavar="NAME", help="Which schema: agent, transcript or cassette."
        ),
    ] = "agent",
) -> None:
    """Print a JSON Schema (the agent file's by default).

    Example: runner schema > agent.schema.json; runner schema transcript
    """
    from runner.resources import data_dir, schema_path, schema_text

    if "/" in name or not schema_path(name).is_file():
        names = sorted(p.name.removesuffix(".schema.json") for p in data_dir("schemas").glob("*.schema.json"))
        raise ConfigError(f"no schema named '{name}'", hint="the schemas are: " + ", ".join(names))
    sys.stdout.write(schema_text(name))


@app.command()
@handles_errors
def render(
    agent: Annotated[str, typer.Argument(click_type=TEXT_ARG, metavar="AGENT", help="Agent file or name.")],
    input: Annotated[
        str, typer.Option("--input", "-p", metavar="TEXT", help="The sample user input to render.")
    ] = "Hello!",
    var: VarOption = None,
    agent_name: Annotated[
        str | None, typer.Option("--agent", metavar="NAME", help="Which agent of a team file.")
    ] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print the request as JSON.")] = False,
    rev: RevOption = None,
) -> None:
    """Show the first request (system prompt, tools, user message) without calling a model.

    Example: runner render agent.yaml -p "What is the weather?" --var units=imperial
    """
    from runner.cli.commands import run_render

    run_render(
        at_rev(agent, rev),
        input=input,
        variables=parse_vars(var),
        agent_name=agent_name,
        json_output=json_output,
    )


@app.command()
@handles_errors
def init(
    directory: Annotated[Path, typer.Argument(metavar="DIR", help="Where to create the agent.")] = Path("."),
    name: Annotated[str | None, typer.Option("--name", metavar="NAME", help="The agent's name.")] = None,
) -> None:
    """Scaffold an agent, a tool module and a test that validate and pass.

    Example: runner init my-agent
    """
    import shlex

    from runner.cli.scaffold import scaffold

    created = scaffold(directory, name=name)
    for path in created:
        typer.echo(f"created {shlex.quote(display_path(str(path)))}")
    agent_file = shlex.quote(display_path(str(created[0])))  # a command line to copy: quoted
    typer.echo(f"next: runner validate {agent_file} && runner render {agent_file}")
    typer.echo(f"then, with a model key: runner test {agent_file} --update   (records the test's cassette;")
    typer.echo(f"      afterwards `runner test {agent_file}` replays it offline, e.g. in CI)")


@app.command()
@handles_errors
def tools(
    agent: Annotated[str, typer.Argument(click_type=TEXT_ARG, metavar="AGENT", help="Agent file or name.")],
    json_output: Annotated[
        bool, typer.Option("--json", help="The exact tool specs sent to the model.")
    ] = False,
    agent_name: Annotated[
        str | None, typer.Option("--agent", metavar="NAME", help="Which agent of a team file.")
    ] = None,
    check: Annotated[
        bool,
        typer.Option("--check", help="Open each source alone and report it: ok (tools, time) or why not."),
    ] = False,
    rev: RevOption = None,
) -> None:
    """The resolved tool table: name, source, description; renames and failed sources.

    Example: runner tools agent.yaml; runner tools agent.yaml --check
    """
    from runner.cli.commands import run_tools

    raise typer.Exit(
        run_tools(at_rev(agent, rev), json_output=json_output, agent_name=agent_name, check=check)
    )
