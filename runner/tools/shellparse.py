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

import re
from dataclasses import dataclass

__all__ = ["HOLE", "Hole", "ParsedLine", "Part", "Redirect", "SimpleCommand", "Word", "parse_line"]


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


class _Uncertain(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class _Token:
    kind: str  # "word", "op", "io", "newline", "eof"
    value: str = ""
    word: Word | None = None
    pos: int = 0


_HARMLESS_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr"})
_META = frozenset(" \t\n;&|()<>")
_OPERATORS = ("<<-", "&&", "||", ";;", "<<", ">>", "<&", ">&", "<>", ">|", ";", "&", "|", "(", ")", "<", ">")
_BASH_OPERATORS = ("&>>", "&>", *_OPERATORS)
_REDIRECTS = frozenset({"<", ">", ">>", ">|", "<>", "<&", ">&", "<<", "<<-", "&>", "&>>"})
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PARAM = re.compile(
    r"\$\{(?:#?(?:[A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#?$!-])"
    r"|(?:[A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#?$!-])(?:(?::?[-+?]|%%?|##?)[^$`'\"\\{}]*)?)\}"
)
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
    except _Uncertain as exc:
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
            raise _Uncertain(f"an unexpected {_show(token)}")

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
            raise _Uncertain("an empty list of commands")

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
            raise _Uncertain("a command line nested too deeply")
        try:
            self._command()
        finally:
            self.nesting -= 1

    def _command(self) -> None:
        token = self.peek()
        if token.kind == "op" and token.value == "(":
            if self.text.startswith("((", token.pos):
                raise _Uncertain("a (( ... )) arithmetic command")
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
            raise _Uncertain(_UNSUPPORTED[plain])
        elif plain in _CLOSERS or plain == "!":
            raise _Uncertain(f"an unexpected '{plain}'")
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
        if name.kind != "word" or name.word is None or not _is_name(name.word.plain):
            raise _Uncertain("a for loop without a variable name")
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
                raise _Uncertain(f"an unexpected {_show(separator)} in a for loop")
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
            raise _Uncertain(f"an unexpected {_show(self.peek())} after a compound command")

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
            raise _Uncertain("a function definition" if words else "an unexpected '('")
        if not (assignments or words or redirects):
            raise _Uncertain(f"a missing command before {_show(token)}")
        if words and words[0].literal in _UNSUPPORTED:
            raise _Uncertain(_UNSUPPORTED[str(words[0].literal)])
        self.commands.append(SimpleCommand(tuple(assignments), tuple(words), tuple(redirects)))

    def at_redirect(self) -> bool:
        token = self.peek()
        return token.kind == "io" or (token.kind == "op" and token.value in _REDIRECTS)

    def redirect(self) -> Redirect:
        token = self.take()
        if token.kind == "io":
            token = self.take()
        if token.value in ("<<", "<<-"):
            raise _Uncertain("a here-document")
        target = self.take()
        if target.kind != "word" or target.word is None:
            raise _Uncertain("a redirection without a target")
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
            raise _Uncertain(f"a missing '{op}' (found {_show(token)})")

    def expect_word(self, word: str) -> None:
        token = self.take()
        if token.kind != "word" or token.word is None or token.word.plain != word:
            raise _Uncertain(f"a missing '{word}' (found {_show(token)})")

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
        word = _WordScanner(self).scan()
        if word.plain is not None and word.plain.isdigit() and text[self.pos : self.pos + 1] in ("<", ">"):
            return _Token("io", word.plain)
        return _Token("word", word.plain or "", word)

    def _operator(self) -> str:
        text = self.text
        for bad, what in (("|&", "a |& pipe"), (";&", "a ;& case terminator"), (";;", "a ;; outside case")):
            if text.startswith(bad, self.pos):
                raise _Uncertain(what)
        for op in _BASH_OPERATORS if self.bash else _OPERATORS:
            if text.startswith(op, self.pos):
                self.pos += len(op)
                if len(op) == 1 and text.startswith("\\\n", self.pos):
                    raise _Uncertain("an operator split by a line continuation")
                return op
        raise AssertionError("unreachable: not an operator")  # pragma: no cover

    def substitution(self) -> None:
        """Parse ``$( ... )`` from just after ``$(``; its commands join this line's."""
        if self.depth >= _MAX_NESTING // 4:
            raise _Uncertain("command substitutions nested too deeply")
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
            raise _Uncertain("command substitutions nested too deeply")
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


class _WordScanner:
    """Reads one word from the parser's position: quote removal, expansions kept as holes."""

    def __init__(self, parser: _Parser) -> None:
        self.parser = parser
        self.text = parser.text
        self.start = parser.pos
        self.parts: list[Part] = []
        self.buf: list[str] = []
        self.quoted = False
        self.plain = True
        self.glob = False
        self.bracket = self.brace = self.brace_items = False
        self.assign: str | None = None

    def scan(self) -> Word:
        text, n, p = self.text, len(self.text), self.parser
        while p.pos < n and text[p.pos] not in _META:
            char = text[p.pos]
            if char == "\\":
                self.escape()
            elif char == "'":
                end = text.find("'", p.pos + 1)
                if end < 0:
                    raise _Uncertain("a quote that is never closed")
                self.buf.append(text[p.pos + 1 : end])
                self.quote()
                p.pos = end + 1
            elif char == '"':
                self.double_quoted()
            elif char == "$":
                self.dollar(in_quotes=False)
            elif char == "`":
                self.backtick(in_quotes=False)
            elif char == "#":
                raise _Uncertain("a '#' inside a word")
            elif char == "~" and (p.pos == self.start or self.assign is not None):
                self.tilde()
            else:
                if char == "=" and self.assign is None and self.plain and _is_name("".join(self.buf)):
                    self.assign = "".join(self.buf)
                self.note_glob(char)
                self.buf.append(char)
                p.pos += 1
        return self.finish()

    def note_glob(self, char: str) -> None:
        """Track unquoted ``* ? [...]`` (pathname) and ``{a,b}`` / ``{1..3}`` (bash brace) expansion."""
        if char in "*?" or (char == "]" and self.bracket) or (char == "}" and self.brace_items):
            self.glob = True
        elif char == "[":
            self.bracket = True
        elif char == "{":
            self.brace = True
        elif self.brace and (char == "," or (char == "." and self.buf[-1:] == ["."])):
            self.brace_items = True

    def finish(self) -> Word:
        self.flush()
        plain = "".join(part for part in self.parts if isinstance(part, str)) if self.plain else None
        if self.glob:  # pathname or brace expansion: any words, or none
            return Word((HOLE,), quoted=False, plain=None, assign=self.assign)
        return Word(tuple(self.parts), quoted=self.quoted, plain=plain, assign=self.assign)

    def flush(self) -> None:
        if self.buf:
            self.parts.append("".join(self.buf))
            self.buf.clear()

    def hole(self) -> None:
        self.flush()
        self.plain = False
        if not self.parts or self.parts[-1] is not HOLE:
            self.parts.append(HOLE)

    def quote(self) -> None:
        self.quoted = True
        self.plain = False

    def escape(self) -> None:
        p = self.parser
        if p.pos + 1 >= len(self.text):
            raise _Uncertain("a backslash at the end of the line")
        char = self.text[p.pos + 1]
        p.pos += 2
        if char != "\n":  # backslash-newline joins lines
            self.buf.append(char)
            self.quote()

    def tilde(self) -> None:
        p = self.parser
        while p.pos < len(self.text) and self.text[p.pos] not in _META and self.text[p.pos] not in "/:":
            if self.text[p.pos] in "\\'\"$`":
                raise _Uncertain("a quoted or expanded ~user")
            p.pos += 1
        self.hole()

    def double_quoted(self) -> None:
        p, text = self.parser, self.text
        self.quote()
        p.pos += 1
        while True:
            if p.pos >= len(text):
                raise _Uncertain("a quote that is never closed")
            char = text[p.pos]
            if char == '"':
                p.pos += 1
                return
            if char == "\\" and p.pos + 1 < len(text) and text[p.pos + 1] in '$`"\\\n':
                if text[p.pos + 1] != "\n":
                    self.buf.append(text[p.pos + 1])
                p.pos += 2
            elif char == "$":
                self.dollar(in_quotes=True)
            elif char == "`":
                self.backtick(in_quotes=True)
            else:
                self.buf.append(char)
                p.pos += 1

    def dollar(self, *, in_quotes: bool) -> None:
        p, text = self.parser, self.text
        after = text[p.pos + 1 : p.pos + 2]
        if text.startswith("\\\n", p.pos + 1) or text.startswith("\\\n", p.pos + 2):
            raise _Uncertain("an expansion split by a line continuation")
        if after == "(":
            if text.startswith("((", p.pos + 1):
                raise _Uncertain("arithmetic expansion")
            p.pos += 2
            p.substitution()
            self.hole()
        elif after == "{":
            match = _PARAM.match(text, p.pos)
            if match is None:
                raise _Uncertain("a ${...} expansion the rules cannot read")
            p.pos = match.end()
            self.hole()
        elif after and (after.isalnum() or after == "_" or after in "@*#?$!-"):
            name = _NAME.match(text, p.pos + 1)
            p.pos = name.end() if name is not None and not after.isdigit() else p.pos + 2
            self.hole()
        elif after in ("'", '"') and not in_quotes:
            raise _Uncertain(f"${after}...{after} quoting (bash)")
        else:
            self.buf.append("$")
            self.plain = False
            p.pos += 1

    def backtick(self, *, in_quotes: bool) -> None:
        p, text = self.parser, self.text
        end = text.find("`", p.pos + 1)
        if end < 0:
            raise _Uncertain("a backtick that is never closed")
        body = text[p.pos + 1 : end]
        if "\\" in body or (in_quotes and '"' in body):
            raise _Uncertain("a backtick substitution with escapes or quotes")
        p.pos = end + 1
        p.script(body)
        self.hole()


def _is_name(text: str | None) -> bool:
    return text is not None and _NAME.fullmatch(text) is not None


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
