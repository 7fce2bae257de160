"""``fnmatch`` globs over texts with holes: could a glob match, or must it match, whatever fills them.

A command's text may contain parts only the running shell knows (``$X``, ``$(...)``, ``*.py``): a
:data:`~runner.tools.shellparse.HOLE` stands for any string. A deny rule asks ``could_match`` (some
filling matches the glob), an allow rule ``must_match`` (every filling does). Without holes both agree
with :func:`fnmatch.fnmatchcase`.
"""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Sequence

from runner.tools.shellparse import Hole, Part

__all__ = ["could_match", "must_match", "text_of"]

_STAR = "*"
_ANY = "?"
_Token = str | re.Pattern[str]  # "*", "?", a literal character (as "=c"), or a character class


@functools.lru_cache(maxsize=512)
def _tokens(glob: str) -> tuple[_Token, ...]:
    """The glob as tokens, read the way ``fnmatch.translate`` reads it."""
    tokens: list[_Token] = []
    i, n = 0, len(glob)
    while i < n:
        char = glob[i]
        i += 1
        if char == "*":
            if not tokens or tokens[-1] != _STAR:
                tokens.append(_STAR)
        elif char == "?":
            tokens.append(_ANY)
        elif char == "[":
            j = i
            if j < n and glob[j] == "!":
                j += 1
            if j < n and glob[j] == "]":
                j += 1
            while j < n and glob[j] != "]":
                j += 1
            if j >= n:
                tokens.append("=[")
            else:
                tokens.append(re.compile(fnmatch.translate(glob[i - 1 : j + 1])))
                i = j + 1
        else:
            tokens.append("=" + char)
    return tuple(tokens)


def _closure(tokens: tuple[_Token, ...], states: set[int]) -> set[int]:
    """``states`` with every state a ``*`` can skip to (it also matches the empty string)."""
    todo = list(states)
    while todo:
        state = todo.pop()
        if state < len(tokens) and tokens[state] == _STAR and state + 1 not in states:
            states.add(state + 1)
            todo.append(state + 1)
    return states


def _step(tokens: tuple[_Token, ...], states: set[int], char: str) -> set[int]:
    after: set[int] = set()
    for state in states:
        if state >= len(tokens):
            continue
        token = tokens[state]
        if token == _STAR:
            after.add(state)
        elif isinstance(token, re.Pattern):
            if token.match(char):
                after.add(state + 1)
        elif token == _ANY or token[1:] == char:
            after.add(state + 1)
    return _closure(tokens, after)


def _run(tokens: tuple[_Token, ...], states: set[int], text: str) -> set[int]:
    for char in text:
        states = _step(tokens, states, char)
        if not states:
            break
    return states


def could_match(glob: str, text: Sequence[Part]) -> bool:
    """Whether some filling of the holes in ``text`` matches ``glob``."""
    tokens = _tokens(glob)
    states = _closure(tokens, {0})
    for part in text:
        if isinstance(part, Hole):
            # Any string: every later state is reachable (each token can take some character).
            states = set(range(min(states), len(tokens) + 1))
        else:
            states = _run(tokens, states, part)
        if not states:
            return False
    return len(tokens) in states


def must_match(glob: str, text: Sequence[Part]) -> bool:
    """Whether every filling of the holes in ``text`` matches ``glob``.

    Sound but not complete: after the first hole the rest of the text counts as anything, so the glob
    must accept every text that starts the way this one does up to that hole (a trailing ``*``).
    """
    tokens = _tokens(glob)
    prefix: list[str] = []
    for part in text:
        if isinstance(part, Hole):
            states = _run(tokens, _closure(tokens, {0}), "".join(prefix))
            return any(
                state < len(tokens) and all(token == _STAR for token in tokens[state:]) for state in states
            )
        prefix.append(part)
    return fnmatch.fnmatchcase("".join(prefix), glob)


def text_of(text: Sequence[Part]) -> str:
    """The text with each hole shown as ``…`` (for messages and tests)."""
    return "".join("…" if isinstance(part, Hole) else part for part in text)
