"""Body of ``runner serve`` (kept out of main.py: starlette and uvicorn load only here)."""

from __future__ import annotations

import contextlib
import gc
import os
import socket
from pathlib import Path

import typer

from runner.errors import ConfigError, RunnerError
from runner.text import counted

__all__ = ["GRACEFUL_SHUTDOWN_S", "run_serve"]

#: How long a stopping server lets streams and runs finish before closing them.
GRACEFUL_SHUTDOWN_S = 5


def _bind(host: str, port: int) -> socket.socket:
    """The listening socket, so that a port in use is one clear error (and port 0 a known port)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        raise RunnerError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.listen(2048)
    sock.setblocking(False)
    return sock


def run_serve(
    paths: list[str],
    *,
    host: str | None,
    port: int | None,
    watch: bool,
    transcripts: bool,
    allow_origins: list[str] | None = None,
    tool_details: bool | None = None,
) -> int:
    """Load the agents under ``paths`` and serve them until Ctrl+C; the exit code."""
    from dataclasses import replace

    import uvicorn

    from runner.cli.commands import runtime_settings
    from runner.env_settings import load_settings
    from runner.serve.app import create_app, is_loopback
    from runner.serve.catalog import load_catalog
    from runner.serve.reload import CatalogHolder
    from runner.serve.server import server_config

    settings = load_settings()
    runtime = replace(runtime_settings(None), write_transcript=transcripts)
    host = host or settings.serve_host
    port = settings.serve_port if port is None else port
    keys = tuple(k for k in settings.serve_api_keys if k)
    if not keys and not is_loopback(host):
        raise ConfigError(
            f"refusing to serve on {host} without API keys: anyone who reaches it could run your agents",
            hint="set RUNNER_SERVE_API_KEYS=key1,key2 (clients send Authorization: Bearer KEY), "
            "or bind 127.0.0.1",
        )
    if not paths:
        if not Path("agents").is_dir():
            raise ConfigError("nothing to serve: give agent files or folders", hint="runner serve agents/")
        paths = ["agents"]
    roots = [Path(p) for p in paths]
    catalog = load_catalog(roots)
    from runner.cli.guard import note_secrets

    for served in catalog.agents.values():
        note_secrets(served.config)  # the server's own log lines are redacted too
    for workflow in catalog.workflows.values():
        for config in workflow.configs.values():
            note_secrets(config)
    for line in catalog.problems():
        typer.echo(f"warning: {line}", err=True)
    from runner.cli.common import display_path

    if (skipped := catalog.note(lambda path: display_path(str(path)))) is not None:
        typer.echo(f"note: {skipped}", err=True)
    if not catalog.agents:
        raise ConfigError(f"no valid agent files under {', '.join(paths)}")
    app = create_app(
        CatalogHolder(roots, catalog),
        settings=runtime,
        api_keys=keys,
        max_body_bytes=settings.serve_max_body_bytes,
        body_timeout_s=settings.serve_body_timeout_s,
        max_messages=settings.serve_max_messages,
        allowed_origins=[*settings.serve_allowed_origins, *(allow_origins or [])],
        allowed_hosts=settings.serve_allowed_hosts,
        tool_details=settings.serve_tool_details if tool_details is None else tool_details,
        watch=watch,
        report=lambda line: typer.echo(line, err=True),
    )
    sock = _bind(host, port)
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    names = ", ".join(sorted(catalog.agents))
    typer.echo(
        f"serving {counted(len(catalog.agents), 'agent')} at http://{shown}:{bound}/v1: {names}", err=True
    )
    doors = [path for door in app.state.doors for path in door.paths[:1]]
    if doors:  # the other protocols on the same port (docs/serving.md)
        typer.echo(f"also at http://{shown}:{bound}: " + ", ".join(doors), err=True)
    for name, workflow in sorted(catalog.workflows.items()):  # a workflow runs its team's agents
        typer.echo(f"serving workflow {name} ({workflow.path.name}): {workflow.description()}", err=True)
    from runner.audit import summary_of

    for name in sorted(catalog.agents):  # what each agent can execute (runner audit has the details)
        typer.echo(summary_of(catalog.agents[name].config, os.environ, name=name), err=True)
    if not keys:
        typer.echo("no API keys set: only this machine can connect (RUNNER_SERVE_API_KEYS)", err=True)
    if watch:
        typer.echo("watching the agent files; changes apply to new requests", err=True)
    server = uvicorn.Server(
        server_config(
            app,
            header_timeout_s=settings.serve_header_timeout_s,
            max_connections=settings.serve_max_connections,
            log_level=settings.log_level.lower(),
            timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
            access_log=False,
        )
    )
    # What is loaded by now (modules, the catalog, the app) lives as long as the server: kept out
    # of the collector's passes, a full pass walks only what requests made (~100 ms -> a few ms;
    # a request holding a long conversation allocates enough to bring one on every few hundred).
    gc.collect()
    gc.freeze()
    # uvicorn shuts down gracefully, then re-raises Ctrl+C: a normal stop
    with sock, contextlib.suppress(KeyboardInterrupt):
        server.run(sockets=[sock])
    typer.echo("stopped", err=True)
    return 0
