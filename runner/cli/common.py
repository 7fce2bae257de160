"""What every command of the ``runner`` CLI shares: error printing, paths as shown, ``--var``, ``--rev``.

A leaf of ``runner.cli``: it imports no command and nothing of the typer root (``runner/cli/app.py``),
so command bodies and registration modules alike import it.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import typer

from runner.errors import ConfigError, ConfigErrors, RunnerError

__all__ = [
    "at_rev",
    "debug_enabled",
    "display_path",
    "echo_error",
    "handles_errors",
    "parse_vars",
    "read_line",
]

F = TypeVar("F", bound=Callable[..., Any])

#: ``--debug`` (or ``RUNNER_DEBUG=1``): set by the root callback and the entry point.
_state = {"debug": os.environ.get("RUNNER_DEBUG", "").lower() in ("1", "true", "yes")}


def debug_enabled() -> bool:
    """Whether tracebacks should be shown (``--debug`` or ``RUNNER_DEBUG=1``)."""
    return _state["debug"]


def echo_error(error: RunnerError) -> None:
    """Print one error (each of several) to stderr, in FILE:LINE:COL: PATH: message form."""
    errors = list(error) if isinstance(error, ConfigErrors) else [error]
    for e in errors:
        text = str(e)
        if isinstance(e, ConfigError) and e.file:
            text = text.replace(e.file, display_path(e.file), 1)
        typer.echo(f"error: {text}" if not (isinstance(e, ConfigError) and e.file) else text, err=True)


def display_path(file: str) -> str:
    """A path relative to the current directory when it is inside it; ``path@REV`` at a revision."""
    from runner.agentfile.revisions import revision_of

    revision = revision_of(Path(file))
    if revision is not None:
        return f"{revision.path}@{revision.rev}"
    try:
        return str(Path(file).resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return file


def handles_errors(fn: F) -> F:
    """Turn ``RunnerError`` into one clean message and its exit code; others into exit 1."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort):
            raise
        except BrokenPipeError:  # the reader went away (`runner render ... | head`): stop quietly
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            raise typer.Exit(0) from None
        except RunnerError as exc:
            if debug_enabled():
                raise
            echo_error(exc)
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:
            typer.echo("interrupted", err=True)
            raise typer.Exit(130) from None
        except Exception as exc:
            if debug_enabled():
                raise
            typer.echo(f"internal error: {type(exc).__name__}: {exc}", err=True)
            typer.echo("run again with --debug (or RUNNER_DEBUG=1) to see the traceback", err=True)
            raise typer.Exit(1) from None

    return wrapper  # type: ignore[return-value]


def parse_vars(items: list[str] | None) -> dict[str, Any]:
    """``--var K=V`` options as a mapping; values read as YAML scalars (numbers, booleans)."""
    from runner.agentfile.interpolate import retype

    result: dict[str, Any] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip().isidentifier():
            raise ConfigError(f"--var expects NAME=VALUE, got '{item}'")
        result[key.strip()] = retype(value)
    return result


def at_rev(ref: str, rev: str | None) -> str:
    """AGENT at ``--rev REV`` (or a ``git+URL#REV:path`` reference): its file in the revision's tree."""
    if rev is None and not ref.startswith("git+"):
        return ref
    from runner.agentfile.files import agent_at

    return str(agent_at(ref, rev=rev))


def read_line(prompt: str) -> str:
    """A line the user types. The prompt goes to stderr unless both ends are a terminal: stdout
    carries only the answers (or ``--json``)."""
    if sys.stdin.isatty() and sys.stdout.isatty():
        return input(prompt)
    sys.stderr.write(prompt)
    sys.stderr.flush()
    return input()
