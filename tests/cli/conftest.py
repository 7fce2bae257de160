"""Running the ``runner`` command in-process (typer's CliRunner) for the CLI tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from runner.cli import main

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"

Invoke = Callable[..., Result]


@pytest.fixture
def good_dir() -> Path:
    """The folder of valid fixture files (read-only)."""
    return FIXTURES / "good"


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch) -> Invoke:
    """``cli("validate", "a.yaml", env={...})``: run the app and check it never shows a traceback."""
    monkeypatch.setitem(main._state, "debug", False)

    def invoke(*args: str, env: dict[str, str] | None = None, input: str | None = None) -> Result:
        result = CliRunner().invoke(main.app, list(args), env=env, input=input)
        assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
        assert "Traceback" not in result.output
        return result

    return invoke
