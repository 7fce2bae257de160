"""``permissions:`` rules: tool-name globs, optionally with argument globs, deciding allow / ask / deny.

A pattern is ``name_glob`` or ``name_glob(key=value_glob, key2=value_glob)``: every listed argument must
be present and match (an argument that is not a string is compared as compact JSON). A value may
contain commas; a comma only separates arguments when ``key=`` follows it. When several rules match,
``deny`` wins over ``ask``, which wins over ``allow``.

Two kinds of argument are read for what they mean rather than as plain text:

- **Commands** (keys ``command`` and ``cmd``) are judged by what ``/bin/sh`` would execute
  (``runner.tools.shellwords``): the line is split into every simple command it runs, through
  ``;`` ``&&`` ``||`` ``|`` ``&`` newlines, ``( )``, ``{ }``, ``if``/``while``/``until``/``for``, ``!``
  and command substitutions. Words are compared after quote removal, without redirections.

  An **allow** glob vouches for a line only when every command in it matches an allow glob
  (``true``, ``false`` and ``:`` need none), no redirection writes to a file (``/dev/null`` and
  ``2>&1`` are fine), and the line is fully understood. A command's leading assignments are part of
  its text (``GIT_PAGER=cat git log`` needs ``shell(command=GIT_PAGER=* git *)``), and so is a wrapper
  (``sudo``, ``env``, ``sh -c`` ...): ``shell(command=git *)`` allows ``git status && git diff`` but not
  ``git status; rm -rf /``, ``X=1 git log`` or ``env git log``. An expansion (``$X``, ``$(...)``,
  ``*.py``) may be anything, so it must fall where the glob ends in ``*``. A ``for`` loop whose
  variable is not a short lowercase name (``for PATH in ...``) keeps allow away too: it may change
  the environment of the commands it runs.

  A **deny** or **ask** glob matches when it matches the whole line or any one command, tried with
  and without leading assignments, with the program's basename (``/bin/rm``, ``./rm``), and behind
  wrappers and inside the scripts they run (``sudo rm``, ``prlimit rm``, ``xargs rm``, ``sh -c 'rm ..'``,
  ``eval``, ``ssh HOST rm``, ``tmux new 'rm ..'``; the list is ``runner.tools.shellwrappers``);
  an expansion may be anything, so ``$X -f V`` matches ``rm *``. A command that runs code no rule can
  read (``sh file``, ``eval "$x"``, ``. file``, ``xargs sh -c``) matches every deny and ask glob; a
  wrapper whose words cannot be read with certainty (``gdb``, ``tmux send-keys``, ``ssh -F``) also
  keeps every allow glob away from its line.
  Globs keep their ``fnmatch`` meaning: ``rm *`` does not match a bare ``rm`` (add ``rm`` for that).

  A line the parser cannot read with certainty (here-documents, ``case``, functions, ``alias``,
  arithmetic, ``#`` inside a word, an unclosed quote, bash-only syntax) matches every deny and ask
  glob and no allow glob.
- **Paths** (keys ``path``, ``file``, ``filename``, ``dir``, ``directory``, ``cwd``, ``root`` and
  keys ending in ``_path``, ``_file`` or ``_dir``) are also compared after normalization, and, for a
  tool that says how it reads paths (``Tool.path_view``: the ``files`` toolset), as the path the tool
  will use: stripped of spaces, resolved (absolute paths into the root, ``/proc/self/cwd/...``,
  symlinks) and relative to its root. An allow glob must match every form (``docs/*`` does not allow
  ``docs/../.env``, nor ``docs/link`` when the link leads to ``.env``); a deny glob matches any.

When several allow rules name the same command argument, a line is allowed when each of its commands
matches one of them (``git *`` and ``ls *`` together allow ``ls && git status``).

Rules are a guard rail, not a sandbox: an allowed program can still do whatever it can do.
"""

from __future__ import annotations

import fnmatch
import functools
import json
import posixpath
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from runner.agentfile.config import PermissionsConfig
from runner.errors import ConfigError

if TYPE_CHECKING:  # the shell reader loads when a rule first judges a command line
    from runner.tools.shellwords import CommandLine

__all__ = ["PathView", "PermissionMatch", "Permissions", "Rule", "Verdict", "parse_pattern"]

Verdict = Literal["allow", "ask", "deny"]

