"""A conservative reader of POSIX ``sh`` command lines: the simple commands ``/bin/sh -c LINE`` runs.

``parse_line`` follows the shell's own grammar (POSIX 2.3 token recognition and 2.10 grammar) for the
constructs it knows: ``;`` ``&`` ``&&`` ``||`` ``|`` and newlines, ``!``, subshells ``( )``, groups
``{ }``, ``if``/``elif``/``else``, ``while``/``until``, ``for``, comments, every kind of quoting,
``$NAME`` / ``${NAME...}`` expansions, command substitution (``$(...)`` and backticks, whose commands
count like any other) and redirections. Every simple command it finds, at any depth, is listed.

What it cannot read with certainty makes the whole line ``uncertain`` (and rules treat such a line as
matching every ``deny`` and ``ask`` and no ``allow``): here-documents, ``case``, function
definitions, ``alias``, arithmetic, ``$'...'`` quoting, process substitution, ``#`` inside a word,
unclosed quotes, bash-only syntax (``[[``, ``((``, ``|&``, ``function``, ``select``, ``coproc``) and
anything the grammar does not expect. A word's value that only the running shell knows (parameter
expansion, substitution output, tilde, pathname and brace expansion) is kept as a :data:`HOLE`.
"""

from __future__ import annotations

from dataclasses import dataclass

from runner.tools.shellscan import WordScanner
from runner.tools.shellsyntax import (
    HOLE,
    Hole,
    ParsedLine,
    Part,
    Redirect,
    SimpleCommand,
    Uncertain,
    Word,
    is_name,
)

__all__ = ["HOLE", "Hole", "ParsedLine", "Part", "Redirect", "SimpleCommand", "Word", "parse_line"]


@dataclass(frozen=True)
class _Token:
    kind: str  # "word", "op", "io", "newline", "eof"
    value: str = ""
    word: Word | None = None
    pos: int = 0


_OPERATORS = ("<<-", "&&", "||", ";;", "<<", ">>", "<&", ">&", "<>", ">|", ";", "&", "|", "(", ")", "<", ">")
_BASH_OPERATORS = ("&>>", "&>", *_OPERATORS)
_REDIRECTS = frozenset({"<", ">", ">>", ">|", "<>", "<&", ">&", "<<", "<<-", "&>", "&>>"})
_CLOSERS = frozenset({"then", "else", "elif", "fi", "do", "done", "esac", "}"})
_UNSUPPORTED = {
    "case": "a case statement",
    "function": "a function definition",
    "select": "a select loop",
    "[[": "a [[ ... ]] test",
    "coproc": "a coprocess",
    "alias": "an alias (it changes what later commands mean)",
}
_MAX_NESTING = 40
_MAX_LENGTH = 100_000


def parse_line(line: str, *, bash_redirects: bool | None = None) -> ParsedLine:
    """The simple commands of ``line`` (see the module docstring); never raises.

    ``a &> f`` means a redirection to bash and "``a &`` then ``> f``" to dash: unless told which,
    a line with ``&>`` is read both ways and the commands of both count.
    """
    if bash_redirects is None and "&>" in line:
        dash, bash = parse_line(line, bash_redirects=False), parse_line(line, bash_redirects=True)
        return ParsedLine(
            commands=dash.commands + bash.commands,
            uncertain=dash.uncertain or bash.uncertain,
            writes=dash.writes or bash.writes,
            loop_variables=dash.loop_variables + bash.loop_variables,
        )
    if len(line) > _MAX_LENGTH:
        return ParsedLine(commands=(), uncertain="a command line too long to judge")
    parser = _Parser(line, depth=0, bash=bool(bash_redirects))
    try:
        parser.program()
    except Uncertain as exc:
        return ParsedLine(tuple(parser.commands), exc.reason, parser.writes, tuple(parser.loop_variables))
    except RecursionError:
        return ParsedLine(tuple(parser.commands), "a command line nested too deeply", parser.writes)
    return ParsedLine(tuple(parser.commands), None, parser.writes, tuple(parser.loop_variables))


