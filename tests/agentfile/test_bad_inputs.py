"""Every bad agent file of ``tests/fixtures/bad/`` gets its one clear, located error (SPEC section 15).

A case is a top-level ``tests/fixtures/bad/*.yaml`` file; sub-folders hold the files that cases extend
or include, and ``fixture_*.py`` the tool modules they import. A case states what it expects in its
leading comment lines, or in a sidecar ``NAME.expect`` file when it cannot hold comments (binary,
empty, BOM-only)::

    # env: NAME=value                    set for the check (the check sees no other variable)
    # expect-file: extends_cycle/b.yaml  the errors are located in that file (default: the case)
    # expect: 4:19 function_calling: not one of
              LINE:COLUMN PATH: text the message contains; PATH "-" is the document root and
              0:0 means the error is about the whole file (no line)

Each case is checked twice: through ``check_file`` (the error's file, line, column, path and message)
and through ``runner validate`` in-process (exit code 2, the ``FILE:LINE:COL: PATH: message`` line,
no traceback).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from runner.agentfile.files import check_file
from runner.cli.main import app
from runner.errors import ConfigError

BAD = Path(__file__).resolve().parent.parent / "fixtures" / "bad"

_EXPECT = re.compile(r"^(?P<line>\d+):(?P<column>\d+) (?P<path>\S+): (?P<message>.+)$")


@dataclass(frozen=True)
class Expected:
    """One error a bad case must report."""

    file: str  # relative to BAD
    line: int
    column: int
    path: str  # "" for the document root
    message: str

    def matches(self, error: ConfigError) -> bool:
        return (
            bool(error.file)
            and Path(error.file).resolve() == (BAD / self.file).resolve()
            and (error.line, error.column, error.path) == (self.line, self.column, self.path)
            and self.message in error.message
        )

    def cli_prefix(self) -> str:
        """How ``runner validate`` run in BAD starts the line of this error."""
        location = f"{self.file}:{self.line}:{self.column}" if self.line else self.file
        return ": ".join([location, self.path] if self.path else [location]) + ": "


@dataclass(frozen=True)
class BadCase:
    """A bad agent file and what checking it must report."""

    path: Path
    env: dict[str, str]
    expected: tuple[Expected, ...]


def _header(case: Path) -> list[str]:
    sidecar = case.with_suffix(".expect")
    if sidecar.is_file():
        return sidecar.read_text(encoding="utf-8").splitlines()
    lines = []
    for line in case.read_bytes().decode("utf-8-sig", errors="replace").splitlines():
        if not line.startswith("#"):
            break
        lines.append(line)
    return lines


def read_case(case: Path) -> BadCase:
    """The environment and expected errors a case states in its header."""
    env: dict[str, str] = {}
    file = case.name
    texts: list[str] = []
    for line in _header(case):
        key, _, value = line.lstrip("# ").partition(": ")
        if key == "env":
            name, _, setting = value.partition("=")
            env[name] = setting
        elif key == "expect-file":
            file = value.strip()
        elif key == "expect":
            texts.append(value.strip())
    expected = []
    for text in texts:
        match = _EXPECT.match(text)
        assert match is not None, f"{case.name}: malformed expectation {text!r}"
        path = match["path"]
        expected.append(
            Expected(
                file=file,
                line=int(match["line"]),
                column=int(match["column"]),
                path="" if path == "-" else path,
                message=match["message"],
            )
        )
    return BadCase(case, env, tuple(expected))


CASES = [read_case(path) for path in sorted(BAD.glob("*.yaml"))]
IDS = [case.path.stem for case in CASES]


def test_there_are_enough_bad_cases_and_each_states_an_expectation() -> None:
    assert len(CASES) >= 45
    assert [case.path.stem for case in CASES if not case.expected] == []


def test_every_sidecar_belongs_to_a_case() -> None:
    cases = {case.path.stem for case in CASES}
    assert {p.stem for p in BAD.glob("*.expect")} <= cases


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_check_file_reports_the_expected_error(case: BadCase) -> None:
    errors = check_file(case.path, env=case.env)
    assert errors, "a bad file was reported valid"
    for expected in case.expected:
        assert any(expected.matches(e) for e in errors), f"expected {expected}\n got: " + "\n      ".join(
            repr(e.as_dict()) for e in errors
        )
    for error in errors:  # every error is one clean, located line
        assert error.file
        assert error.message and "\n" not in error.message
        assert "Traceback" not in str(error)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_validate_command_prints_the_error_and_exits_2(
    case: BadCase, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(BAD)
    result = CliRunner().invoke(app, ["validate", case.path.name], env=case.env)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = result.output.splitlines()
    for expected in case.expected:
        prefix = expected.cli_prefix()
        assert any(line.startswith(prefix) and expected.message in line for line in lines), (
            f"no line starts with {prefix!r} and contains {expected.message!r}:\n{result.output}"
        )
