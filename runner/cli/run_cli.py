"""``runner run``, ``resume``, ``sessions``, ``test``: the commands that run an agent or read its runs.

Their options are here; the bodies, imported when a command runs, are in ``commands.py``,
``sessions_cmd.py`` and ``testcmd.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from runner.cli.app import TEXT_ARG, RevOption, VarOption, app
from runner.cli.common import at_rev, handles_errors, parse_vars
from runner.cli.otel_switch import OtelOption, start_telemetry
from runner.errors import ConfigError

__all__ = ["resume", "run", "sessions", "test_command"]


@app.command()
@handles_errors
def run(
    agent: Annotated[str, typer.Argument(click_type=TEXT_ARG, metavar="AGENT", help="Agent file or name.")],
    prompt: Annotated[
        list[str] | None,
        typer.Option("--prompt", "-p", metavar="TEXT", help="A prompt to run (repeatable, in order)."),
    ] = None,
    interactive: Annotated[bool, typer.Option("--interactive", "-i", help="Chat after the prompts.")] = False,
    var: VarOption = None,
    model: Annotated[
        str | None, typer.Option("--model", metavar="MODEL", help="Use this model instead of the file's.")
    ] = None,
    agent_name: Annotated[
        str | None, typer.Option("--agent", metavar="NAME", help="Which agent of a team file.")
    ] = None,
    session: Annotated[
        str | None,
        typer.Option("--session", metavar="ID", help="Continue a saved session (same as runner resume)."),
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Allow tools that ask for confirmation.")] = False,
    json_output: Annotated[bool, typer.Option("--json", help="One JSON event per line on stdout.")] = False,
    no_stream: Annotated[bool, typer.Option("--no-stream", help="Ask the model for whole replies.")] = False,
    no_thinking: Annotated[bool, typer.Option("--no-thinking", help="Hide the model's reasoning.")] = False,
    watch: Annotated[
        bool,
        typer.Option(
            "--watch", help="Reload the agent's files when they change (a workflow's: between steps)."
        ),
    ] = False,
    record: Annotated[
        Path | None,
        typer.Option("--record", metavar="FILE", help="Record every model call to this cassette."),
    ] = None,
    replay: Annotated[
        Path | None,
        typer.Option("--replay", metavar="FILE", help="Answer model calls from this cassette (no network)."),
    ] = None,
    replay_loose: Annotated[
        bool,
        typer.Option("--replay-loose", help="With --replay: warn on a changed request instead of failing."),
    ] = False,
    otel: OtelOption = False,
    rev: RevOption = None,
) -> None:
    """Run an agent on prompts (-p), interactively (-i), or both.

    Example: runner run agent.yaml -p "Hello"; runner run agent.yaml -i --watch
    """
    if record is not None and replay is not None:
        raise ConfigError("--record and --replay cannot be used together")
    if replay_loose and replay is None:
        raise ConfigError("--replay-loose only changes --replay: give --replay FILE too")
    start_telemetry(otel)
    from runner.cli.commands import run_agent

    code = run_agent(
        at_rev(agent, rev),
        prompts=prompt or [],
        interactive=interactive,
        variables=parse_vars(var),
        model=model,
        agent_name=agent_name,
        session_id=session,
        yes=yes,
        json_output=json_output,
        stream=False if no_stream else None,
        thinking=not no_thinking,
        record=record,
        replay=replay,
        replay_strict=not replay_loose,
        watch=watch,
    )
    raise typer.Exit(code)


@app.command()
@handles_errors
def resume(
    session_id: Annotated[
        str,
        typer.Argument(click_type=TEXT_ARG, metavar="ID", help="The session id (a unique prefix is enough)."),
    ],
    prompt: Annotated[
        list[str] | None, typer.Option("--prompt", "-p", metavar="TEXT", help="Prompts to add.")
    ] = None,
    interactive: Annotated[bool, typer.Option("--interactive", "-i", help="Chat afterwards.")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Allow tools that ask for confirmation.")] = False,
    json_output: Annotated[bool, typer.Option("--json", help="One JSON event per line on stdout.")] = False,
) -> None:
    """Continue a saved session; if it stopped mid-turn, the next step starts at once.

    Example: runner resume 20261201-1305 -p "and then?"
    """
    from runner.cli.commands import run_agent

    code = run_agent(
        None,
        prompts=prompt or [],
        interactive=interactive,
        variables={},
        model=None,
        agent_name=None,
        session_id=session_id,
        yes=yes,
        json_output=json_output,
        stream=None,
        thinking=True,
    )
    raise typer.Exit(code)


@app.command()
@handles_errors
def sessions(
    action: Annotated[
        str, typer.Argument(click_type=TEXT_ARG, metavar="list|show", help="list, or show")
    ] = "list",
    session_id: Annotated[
        str | None, typer.Argument(click_type=TEXT_ARG, metavar="ID", help="The session to show.")
    ] = None,
    show_all: Annotated[
        bool,
        typer.Option(
            "--all", help="list: every session (no limit); show: every transcript event, bookkeeping too."
        ),
    ] = False,
    limit: Annotated[
        int,
        typer.Option("--limit", metavar="N", min=1, help="list: the N newest sessions (default 20)."),
    ] = 20,
    agent: Annotated[
        str | None, typer.Option("--agent", metavar="NAME", help="list: only the sessions of this agent.")
    ] = None,
    rev: Annotated[
        str | None,
        typer.Option(
            "--rev", metavar="REV", help="list: only sessions whose agent file was at this revision."
        ),
    ] = None,
    html: Annotated[
        bool, typer.Option("--html", help="show: write the session's timeline as one HTML page.")
    ] = False,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", "-o", metavar="FILE", help="show --html: the page's file (default ./ID.html; - stdout)."
        ),
    ] = None,
) -> None:
    """List saved sessions (the newest first, with how each ended), or show one (no ID: the newest).

    Sessions are kept under RUNNER_HOME (default ./.runner), in sessions/ID.jsonl. show prints
    which configuration each turn ran under, and what a reload changed; --html writes a page with
    its timeline that opens from disk (docs/reports.md).

    Example: runner sessions list --agent weather --rev HEAD~1; runner sessions show 20261201-1305 --html
    """
    from runner.cli.sessions_cmd import run_sessions

    run_sessions(
        action,
        session_id,
        show_all=show_all,
        agent=agent,
        rev=rev,
        limit=None if show_all else limit,
        html=html,
        out=out,
    )


@app.command("test")
@handles_errors
def test_command(
    agents: Annotated[
        list[str],
        typer.Argument(
            click_type=TEXT_ARG, metavar="AGENT...", help="Agent files (or names) whose tests: to run."
        ),
    ],
    update: Annotated[
        bool, typer.Option("--update", help="Record the cassettes again against the live model.")
    ] = False,
    rev: RevOption = None,
) -> None:
    """Run each agent's tests: against their cassettes; exit 1 if any case fails.

    Example: runner test agent.yaml; runner test agent.yaml --update (records again, live)
    """
    from runner.cli.commands import runtime_settings
    from runner.cli.testcmd import run_tests

    raise typer.Exit(
        run_tests([at_rev(a, rev) for a in agents], update=update, settings=runtime_settings(None))
    )
