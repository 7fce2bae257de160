"""The values the sh reader produces: words with holes, redirections, simple commands, parsed lines."""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "HOLE",
    "META",
    "Hole",
    "ParsedLine",
    "Part",
    "Redirect",
    "SimpleCommand",
    "Uncertain",
    "Word",
    "is_name",
]

#: Characters that end a word outside quotes.
META = frozenset(" \t\n;&|()<>")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_HARMLESS_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr"})


class Hole:
    """A piece of a word whose text only the running shell knows (any string, also empty)."""

    _instance: Hole | None = None

    def __new__(cls) -> Hole:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "HOLE"


HOLE = Hole()
Part = str | Hole


@dataclass(frozen=True)
class Word:
    """One word after quote removal: literal text and holes. ``plain`` is its source when it had no
    quoting, escapes or expansions (only such a word can be a reserved word)."""

    parts: tuple[Part, ...]
    quoted: bool = False
    plain: str | None = None
    assign: str | None = None  # NAME, when the word is an assignment NAME=value

    @property
    def literal(self) -> str | None:
        """The word's text when it has no holes."""
        if any(isinstance(part, Hole) for part in self.parts):
            return None
        return "".join(part for part in self.parts if isinstance(part, str))

    @property
    def may_vanish(self) -> bool:
        """Whether the shell may drop the word altogether (an unquoted expansion that is empty)."""
        return not self.quoted and not any(isinstance(part, str) and part for part in self.parts)


@dataclass(frozen=True)
class Redirect:
    """``[fd]op target``."""

    op: str
    target: Word

    @property
    def writes(self) -> bool:
        """Whether this redirection may create or change a file."""
        target = self.target.literal
        if self.op in (">&", "<&"):
            return self.op == ">&" and not (target is not None and re.fullmatch(r"\d+|-", target))
        if self.op == "<":
            return False
        return target not in _HARMLESS_TARGETS


@dataclass(frozen=True)
class SimpleCommand:
    """Leading assignments, the words (program and arguments) and the redirections of one command."""

    assignments: tuple[Word, ...]
    words: tuple[Word, ...]
    redirects: tuple[Redirect, ...]


@dataclass(frozen=True)
class ParsedLine:
    """Every simple command of a line; ``uncertain`` says why the line cannot be judged (else None)."""

    commands: tuple[SimpleCommand, ...]
    uncertain: str | None = None
    #: A redirection target the line writes to (the first one), or None.
    writes: str | None = None
    #: The variables ``for`` loops assign.
    loop_variables: tuple[str, ...] = ()


class Uncertain(Exception):
    """The line has something the reader cannot judge with certainty; ``reason`` says what."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def is_name(text: str | None) -> bool:
    """Whether ``text`` is a shell variable name."""
    return text is not None and _NAME.fullmatch(text) is not None
