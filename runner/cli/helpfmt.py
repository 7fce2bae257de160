"""How ``--help`` writes arguments, and ``--debug`` anywhere on the command line.

typer writes a required argument as ``{AGENT}`` in the usage line and gives every argument a type
column (``<str>``); the help reads as usage lines are written elsewhere: ``runner run [OPTIONS] AGENT``.
``--debug`` is an option of ``runner`` itself, but users put it after the subcommand too
(``runner run agent.yaml --debug``): ``debug_anywhere`` takes it from there.
"""

from __future__ import annotations

from typing import Any

from typer import core as _typer_core

#: The click typer runs on (typer 0.28 vendors its own; older ones use click itself).
_click: Any = getattr(_typer_core, "_click", None) or __import__("click")

__all__ = ["COMMAND_ORDER", "CommandsInOrder", "PlainText", "debug_anywhere", "plain_argument_help"]

#: The order ``runner --help`` lists the commands in: the order a new agent meets them.
COMMAND_ORDER = (
    *("init", "validate", "render", "tools", "run", "test", "resume", "sessions"),
    *("eval", "batch", "report", "serve", "mcp", "acp", "audit", "diff", "schema"),
)

#: Options whose next word is their value (``-p --debug`` is a prompt, not the flag).
_TAKES_VALUE = frozenset(
    {"-p", "--prompt", "--input", "--var", "--model", "--agent", "--session", "--record", "--replay"}
    | {"--host", "--port", "--allow-origin", "--name"}
)


def plain_argument_help() -> None:
    """Write arguments as ``AGENT`` in usage lines, without a type column."""
    core = _typer_core
    original = core.TyperArgument.make_metavar
    if getattr(original, "_runner_plain", False):
        return

    def make_metavar(self: Any, ctx: Any, *, usage: bool = False) -> str:
        text = str(original(self, ctx, usage=usage))
        if text.startswith("{") and text.endswith("}"):
            return text[1:-1]
        return text

    make_metavar._runner_plain = True  # type: ignore[attr-defined]
    core.TyperArgument.make_metavar = make_metavar  # type: ignore[method-assign]


class CommandsInOrder(_typer_core.TyperGroup):
    """The ``runner`` group: commands listed in ``COMMAND_ORDER``, each described in one paragraph.

    typer lists commands in the order they were registered (the command modules register
    themselves on import), and its rich help keeps the line breaks of a docstring's first
    paragraph, so a two-line summary was broken mid-line in the commands table.
    """

    def list_commands(self, ctx: Any) -> list[str]:
        rank = {name: position for position, name in enumerate(COMMAND_ORDER)}
        return sorted(super().list_commands(ctx), key=lambda name: rank.get(name, len(rank)))

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if command is not None and command.short_help is None and command.help:
            first = command.help.strip().split("\n\n", 1)[0]
            command.short_help = " ".join(first.split())
        return command


class PlainText(_click.types.ParamType):  # type: ignore[misc]
    """``click_type`` of the command's text arguments: a string, with no ``<str>`` column in help."""

    name = "text"

    def get_metavar(self, param: Any, ctx: Any = None) -> str:
        return ""

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        return value


def debug_anywhere(argv: list[str]) -> bool:
    """Remove ``--debug`` given after the subcommand from ``argv``; whether it was there."""
    found = False
    for position in range(len(argv) - 1, 1, -1):
        if argv[position] == "--debug" and argv[position - 1] not in _TAKES_VALUE:
            del argv[position]
            found = True
    return found