_PATTERN = re.compile(r"^\s*(?P<name>[^()\s]+)\s*(?:\((?P<args>.*)\))?\s*$", re.DOTALL)
_ARG_SPLIT = re.compile(r",\s*(?=[A-Za-z_][A-Za-z0-9_.-]*\s*=)")
_ARG = re.compile(r"^\s*(?P<key>[A-Za-z_][A-Za-z0-9_.-]*)\s*=(?P<value>.*)$", re.DOTALL)
_ORDER: tuple[Verdict, ...] = ("deny", "ask", "allow")
_COMMAND_KEYS = frozenset({"command", "cmd"})
_PATH_KEYS = frozenset({"path", "file", "filename", "dir", "directory", "cwd", "root"})
_PATH_SUFFIXES = ("_path", "_file", "_dir")

#: A tool's ``path_view``: the path it will use for a path argument (None: it refuses it).
PathView = Callable[[str], str | None]


@dataclass(frozen=True)
class Rule:
    """One parsed pattern: a tool-name glob and the argument globs that must all match."""

    pattern: str
    name: str
    arguments: tuple[tuple[str, str], ...] = ()

    def matches(
        self,
        tool_name: str,
        arguments: Mapping[str, Any],
        *,
        allow: bool = False,
        paths: PathView | None = None,
    ) -> bool:
        """Whether this rule applies to a call of ``tool_name`` with ``arguments``.

        ``allow`` asks the strict question of an allow rule (every command of a command line, every
        form of a path); otherwise any match counts (deny and ask rules). ``paths`` is the tool's
        ``path_view``.
        """
        return self.matches_except(tool_name, arguments, allow=allow, skip=None, paths=paths)

    def matches_except(
        self,
        tool_name: str,
        arguments: Mapping[str, Any],
        *,
        allow: bool,
        skip: str | None,
        paths: PathView | None = None,
    ) -> bool:
        """Like ``matches``, but the glob on argument ``skip`` is left to the caller (several allow
        rules then share the commands of one line); it must still be present."""
        if not fnmatch.fnmatchcase(tool_name, self.name):
            return False
        for key, glob in self.arguments:
            if key not in arguments:
                return False
            if key != skip and not _value_matches(key, arguments[key], glob, allow=allow, paths=paths):
                return False
        return True

    def glob_for(self, key: str) -> str | None:
        """This rule's glob on argument ``key`` when it has exactly one, else None."""
        globs = [glob for name, glob in self.arguments if name == key]
        return globs[0] if len(globs) == 1 else None


@dataclass(frozen=True)
class PermissionMatch:
    """The verdict for a call and the pattern that produced it."""

    verdict: Verdict
    pattern: str
    #: Why a deny or ask rule matched a command line it could not read, when that was the reason.
    reason: str | None = None


def parse_pattern(pattern: str) -> Rule:
    """Parse ``name_glob`` or ``name_glob(k=v, ...)``; a malformed pattern raises ConfigError."""
    match = _PATTERN.match(pattern)
    if match is None:
        raise ConfigError(
            f"permission pattern {pattern!r} is malformed",
            hint="write a tool-name glob, optionally with argument globs: 'shell(command=git *)'",
        )
    arguments: list[tuple[str, str]] = []
    raw = match.group("args")
    if raw is not None:
        if not raw.strip():
            raise ConfigError(
                f"permission pattern {pattern!r} has empty parentheses",
                hint="drop the parentheses or name an argument: 'files_write(path=docs/*)'",
            )
        for part in _ARG_SPLIT.split(raw):
            arg = _ARG.match(part)
            if arg is None:
                raise ConfigError(
                    f"permission pattern {pattern!r}: {part.strip()!r} is not 'argument=glob'",
                    hint="separate several arguments with commas: 'tool(a=x*, b=y)'",
                )
            arguments.append((arg.group("key"), arg.group("value").strip()))
    return Rule(pattern=pattern, name=match.group("name"), arguments=tuple(arguments))


