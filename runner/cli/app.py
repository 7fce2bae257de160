"""The typer root of ``runner`` and the options its commands share.

Registration modules (``*_cli.py``) import ``app`` from here and add their commands to it; this
module imports none of them (the entry point, ``runner/cli/main.py``, imports them all).
"""

from __future__ import annotations

from typing import Annotated

import typer

from runner.cli.common import _state
from runner.cli.helpfmt import CommandsInOrder, PlainText, plain_argument_help
from runner.version import __version__

__all__ = ["TEXT_ARG", "RevOption", "VarOption", "app"]

plain_argument_help()
#: The type of the text arguments: help shows ``AGENT``, not ``AGENT <str>``.
TEXT_ARG = PlainText()

app = typer.Typer(
    name="runner",
    cls=CommandsInOrder,
    help="A declarative agent runner: an agent is a YAML file; one generic loop runs it.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"runner {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show Python tracebacks for errors.")] = False,
) -> None:
    """A declarative agent runner: an agent is a YAML file; one generic loop runs it."""
    if debug:
        _state["debug"] = True


RevOption = Annotated[
    str | None,
    typer.Option(
        "--rev",
        metavar="REV",
        help="The agent as it was at this git revision (read from git; work tree untouched).",
    ),
]


VarOption = Annotated[
    list[str] | None,
    typer.Option("--var", metavar="NAME=VALUE", help="Set a template variable: NAME=VALUE (repeatable)."),
]
