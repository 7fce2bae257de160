"""The body of ``runner mcp``: load the agents, then answer MCP on stdin/stdout until stdin closes.

stdout is the protocol's: everything this command says goes to stderr.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import typer

from runner.errors import ConfigError
from runner.text import counted

__all__ = ["run_mcp"]


def _say(line: str) -> None:
    typer.echo(line, err=True)


def run_mcp(paths: list[str], *, watch: bool, transcripts: bool) -> int:
    """Serve the agents under ``paths`` as MCP tools over stdio; the exit code."""
    from dataclasses import replace

    from runner.cli.commands import runtime_settings
    from runner.cli.common import display_path
    from runner.cli.guard import note_secrets
    from runner.serve.catalog import load_catalog
    from runner.serve.mcp.stdio import serve_stdio
    from runner.serve.reload import CatalogHolder

    if not paths:
        if not Path("agents").is_dir():
            raise ConfigError("nothing to serve: give agent files or folders", hint="runner mcp agents/")
        paths = ["agents"]
    roots = [Path(p) for p in paths]
    catalog = load_catalog(roots)
    for served in catalog.agents.values():
        note_secrets(served.config)
    for workflow in catalog.workflows.values():
        for config in workflow.configs.values():
            note_secrets(config)
    for line in catalog.problems():
        _say(f"warning: {line}")
    if (skipped := catalog.note(lambda path: display_path(str(path)))) is not None:
        _say(f"note: {skipped}")
    if not catalog.agents and not catalog.workflows:
        raise ConfigError(f"no valid agent files under {', '.join(paths)}")
    settings = replace(runtime_settings(None), write_transcript=transcripts)
    holder = CatalogHolder(roots, catalog, settings=settings, report=_say)
    tools = ", ".join(catalog.names())
    _say(f"runner mcp: {counted(len(catalog.names()), 'tool')} over stdio: {tools}")
    try:
        asyncio.run(serve_stdio(holder, watch=watch, report=_say))
    except KeyboardInterrupt:
        pass
    return 0
