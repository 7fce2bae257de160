"""What a shell command line runs, as far as permission rules need to know (SPEC 7, ``permissions``).

``shell(command=git *)`` must not allow ``git status; rm -rf /``, and ``shell(command=rm *)`` must deny
``ls && rm -rf /``. ``parse_command`` splits a command line into its simple commands (at ``;``, ``&``,
``&&``, ``|``, ``||``, parentheses and newlines, quotes respected, via :mod:`shlex`), each given as its
words joined by single spaces without leading ``NAME=value`` assignments and redirections. It also says
whether the line contains what no glob can vouch for: command or process substitution (``$(...)``,
backticks, ``<(...)``), output redirected to a file, a ``sh -c`` script (whose commands are added to
the list), or quotes that never close.

This is a guard rail for rules, not a sandbox: a command can still do anything its program allows
(``python -c ...``, ``find -exec``). ``deny_candidates`` also looks behind common wrappers (``sudo``,
``env``, ``nohup`` ...), so that a deny rule sees the command they run.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from dataclasses import dataclass

__all__ = ["ParsedCommand", "deny_candidates", "parse_command"]

_OPERATOR_CHARS = ";&|()<>\n"
_SUBSTITUTION = re.compile(r"\$\(|`|<\(|>\(")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_FD = re.compile(r"^\d+$")
_HARMLESS_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr"})
_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "fish"})
_MAX_DEPTH = 3
_WRAPPERS = frozenset({"sudo", "doas", "env", "command", "builtin", "exec", "nohup", "nice", "time", "xargs"})


@dataclass(frozen=True)
class ParsedCommand:
    """The simple commands of a command line (each a tuple of words), and whether it is ``opaque``."""

    commands: tuple[tuple[str, ...], ...]
    opaque: bool

    def texts(self) -> list[str]:
        """Each simple command as its words joined by single spaces."""
        return [" ".join(words) for words in self.commands]


def parse_command(line: str, *, depth: int = 0) -> ParsedCommand:
    """Split ``line`` into simple commands (see the module docstring)."""
    opaque = bool(_SUBSTITUTION.search(line))
    lexer = shlex.shlex(line, posix=True, punctuation_chars=_OPERATOR_CHARS)
    lexer.whitespace = " \t\r"
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        tokens = list(lexer)
    except ValueError:  # no closing quotation, or a trailing escape
        return ParsedCommand(commands=(tuple(line.split()),) if line.strip() else (), opaque=True)
    commands: list[tuple[str, ...]] = []
    words: list[str] = []
    redirect: str | None = None
    for token in tokens:
        if token and all(char in _OPERATOR_CHARS for char in token):
            if token[0] in "<>" or token.startswith("&>"):
                if words and _FD.match(words[-1]):
                    words.pop()  # the "2" of "2>&1"
                redirect = token
                continue
            _close(words, commands)
            continue
        if redirect is not None:
            writes = ">" in redirect
            to_fd = redirect.endswith("&") or redirect == ">&"
            if writes and not (to_fd and _FD.match(token)) and token not in _HARMLESS_TARGETS:
                opaque = True
            redirect = None
            continue
        words.append(token)
    _close(words, commands)
    if redirect is not None:  # a redirection without a target
        opaque = True
    for words_ in list(commands):
        inner = _shell_script(words_)
        if inner is not None:  # sh -c '...': the script's commands count too, and globs cannot vouch for it
            opaque = True
            if depth < _MAX_DEPTH:
                commands.extend(parse_command(inner, depth=depth + 1).commands)
    return ParsedCommand(commands=tuple(commands), opaque=opaque)


def _shell_script(words: tuple[str, ...]) -> str | None:
    """The script of ``sh -c SCRIPT`` (also behind wrappers), else None."""
    start = 0
    while start < len(words) and (words[start] in _WRAPPERS or words[start].startswith("-")):
        start += 1
    if start >= len(words) or posixpath.basename(words[start]) not in _SHELLS:
        return None
    rest = words[start + 1 :]
    for index, word in enumerate(rest):
        if word.startswith("-") and "c" in word[1:] and index + 1 < len(rest):
            return rest[index + 1]
    return None


def deny_candidates(words: tuple[str, ...]) -> list[str]:
    """The texts a deny (or ask) rule is tried on for one simple command.

    The command itself and, when it starts with a wrapper (``sudo -u root rm -rf /``), every tail of it,
    since the wrapped command may start after options whose values cannot be told apart from it.
    """
    texts = [" ".join(words)]
    if words and words[0] in _WRAPPERS:
        texts.extend(" ".join(words[start:]) for start in range(1, len(words)))
    return texts


def _close(words: list[str], commands: list[tuple[str, ...]]) -> None:
    while words and _ASSIGNMENT.match(words[0]):
        words.pop(0)
    if words:
        commands.append(tuple(words))
    words.clear()
