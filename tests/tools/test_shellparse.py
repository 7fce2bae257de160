"""The sh reader: the simple commands a line runs, and what makes a line one no rule can judge."""

from __future__ import annotations

import pytest

from runner.tools.holeglob import text_of
from runner.tools.shellparse import parse_line


def _commands(line: str) -> list[str]:
    parsed = parse_line(line)
    assert parsed.uncertain is None, parsed.uncertain
    return [text_of(_join(c.assignments + c.words)) for c in parsed.commands]


def _join(words: tuple[object, ...]) -> list[object]:
    parts: list[object] = []
    for index, word in enumerate(words):
        parts.extend(([" "] if index else []) + list(word.parts))  # type: ignore[attr-defined]
    return parts


@pytest.mark.parametrize(
    ("line", "commands"),
    [
        ("git --version #'\ntouch PWNED\n#'", ["git --version", "touch PWNED"]),
        ("if true; then rm -f V; fi", ["true", "rm -f V"]),
        ("if a; then b; elif c; then d; else e; fi", ["a", "b", "c", "d", "e"]),
        ("for f in x; do rm -f V; done", ["rm -f V"]),
        ("for f in $(ls); do rm $f; done", ["ls", "rm …"]),
        ("for f\ndo g; done", ["g"]),
        ("while a; do b; done; until c\ndo d\ndone", ["a", "b", "c", "d"]),
        ("{ rm -f V; }", ["rm -f V"]),
        ("! rm -f V", ["rm -f V"]),
        ("( a; ( b ) ) | c &", ["a", "b", "c"]),
        ("a && b || c\nd", ["a", "b", "c", "d"]),
        ('git log $(rm x) `ls` "$(cat y)"', ["rm x", "ls", "cat y", "git log … … …"]),
        ("X=1 Y='a b' git diff", ["X=1 Y=a b git diff"]),
        ("r''m \\rm \"rm\" 'r'm", ["rm rm rm rm"]),
        ("a\\\nb c", ["ab c"]),
        ("i\\\nf true; then x; fi", ["true", "x"]),
        ("echo $HOME ${X} ${X:-y} $1 $@ ~/bin *.py", ["echo … … … … … …/bin …"]),
        ("echo {a,b} [ab] x{}", ["echo … … x{}"]),
        ("[ -f x ] && echo ok # done", ["[ -f x ]", "echo ok"]),
        ("make 2>&1 >/dev/null < in", ["make"]),
        ("echo 'a#b' \"c#d\" \\#e", ["echo a#b c#d #e"]),
    ],
)
def test_the_simple_commands_of_a_line(line: str, commands: list[str]) -> None:
    assert _commands(line) == commands


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("cat <<EOF\nx\nEOF", "here-document"),
        ("case x in x) rm;; esac", "case"),
        ("f() { rm; }", "function"),
        ("function f { rm; }", "function"),
        ("alias g=rm\ng x", "alias"),
        ("echo $((1+2))", "arithmetic"),
        ("((x++))", "arithmetic"),
        ("echo $'\\x72m'", "quoting"),
        ("echo a#b", "'#' inside a word"),
        ("echo 'open", "never closed"),
        ('echo "open', "never closed"),
        ("echo `open", "never closed"),
        ("echo x\\", "backslash"),
        ("cat <(rm x)", "redirection"),
        ("a |& b", "|&"),
        ("[[ -f x ]]", "[["),
        ("echo ${X:=rm}", "${"),
        ("if a; then b", "fi"),
        ("{ a; } b", "unexpected"),
        ("a &&", "missing command"),
        ("; a", "missing command"),
        ("fi", "unexpected"),
        ("( " * 60 + "a" + " )" * 60, "nested"),
    ],
)
def test_what_makes_a_line_uncertain(line: str, reason: str) -> None:
    uncertain = parse_line(line).uncertain
    assert uncertain is not None and reason in uncertain, uncertain


def test_a_line_with_and_greater_is_read_as_dash_and_as_bash_read_it() -> None:
    parsed = parse_line("a &>f b")
    texts = [text_of(_join(c.words)) for c in parsed.commands]
    assert "a" in texts and "b" in texts and "a b" in texts  # dash: `a &` and `>f b`; bash: `a b >f`
    assert parsed.writes == "f"


def test_redirections_that_write_and_those_that_do_not() -> None:
    assert parse_line("a > out").writes == "out"
    assert parse_line("a >> $X").writes is not None
    assert parse_line("a <> f").writes == "f"
    assert parse_line("a >&2 2>&1 >/dev/null 2>/dev/stderr < in <&0 >&-").writes is None
    assert parse_line("{ a; } > f").writes == "f"
    assert parse_line("echo $(a > f)").writes == "f"


def test_for_loops_report_their_variables() -> None:
    assert parse_line("for PATH in /tmp; do git status; done").loop_variables == ("PATH",)