class Permissions:
    """The agent's ``permissions:`` lists, parsed once, answering per call."""

    def __init__(self, spec: PermissionsConfig) -> None:
        self._rules: dict[Verdict, tuple[Rule, ...]] = {
            "deny": tuple(parse_pattern(p) for p in spec.deny),
            "ask": tuple(parse_pattern(p) for p in spec.ask),
            "allow": tuple(parse_pattern(p) for p in spec.allow),
        }

    def check(
        self, tool_name: str, arguments: Mapping[str, Any] | None = None, *, paths: PathView | None = None
    ) -> PermissionMatch | None:
        """The strongest matching rule's verdict and pattern, or None when no rule matches.

        ``paths`` is the tool's ``path_view``: path arguments are judged as the tool will use them.
        """
        args = arguments or {}
        for verdict in _ORDER:
            for rule in self._rules[verdict]:
                if rule.matches(tool_name, args, allow=verdict == "allow", paths=paths):
                    reason = _unread_reason(rule, args) if verdict != "allow" else None
                    return PermissionMatch(verdict, rule.pattern, reason)
        return self._allowed_together(tool_name, args, paths)

    def _allowed_together(
        self, tool_name: str, args: Mapping[str, Any], paths: PathView | None
    ) -> PermissionMatch | None:
        """An allow for a command line whose commands are each allowed by one of several rules."""
        for key in sorted(_COMMAND_KEYS):
            value = args.get(key)
            if not isinstance(value, str):
                continue
            rules = [
                (rule, glob)
                for rule in self._rules["allow"]
                if (glob := rule.glob_for(key)) is not None
                and rule.matches_except(tool_name, args, allow=True, skip=key, paths=paths)
            ]
            if len(rules) < 2:
                continue
            used = _allowing_globs(_line(value), [glob for _, glob in rules])
            if used is not None:
                patterns = [rule.pattern for rule, glob in rules if glob in used]
                return PermissionMatch("allow", ", ".join(dict.fromkeys(patterns)))
        return None

    def __bool__(self) -> bool:
        return any(self._rules.values())


def _value_matches(key: str, value: Any, glob: str, *, allow: bool, paths: PathView | None) -> bool:
    if isinstance(value, str) and key in _COMMAND_KEYS:
        return _command_matches(_line(value), value, glob, allow=allow)
    if isinstance(value, str) and value and (key in _PATH_KEYS or key.endswith(_PATH_SUFFIXES)):
        forms = _path_forms(value, paths)
        if allow:
            return all(fnmatch.fnmatchcase(form, glob) for form in forms)
        return any(fnmatch.fnmatchcase(form, glob) for form in forms)
    return fnmatch.fnmatchcase(_as_text(value), glob)


def _path_forms(value: str, paths: PathView | None) -> list[str]:
    """A path argument as given, normalized, and as the tool will use it (when it says)."""
    forms = [value, posixpath.normpath(value)]
    if paths is not None:
        used = paths(value)
        forms += [stripped := value.strip(), posixpath.normpath(stripped or ".")]
        if used is not None:
            forms.append(used)
    return forms


def _command_matches(line: CommandLine, raw: str, glob: str, *, allow: bool) -> bool:
    if allow:
        return _allowing_globs(line, [glob]) is not None
    if line.uncertain is not None or fnmatch.fnmatchcase(raw, glob):
        return True
    from runner.tools.holeglob import could_match
    from runner.tools.shellwords import deny_texts

    return any(
        command.opaque is not None or any(could_match(glob, text) for text in deny_texts(command))
        for command in line.commands
    )


def _allowing_globs(line: CommandLine, globs: list[str]) -> set[str] | None:
    """The globs that allow each command of ``line`` (each command by one), or None if some cannot."""
    if line.uncertain is not None or line.allow_blocker is not None:
        return None
    from runner.tools.holeglob import must_match
    from runner.tools.shellwords import allow_text, is_neutral

    if any(command.allow_blocker is not None for command in line.commands):
        return None
    judged = [c for c in line.commands if not c.in_script and not is_neutral(c)]
    if not judged:
        return None
    used: set[str] = set()
    for command in judged:
        text = allow_text(command)
        glob = next((g for g in globs if must_match(g, text)), None)
        if glob is None:
            return None
        used.add(glob)
    return used


def _unread_reason(rule: Rule, args: Mapping[str, Any]) -> str | None:
    """Why a deny or ask rule matched: a command line it could not read, or a command it cannot see."""
    for key, _glob in rule.arguments:
        value = args.get(key)
        if key in _COMMAND_KEYS and isinstance(value, str):
            line = _line(value)
            if line.uncertain is not None:
                return f"the command line has {line.uncertain}, which permission rules cannot judge"
    return None


@functools.lru_cache(maxsize=256)
def _line(line: str) -> CommandLine:
    from runner.tools.shellwords import read_command_line

    return read_command_line(line)


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True)
