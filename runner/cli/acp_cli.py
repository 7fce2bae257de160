"""``runner acp``: the command's options; its body (the ``runner.acp`` package and the ACP SDK) is
imported when it runs."""

from __future__ import annotations

from typing import Annotated

import typer

from runner.cli.app import TEXT_ARG, app
from runner.cli.common import handles_errors
from runner.cli.otel_switch import OtelOption, start_telemetry

__all__ = ["acp"]


@app.command()
@handles_errors
def acp(
    path: Annotated[
        str,
        typer.Argument(click_type=TEXT_ARG, metavar="PATH", help="The agent file (or team file) to serve."),
    ],
    agent: Annotated[
        str | None,
        typer.Option(
            "--agent", metavar="NAME", help="The team member new sessions start in (default: the first)."
        ),
    ] = None,
    model: Annotated[
        str | None, typer.Option("--model", metavar="ID", help="Use this model instead.")
    ] = None,
    no_transcripts: Annotated[
        bool,
        typer.Option("--no-transcripts", help="Do not write transcripts (sessions cannot be loaded then)."),
    ] = False,
    otel: OtelOption = False,
) -> None:
    """Speak the Agent Client Protocol on stdio, for editors such as Zed (a team's members are modes).

    Example (Zed settings): "agent_servers": {"runner": {"command": "runner", "args": ["acp", "agent.yaml"]}}
    """
    import asyncio
    import dataclasses

    from runner.acp import RunnerAgent, protocol_stdout, serve_stdio
    from runner.cli.guard import note_secrets
    from runner.errors import ConfigError
    from runner.runnable import targets_of
    from runner.runtime.settings import RuntimeSettings

    members = {t.name: t.agent_config for t in targets_of(path) if not t.is_workflow}
    if agent is not None and agent not in members:
        raise ConfigError(
            f"--agent {agent}: no such agent in {path}", hint="agents here: " + ", ".join(members)
        )
    for config in members.values():
        note_secrets(config)
    settings = RuntimeSettings.from_environment(model_override=model)
    if no_transcripts:
        settings = dataclasses.replace(settings, write_transcript=False)
    start_telemetry(otel)
    protocol = protocol_stdout()
    server = RunnerAgent(members, default=agent or next(iter(members)), settings=settings)
    asyncio.run(serve_stdio(server, protocol_fd=protocol))
