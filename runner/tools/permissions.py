"""``permissions:`` rules: tool-name globs, optionally with argument globs, deciding allow / ask / deny.

A pattern is ``name_glob`` or ``name_glob(key=value_glob, key2=value_glob)``: every listed argument must
be present and match (an argument that is not a string is compared as compact JSON). A value may
contain commas; a comma only separates arguments when ``key=`` follows it. When several rules match,
``deny`` wins over ``ask``, which wins over ``allow``.

Two kinds of argument are read for what they mean rather than as plain text:

- **Commands** (keys ``command`` and ``cmd``) are split into the simple commands they run
  (``runner.tools.shellwords``). A deny or ask glob matches when it matches the whole line or any one
  of its commands (also behind ``sudo``, ``env`` ...): ``shell(command=rm *)`` denies
  ``ls && rm -rf /``. An allow glob matches only when it matches every command and the line has no
  command substitution or output redirection to a file: ``shell(command=git *)`` allows
  ``git status && git diff`` but not ``git status; rm -rf /`` (that one falls through to ``ask`` or
  the tool's own confirmation).
- **Paths** (keys ``path``, ``file``, ``filename``, ``dir``, ``directory``, ``cwd``, ``root`` and
  keys ending in ``_path``, ``_file`` or ``_dir``) are also compared after normalization: an allow
  glob must match both the value as given and normalized (``docs/*`` does not allow
  ``docs/../.env``); a deny glob matches either.

Rules are a guard rail, not a sandbox: an allowed program can still do whatever it can do.
"""

from __future__ import annotations

import fnmatch
import functools
import json
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from runner.agentfile.config import PermissionsConfig
from runner.errors import ConfigError
from runner.tools.shellwords import ParsedCommand, deny_candidates, parse_command

__all__ = ["PermissionMatch", "Permissions", "Rule", "Verdict", "parse_pattern"]

Verdict = Literal["allow", "ask", "deny"]

_PATTERN = re.compile(r"^\s*(?P<name>[^()\s]+)\s*(?:\((?P<args>.*)\))?\s*$", re.DOTALL)
_ARG_SPLIT = re.compile(r",\s*(?=[A-Za-z_][\w.-]*\s*=)")
_ARG = re.compile(r"^\s*(?P<key>[A-Za-z_][\w.-]*)\s*=(?P<value>.*)$", re.DOTALL)
_ORDER: tuple[Verdict, ...] = ("deny", "ask", "allow")
_COMMAND_KEYS = frozenset({"command", "cmd"})
_PATH_KEYS = frozenset({"path", "file", "filename", "dir", "directory", "cwd", "root"})
_PATH_SUFFIXES = ("_path", "_file", "_dir")


@dataclass(frozen=True)
class Rule:
    """One parsed pattern: a tool-name glob and the argument globs that must all match."""

    pattern: str
    name: str
    arguments: tuple[tuple[str, str], ...] = ()

    def matches(self, tool_name: str, arguments: Mapping[str, Any], *, allow: bool = False) -> bool:
        """Whether this rule applies to a call of ``tool_name`` with ``arguments``.

        ``allow`` asks the strict question of an allow rule (every command of a command line, the
        path before and after normalization); otherwise any match counts (deny and ask rules).
        """
        if not fnmatch.fnmatchcase(tool_name, self.name):
            return False
        for key, glob in self.arguments:
            if key not in arguments:
                return False
            if not _value_matches(key, arguments[key], glob, allow=allow):
                return False
        return True


@dataclass(frozen=True)
class PermissionMatch:
    """The verdict for a call and the pattern that produced it."""

    verdict: Verdict
    pattern: str


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

    def check(self, tool_name: str, arguments: Mapping[str, Any] | None = None) -> PermissionMatch | None:
        """The strongest matching rule's verdict and pattern, or None when no rule matches."""
        args = arguments or {}
        for verdict in _ORDER:
            for rule in self._rules[verdict]:
                if rule.matches(tool_name, args, allow=verdict == "allow"):
                    return PermissionMatch(verdict, rule.pattern)
        return None

    def decide(self, tool_name: str, arguments: Mapping[str, Any] | None = None) -> Verdict | None:
        """``allow``, ``ask`` or ``deny`` for this call; None when no rule matched."""
        found = self.check(tool_name, arguments)
        return found.verdict if found is not None else None

    def matched_pattern(self, tool_name: str, arguments: Mapping[str, Any] | None = None) -> str | None:
        """The pattern that decided this call (for messages such as 'denied by shell(command=rm *)')."""
        found = self.check(tool_name, arguments)
        return found.pattern if found is not None else None

    def __bool__(self) -> bool:
        return any(self._rules.values())


def _value_matches(key: str, value: Any, glob: str, *, allow: bool) -> bool:
    if isinstance(value, str) and key in _COMMAND_KEYS:
        return _command_matches(_parsed(value), value, glob, allow=allow)
    if isinstance(value, str) and value and (key in _PATH_KEYS or key.endswith(_PATH_SUFFIXES)):
        normalized = posixpath.normpath(value)
        if allow:
            return fnmatch.fnmatchcase(value, glob) and fnmatch.fnmatchcase(normalized, glob)
        return fnmatch.fnmatchcase(value, glob) or fnmatch.fnmatchcase(normalized, glob)
    return fnmatch.fnmatchcase(_as_text(value), glob)


def _command_matches(parsed: ParsedCommand, line: str, glob: str, *, allow: bool) -> bool:
    if allow:
        texts = parsed.texts()
        return bool(texts) and not parsed.opaque and all(fnmatch.fnmatchcase(t, glob) for t in texts)
    if fnmatch.fnmatchcase(line, glob):
        return True
    return any(
        fnmatch.fnmatchcase(text, glob) for words in parsed.commands for text in deny_candidates(words)
    )


@functools.lru_cache(maxsize=256)
def _parsed(line: str) -> ParsedCommand:
    return parse_command(line)


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True)
