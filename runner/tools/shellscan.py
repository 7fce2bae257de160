"""Reading one word of a sh command line: quote removal, with expansions kept as holes.

Command substitutions inside a word are handed back to the parser (``ScanHost``), which parses
their commands like any others.
"""

from __future__ import annotations

import re
from typing import Protocol

from runner.tools.shellsyntax import HOLE, META, Part, Uncertain, Word, is_name

__all__ = ["ScanHost", "WordScanner"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PARAM = re.compile(
    r"\$\{(?:#?(?:[A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#?$!-])"
    r"|(?:[A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#?$!-])(?:(?::?[-+?]|%%?|##?)[^$`'\"\\{}]*)?)\}"
)


class ScanHost(Protocol):
    """What the scanner needs of the parser: the text, the position, and nested parsing."""

    text: str
    pos: int

    def substitution(self) -> None: ...

    def script(self, text: str) -> None: ...


class WordScanner:
    """Reads one word from the parser's position: quote removal, expansions kept as holes."""

    def __init__(self, parser: ScanHost) -> None:
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
        while p.pos < n and text[p.pos] not in META:
            char = text[p.pos]
            if char == "\\":
                self.escape()
            elif char == "'":
                end = text.find("'", p.pos + 1)
                if end < 0:
                    raise Uncertain("a quote that is never closed")
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
                raise Uncertain("a '#' inside a word")
            elif char == "~" and (p.pos == self.start or self.assign is not None):
                self.tilde()
            else:
                if char == "=" and self.assign is None and self.plain and is_name("".join(self.buf)):
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
            raise Uncertain("a backslash at the end of the line")
        char = self.text[p.pos + 1]
        p.pos += 2
        if char != "\n":  # backslash-newline joins lines
            self.buf.append(char)
            self.quote()

    def tilde(self) -> None:
        p = self.parser
        while p.pos < len(self.text) and self.text[p.pos] not in META and self.text[p.pos] not in "/:":
            if self.text[p.pos] in "\\'\"$`":
                raise Uncertain("a quoted or expanded ~user")
            p.pos += 1
        self.hole()

    def double_quoted(self) -> None:
        p, text = self.parser, self.text
        self.quote()
        p.pos += 1
        while True:
            if p.pos >= len(text):
                raise Uncertain("a quote that is never closed")
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
            raise Uncertain("an expansion split by a line continuation")
        if after == "(":
            if text.startswith("((", p.pos + 1):
                raise Uncertain("arithmetic expansion")
            p.pos += 2
            p.substitution()
            self.hole()
        elif after == "{":
            match = _PARAM.match(text, p.pos)
            if match is None:
                raise Uncertain("a ${...} expansion the rules cannot read")
            p.pos = match.end()
            self.hole()
        elif after and (after.isalnum() or after == "_" or after in "@*#?$!-"):
            name = _NAME.match(text, p.pos + 1)
            p.pos = name.end() if name is not None and not after.isdigit() else p.pos + 2
            self.hole()
        elif after in ("'", '"') and not in_quotes:
            raise Uncertain(f"${after}...{after} quoting (bash)")
        else:
            self.buf.append("$")
            self.plain = False
            p.pos += 1

    def backtick(self, *, in_quotes: bool) -> None:
        p, text = self.parser, self.text
        end = text.find("`", p.pos + 1)
        if end < 0:
            raise Uncertain("a backtick that is never closed")
        body = text[p.pos + 1 : end]
        if "\\" in body or (in_quotes and '"' in body):
            raise Uncertain("a backtick substitution with escapes or quotes")
        p.pos = end + 1
        p.script(body)
        self.hole()
