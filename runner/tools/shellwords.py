"""What a shell command line runs, as permission rules judge it (SPEC 7, ``permissions``).

``read_command_line`` parses a line the way ``/bin/sh`` does (:mod:`runner.tools.shellparse`) and
looks into what its commands hand to another program to run:

- **wrappers** (``sudo``, ``env``, ``prlimit``, ``setpriv``, ``nohup``, ``timeout``, ``xargs``,
  ``eatmydata`` ... the reviewed list in :mod:`runner.tools.shellwrappers`, and ``find -exec``): a
  deny or ask glob is also tried on every tail of such a command (``sudo -u root rm x`` is tried as
  ``rm x`` too), since the wrapped command may start after options whose values cannot be told
  from it;
- **scripts**: ``sh -c '...'`` (any shell, also behind wrappers), ``eval``, ``trap``, ``watch``,
  ``su -c``, ``flock -c``, ``ssh HOST CMD`` (and ``-o ProxyCommand=``), ``tmux new CMD``, ``sg GROUP
  CMD``: a literal script is parsed and its commands listed (``in_script``); a script the rules
  cannot read (``sh file``, ``sh`` reading stdin, ``eval "$x"``, ``. file``, ``source``, ``env -S``,
  ``parallel``) makes the command ``opaque``, and a wrapper whose words cannot be read with
  certainty (``gdb``, ``screen -X``, an unknown ``ssh`` option, a tmux command not on the list) is
  opaque and keeps every allow glob away from the line (``allow_blocker``).

The texts a glob is tried on are built from words after quote removal (``"rm"``, ``r''m`` and
``\\rm`` are all ``rm``), joined by single spaces, without redirections; expansions are holes
(:mod:`runner.tools.holeglob`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from runner.tools.shellparse import HOLE, Hole, Part, SimpleCommand, Word, parse_line
from runner.tools.shellwrappers import WRAPPERS, Scripts, command_scripts

__all__ = ["Command", "CommandLine", "allow_text", "deny_texts", "is_neutral", "read_command_line"]

Text = tuple[Part, ...]

_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash", "posh", "fish", "rbash"})
_C_OPTION = frozenset({"su", "runuser", "flock", "script"})
_FIND_EXEC = frozenset({"-exec", "-execdir", "-ok", "-okdir"})
_OPAQUE = {
    ".": "'.' runs a file",
    "source": "source runs a file",
    "parallel": "parallel runs a shell",
    "sem": "sem (GNU parallel) runs a shell",
    "alias": "an alias changes what later commands mean",
}
_FILLERS = frozenset({"xargs", "parallel"})  # they may fill a script in from their input (-I)
_NEUTRAL = frozenset({"true", "false", ":"})
_LOCAL_VARIABLE = re.compile(r"[a-z][a-z0-9]*")
_MAX_SCRIPT_DEPTH = 4
_MAX_TAILS = 64


@dataclass(frozen=True)
class Command:
    """One simple command of a line: where it is and whether it runs code no rule can read."""

    simple: SimpleCommand
    #: Part of a script the line hands to a shell (``sh -c``, ``eval`` ...): judged by deny and ask.
    in_script: bool = False
    #: Why the command runs code the rules cannot see (deny and ask rules then match it), or None.
    opaque: str | None = None
    #: Word indexes where the command a wrapper runs may start (0: the command itself).
    starts: tuple[int, ...] = (0,)
    #: Why no allow glob may vouch for the line this command is in (a wrapper it cannot read), or None.
    allow_blocker: str | None = None


@dataclass(frozen=True)
class CommandLine:
    """Every command a line runs, and what keeps an allow rule from vouching for it."""

    commands: tuple[Command, ...]
    #: Why the line cannot be judged at all (deny and ask match it; allow cannot), or None.
    uncertain: str | None = None
    #: Why no allow rule can vouch for the line even if each command matches, or None.
    allow_blocker: str | None = None


def read_command_line(line: str, *, depth: int = 0) -> CommandLine:
    """The commands of ``line`` and its scripts (see the module docstring); never raises."""
    parsed = parse_line(line)
    commands: list[Command] = []
    for simple in parsed.commands:
        commands.extend(_with_scripts(simple, depth=depth))
    blocker = None
    if parsed.writes is not None:
        blocker = f"it writes to {parsed.writes} through a redirection"
    for name in parsed.loop_variables:
        if not _LOCAL_VARIABLE.fullmatch(name):
            blocker = blocker or f"a for loop sets the variable {name}"
    return CommandLine(tuple(commands), parsed.uncertain, blocker)


def _with_scripts(simple: SimpleCommand, *, depth: int) -> list[Command]:
    """The command and the commands of the scripts it hands to a shell."""
    words = simple.words
    starts = _starts(words)
    opaque: str | None = None
    blocker: str | None = None
    if len(starts) > _MAX_TAILS:  # every tail is a text to try: keep the work linear
        starts, opaque = (0,), "a wrapped command too long to judge"
    inner: list[Command] = []
    filled = False
    for start in starts:
        found = _scripts(words, start)
        opaque = opaque or found.opaque
        blocker = blocker or found.allow_blocker
        if found.scripts and (filled or any("{}" in script for script in found.scripts)):
            opaque = opaque or "a script filled in from input (xargs, find)"
        filled = filled or program_name(words[start]) in _FILLERS
        for script in found.scripts:
            if depth >= _MAX_SCRIPT_DEPTH:
                opaque = opaque or "scripts nested too deeply"
                break
            line = read_command_line(script, depth=depth + 1)
            opaque = opaque or (f"its script has {line.uncertain}" if line.uncertain else None)
            inner.extend(replace(command, in_script=True) for command in line.commands)
    return [Command(simple, opaque=opaque, starts=starts, allow_blocker=blocker), *inner]


def _starts(words: Sequence[Word]) -> tuple[int, ...]:
    if not words:
        return ()
    starts = {0}
    for index in range(len(words)):
        if index not in starts:
            continue
        name = program_name(words[index])
        if name is None or name in WRAPPERS:  # an unknown program may be a wrapper too
            starts.update(range(index + 1, len(words)))
            break
        if name == "find":
            starts.update(i + 1 for i in range(index, len(words) - 1) if words[i].literal in _FIND_EXEC)
    return tuple(sorted(starts))


def _scripts(words: Sequence[Word], start: int) -> Scripts:
    """The literal scripts the command starting at ``start`` hands to a shell, and why it is opaque."""
    name = program_name(words[start])
    rest = words[start + 1 :]
    special = command_scripts(name, rest)
    if special is not None:
        return special
    scripts, why = _shell_scripts(name, rest)
    return Scripts(tuple(scripts), opaque=why)


def _shell_scripts(name: str | None, rest: Sequence[Word]) -> tuple[list[str], str | None]:
    if name in _OPAQUE:
        return [], _OPAQUE[name]
    if name in _SHELLS or name in _C_OPTION:
        for index, word in enumerate(rest):
            text = word.literal
            if text is None:
                return [], f"{name} gets an argument the rules cannot read"
            if _is_c_option(text):
                if index + 1 >= len(rest):
                    return [], f"{name} -c gets its script from elsewhere"
                return _literal_words(name, rest[index + 1 :])
        if name in ("flock", "script"):
            return [], None  # without -c they run a command: a wrapper
        return [], f"{name} runs a script the rules cannot read"
    if name in ("eval", "watch"):
        scripts, why = _literal_words(name, rest)
        return ([" ".join(scripts)] if scripts else []), why  # both run their words joined by spaces
    if name == "trap":
        actions = rest[1:] if rest and rest[0].literal == "--" else rest
        return _literal_words(name, actions[:1])
    if name == "env" and any(_splits_string(word) for word in rest):
        return [], "env -S splits a string into a command"
    return [], None


def _is_c_option(text: str) -> bool:
    return (
        text in ("--command", "-command")
        or text.startswith("--command=")
        or (text.startswith("-") and not text.startswith("--") and "c" in text[1:])
    )


def _literal_words(name: str | None, words: Sequence[Word]) -> tuple[list[str], str | None]:
    texts = [word.literal for word in words]
    if any(text is None for text in texts):
        return [], f"{name} gets a script the rules cannot read"
    return [text for text in texts if text is not None], None


def _splits_string(word: Word) -> bool:
    text = word.literal
    if text is None:
        return True
    return text.startswith("--s") or (text.startswith("-") and not text.startswith("--") and "S" in text)


def program_name(word: Word) -> str | None:
    """The basename of the program a word names, or None when an expansion decides it."""
    return basename(word).literal


def basename(word: Word) -> Word:
    """The word without its directory (``/bin/rm`` → ``rm``); the word itself when it has none."""
    for index in range(len(word.parts) - 1, -1, -1):
        part = word.parts[index]
        if isinstance(part, str) and "/" in part:
            tail = part.rsplit("/", 1)[1]
            parts = ((tail,) if tail else ()) + word.parts[index + 1 :]
            return Word(parts or ("",), quoted=word.quoted)
    return word


def join(words: Sequence[Word]) -> Text:
    """Words joined by single spaces; a word that may vanish is a hole that also covers its spaces."""
    parts: list[Part] = []
    previous_vanishes = True
    for word in words:
        if word.may_vanish:
            parts.append(HOLE)
            previous_vanishes = True
            continue
        if parts and not previous_vanishes:
            parts.append(" ")
        parts.extend(word.parts)
        previous_vanishes = False
    return tuple(parts)


def allow_text(command: Command) -> Text:
    """The text an allow glob must match: assignments and words as written, without redirections."""
    return join(command.simple.assignments + command.simple.words)


def deny_texts(command: Command) -> list[Text]:
    """The texts a deny or ask glob is tried on: with and without assignments, every wrapped tail,
    and each of those with the program's basename."""
    assignments, words = command.simple.assignments, command.simple.words
    if not words:
        return [join(assignments)] if assignments else []
    texts = [join(assignments + words)] if assignments else []
    for start in command.starts:
        tail = words[start:]
        texts.append(join(tail))
        name = basename(tail[0])
        if name is not tail[0]:
            texts.append(join((name, *tail[1:])))
    return texts


def is_neutral(command: Command) -> bool:
    """``true``, ``false``, ``:`` and a bare redirection: nothing runs that an allow rule must name."""
    simple = command.simple
    return not simple.assignments and (not simple.words or simple.words[0].literal in _NEUTRAL)


def has_holes(text: Text) -> bool:
    """Whether a text has parts only the running shell knows."""
    return any(isinstance(part, Hole) for part in text)
