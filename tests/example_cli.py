"""The ``cli`` fixture of the example tests: ``runner`` in process, with no model or key from the
environment and RUNNER_HOME in a temporary folder (import it into a test module to use it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from runner.cli import main


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    monkeypatch.setitem(main._state, "debug", False)
    for name in ("RUNNER_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RUNNER_HOME", str(tmp_path / "home"))

    def invoke(*args: str, env: dict[str, str] | None = None) -> Result:
        result = CliRunner().invoke(main.app, list(args), env=env)
        assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
        assert "Traceback" not in result.output
        return result

    return invoke