class _Parser:
    """Recursive descent over one string; command substitutions are parsed by child parsers."""

    def __init__(self, text: str, *, depth: int, bash: bool, start: int = 0) -> None:
        self.text = text
        self.pos = start
        self.depth = depth
        self.bash = bash
        self.nesting = 0
        self.commands: list[SimpleCommand] = []
        self.writes: str | None = None
        self.loop_variables: list[str] = []
        self._peeked: _Token | None = None

    # -- grammar ----------------------------------------------------------------------------------

    def program(self) -> None:
        self.compound_list(frozenset(), allow_empty=True)
        token = self.peek()
        if token.kind != "eof":
            raise Uncertain(f"an unexpected {_show(token)}")

    def compound_list(self, closers: frozenset[str], *, allow_empty: bool = False) -> None:
        self.skip_newlines()
        count = 0
        while True:
            token = self.peek()
            if token.kind == "eof" or _closes(token, closers):
                break
            self.and_or()
            count += 1
            token = self.peek()
            if token.kind == "op" and token.value in (";", "&"):
                self.take()
                self.skip_newlines()
            elif token.kind == "newline":
                self.skip_newlines()
            else:
                break
        if count == 0 and not allow_empty:
            raise Uncertain("an empty list of commands")

    def and_or(self) -> None:
        self.pipeline()
        while self.peek().kind == "op" and self.peek().value in ("&&", "||"):
            self.take()
            self.skip_newlines()
            self.pipeline()

    def pipeline(self) -> None:
        token = self.peek()
        if token.kind == "word" and token.word is not None and token.word.plain == "!":
            self.take()
        self.command()
        while self.peek().kind == "op" and self.peek().value == "|":
            self.take()
            self.skip_newlines()
            self.command()

    def command(self) -> None:
        self.nesting += 1
        if self.nesting > _MAX_NESTING:
            raise Uncertain("a command line nested too deeply")
        try:
            self._command()
        finally:
            self.nesting -= 1

    def _command(self) -> None:
        token = self.peek()
        if token.kind == "op" and token.value == "(":
            if self.text.startswith("((", token.pos):
                raise Uncertain("a (( ... )) arithmetic command")
            self.take()
            self.compound_list(frozenset({")"}))
            self.expect_op(")")
            self.compound_redirects()
            return
        plain = token.word.plain if token.kind == "word" and token.word is not None else None
        if plain == "{":
            self.take()
            self.compound_list(frozenset({"}"}))
            self.expect_word("}")
        elif plain == "if":
            self.if_clause()
        elif plain in ("while", "until"):
            self.take()
            self.compound_list(frozenset({"do"}))
            self.do_group()
        elif plain == "for":
            self.for_loop()
        elif plain in _UNSUPPORTED:
            raise Uncertain(_UNSUPPORTED[plain])
        elif plain in _CLOSERS or plain == "!":
            raise Uncertain(f"an unexpected '{plain}'")
        else:
            self.simple_command()
            return
        self.compound_redirects()

    def if_clause(self) -> None:
        self.take()
        self.compound_list(frozenset({"then"}))
        self.expect_word("then")
        self.compound_list(frozenset({"elif", "else", "fi"}))
        while self.peek_plain() == "elif":
            self.take()
            self.compound_list(frozenset({"then"}))
            self.expect_word("then")
            self.compound_list(frozenset({"elif", "else", "fi"}))
        if self.peek_plain() == "else":
            self.take()
            self.compound_list(frozenset({"fi"}))
        self.expect_word("fi")

    def for_loop(self) -> None:
        self.take()
        name = self.take()
        if name.kind != "word" or name.word is None or not is_name(name.word.plain):
            raise Uncertain("a for loop without a variable name")
        self.loop_variables.append(str(name.word.plain))
        if self.peek().kind == "op" and self.peek().value == ";":
            self.take()
        self.skip_newlines()
        if self.peek_plain() == "in":
            self.take()
            while self.peek().kind == "word":
                self.take()
            separator = self.take()
            if not (separator.kind == "newline" or (separator.kind == "op" and separator.value == ";")):
                raise Uncertain(f"an unexpected {_show(separator)} in a for loop")
            self.skip_newlines()
        self.do_group()

    def do_group(self) -> None:
        self.expect_word("do")
        self.compound_list(frozenset({"done"}))
        self.expect_word("done")

    def compound_redirects(self) -> None:
        while self.at_redirect():
            self.redirect()
        if self.peek().kind == "word" and not _closes(self.peek(), _CLOSERS):
            raise Uncertain(f"an unexpected {_show(self.peek())} after a compound command")

    def simple_command(self) -> None:
        assignments: list[Word] = []
        words: list[Word] = []
        redirects: list[Redirect] = []
        while True:
            if self.at_redirect():
                redirects.append(self.redirect())
                continue
            token = self.peek()
            if token.kind != "word" or token.word is None:
                break
            self.take()
            if not words and token.word.assign is not None:
                assignments.append(token.word)
            else:
                words.append(token.word)
        token = self.peek()
        if token.kind == "op" and token.value == "(":
            raise Uncertain("a function definition" if words else "an unexpected '('")
        if not (assignments or words or redirects):
            raise Uncertain(f"a missing command before {_show(token)}")
        if words and words[0].literal in _UNSUPPORTED:
            raise Uncertain(_UNSUPPORTED[str(words[0].literal)])
        self.commands.append(SimpleCommand(tuple(assignments), tuple(words), tuple(redirects)))

    def at_redirect(self) -> bool:
        token = self.peek()
        return token.kind == "io" or (token.kind == "op" and token.value in _REDIRECTS)

    def redirect(self) -> Redirect:
        token = self.take()
        if token.kind == "io":
            token = self.take()
        if token.value in ("<<", "<<-"):
            raise Uncertain("a here-document")
        target = self.take()
        if target.kind != "word" or target.word is None:
            raise Uncertain("a redirection without a target")
        op = ">" if token.value in ("&>", "&>>") else token.value
        redirect = Redirect(op, target.word)
        if redirect.writes and self.writes is None:
            self.writes = target.word.literal or "a file named by an expansion"
        return redirect

    # -- tokens -----------------------------------------------------------------------------------

    def peek(self) -> _Token:
        if self._peeked is None:
            self._peeked = self._scan()
        return self._peeked

    def peek_plain(self) -> str | None:
        token = self.peek()
        return token.word.plain if token.kind == "word" and token.word is not None else None

    def take(self) -> _Token:
        token = self.peek()
        self._peeked = None
        return token

    def skip_newlines(self) -> None:
        while self.peek().kind == "newline":
            self.take()

    def expect_op(self, op: str) -> None:
        token = self.take()
        if token.kind != "op" or token.value != op:
            raise Uncertain(f"a missing '{op}' (found {_show(token)})")

    def expect_word(self, word: str) -> None:
        token = self.take()
        if token.kind != "word" or token.word is None or token.word.plain != word:
            raise Uncertain(f"a missing '{word}' (found {_show(token)})")

    def _scan(self) -> _Token:
        text, n = self.text, len(self.text)
        while self.pos < n:
            char = text[self.pos]
            if char in " \t":
                self.pos += 1
            elif text.startswith("\\\n", self.pos):
                self.pos += 2
            elif char == "#":
                end = text.find("\n", self.pos)
                self.pos = n if end < 0 else end
            else:
                break
        if self.pos >= n:
            return _Token("eof")
        char = text[self.pos]
        if char == "\n":
            self.pos += 1
            return _Token("newline", "\n")
        if char in ";&|()<>":
            start = self.pos
            return _Token("op", self._operator(), pos=start)
        word = WordScanner(self).scan()
        if word.plain is not None and word.plain.isdigit() and text[self.pos : self.pos + 1] in ("<", ">"):
            return _Token("io", word.plain)
        return _Token("word", word.plain or "", word)

    def _operator(self) -> str:
        text = self.text
        for bad, what in (("|&", "a |& pipe"), (";&", "a ;& case terminator"), (";;", "a ;; outside case")):
            if text.startswith(bad, self.pos):
                raise Uncertain(what)
        for op in _BASH_OPERATORS if self.bash else _OPERATORS:
            if text.startswith(op, self.pos):
                self.pos += len(op)
                if len(op) == 1 and text.startswith("\\\n", self.pos):
                    raise Uncertain("an operator split by a line continuation")
                return op
        raise AssertionError("unreachable: not an operator")  # pragma: no cover

    def substitution(self) -> None:
        """Parse ``$( ... )`` from just after ``$(``; its commands join this line's."""
        if self.depth >= _MAX_NESTING // 4:
            raise Uncertain("command substitutions nested too deeply")
        child = _Parser(self.text, depth=self.depth + 1, bash=self.bash, start=self.pos)
        try:
            child.compound_list(frozenset({")"}), allow_empty=True)
            child.expect_op(")")
        finally:
            self._adopt(child)
        self.pos = child.pos

    def script(self, text: str) -> None:
        """Parse a backtick substitution's text; its commands join this line's."""
        if self.depth >= _MAX_NESTING // 4:
            raise Uncertain("command substitutions nested too deeply")
        child = _Parser(text, depth=self.depth + 1, bash=self.bash)
        try:
            child.program()
        finally:
            self._adopt(child)

    def _adopt(self, child: _Parser) -> None:
        self.commands.extend(child.commands)
        self.loop_variables.extend(child.loop_variables)
        if self.writes is None:
            self.writes = child.writes


def _closes(token: _Token, closers: frozenset[str]) -> bool:
    if token.kind == "op":
        return token.value == ")" and ")" in closers
    return token.kind == "word" and token.word is not None and token.word.plain in closers


def _show(token: _Token) -> str:
    if token.kind == "eof":
        return "end of the line"
    if token.kind == "newline":
        return "newline"
    return f"'{token.value}'"
