"""Permissions: name and argument globs, deny > ask > allow, malformed patterns refused."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runner.agentfile import load_agent
from runner.agentfile.config import PermissionsConfig
from runner.errors import ConfigError
from runner.resources import load_schema
from runner.tools.permissions import Permissions, parse_pattern
from tests.tools.permission_checks import pattern, verdict


def _perms(allow: tuple[str, ...] = (), ask: tuple[str, ...] = (), deny: tuple[str, ...] = ()) -> Permissions:
    return Permissions(PermissionsConfig(allow=allow, ask=ask, deny=deny))


def test_no_matching_rule_gives_none() -> None:
    perms = _perms(allow=("files_*",))
    assert verdict(perms, "shell", {"command": "ls"}) is None
    assert pattern(perms, "shell", {"command": "ls"}) is None


def test_tool_name_glob_matches() -> None:
    perms = _perms(allow=("files_*",))
    assert verdict(perms, "files_read", {"path": "a"}) == "allow"
    assert pattern(perms, "files_read", {}) == "files_*"


def test_deny_wins_over_ask_which_wins_over_allow() -> None:
    perms = _perms(allow=("shell",), ask=("shell",), deny=("shell(command=rm *)",))
    assert verdict(perms, "shell", {"command": "rm -rf /"}) == "deny"
    assert pattern(perms, "shell", {"command": "rm -rf /"}) == "shell(command=rm *)"
    assert verdict(perms, "shell", {"command": "ls"}) == "ask"
    assert verdict(_perms(allow=("shell",), ask=("sh*",)), "shell", {}) == "ask"


def test_argument_glob_must_match_the_argument() -> None:
    perms = _perms(allow=("shell(command=git *)",))
    assert verdict(perms, "shell", {"command": "git status"}) == "allow"
    assert verdict(perms, "shell", {"command": "make"}) is None
    assert verdict(perms, "shell", {}) is None


def test_several_argument_globs_must_all_match() -> None:
    perms = _perms(deny=("files_write(path=docs/*, mode=append)",))
    assert verdict(perms, "files_write", {"path": "docs/a.md", "mode": "append"}) == "deny"
    assert verdict(perms, "files_write", {"path": "docs/a.md", "mode": "overwrite"}) is None
    assert verdict(perms, "files_write", {"path": "src/a.py", "mode": "append"}) is None


def test_non_string_arguments_are_compared_as_compact_json() -> None:
    perms = _perms(ask=("fetch(retries=3)", 'run(flags=["-x"*)', 'set(opts={"a":true})'))
    assert verdict(perms, "fetch", {"retries": 3}) == "ask"
    assert verdict(perms, "fetch", {"retries": 4}) is None
    assert verdict(perms, "run", {"flags": ["-x", "-y"]}) == "ask"
    assert verdict(perms, "set", {"opts": {"a": True}}) == "ask"


def test_a_value_may_contain_commas() -> None:
    perms = _perms(deny=("shell(command=echo a, b*)",))
    assert verdict(perms, "shell", {"command": "echo a, b and c"}) == "deny"


def test_parse_pattern_splits_name_and_arguments() -> None:
    rule = parse_pattern("files_write(path=docs/*, mode = append )")
    assert rule.name == "files_write"
    assert rule.arguments == (("path", "docs/*"), ("mode", "append"))


@pytest.mark.parametrize(
    "pattern", ["", "   ", "shell(", "shell()", "shell(command)", "(x=1)", "a b", "shell(=x)"]
)
def test_malformed_patterns_raise_config_error(pattern: str) -> None:
    with pytest.raises(ConfigError):
        _perms(deny=(pattern,))


def test_empty_permissions_are_falsy() -> None:
    assert not _perms()
    assert _perms(ask=("x",))


_SCHEMA_PATTERN = re.compile(load_schema("agent")["$defs"]["permission_patterns"]["items"]["pattern"])


@pytest.mark.parametrize(
    "pattern",
    ["shell", "shell(command=git *)", " files_*(path=docs/*, mode=append) ", "t(a=x, b=(y))", "x(a.b-c=1)"],
)
def test_the_schema_accepts_what_parse_pattern_accepts(pattern: str) -> None:
    parse_pattern(pattern)
    assert _SCHEMA_PATTERN.search(pattern)


@given(st.text(alphabet="ab (),=* \n.-_1", max_size=24))
def test_the_schema_pattern_and_parse_pattern_agree(pattern: str) -> None:
    try:
        parse_pattern(pattern)
    except ConfigError:
        accepted = False
    else:
        accepted = True
    assert accepted == (bool(pattern) and _SCHEMA_PATTERN.search(pattern) is not None), pattern


def test_a_malformed_rule_is_a_located_error_of_the_agent_file(tmp_path: Path) -> None:
    agent = tmp_path / "agent.yaml"
    agent.write_text(
        'version: 1\nname: t\npermissions:\n  allow:\n    - "shell(command=git *)"\n    - "shell(command"\n',
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as caught:
        load_agent(agent, env={})
    error = caught.value
    assert (error.line, error.path) == (6, "permissions.allow[1]")
    assert "shell(command" in error.message
    assert error.hint is not None and "shell(command=git *)" in error.hint
