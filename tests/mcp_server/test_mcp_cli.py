"""``runner mcp`` refuses what it cannot serve with one clean line (in process: typer's CliRunner)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from runner.cli import main


@pytest.fixture(autouse=True)
def _no_debug(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(main._state, "debug", False)


def _run(*args: str, cwd: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[int, str]:
    monkeypatch.chdir(cwd)
    result = CliRunner().invoke(main.app, ["mcp", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    return result.exit_code, result.output


def test_a_missing_path_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, output = _run(str(tmp_path / "nowhere"), cwd=tmp_path, monkeypatch=monkeypatch)
    assert code == 2  # a configuration error, as runner serve gives
    assert "nowhere: no such file or folder" in output
    assert "no valid agent files under" in output


def test_without_a_path_and_without_agents_it_says_what_to_give(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, output = _run(cwd=tmp_path, monkeypatch=monkeypatch)
    assert code == 2  # a configuration error, as runner serve gives
    assert "nothing to serve" in output and "runner mcp agents/" in output


def test_an_invalid_agent_is_skipped_with_its_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "broken.yaml").write_text("version: 1\nname: broken\nmodel: 3\n", encoding="utf-8")
    code, output = _run(str(tmp_path / "broken.yaml"), cwd=tmp_path, monkeypatch=monkeypatch)
    assert code == 2  # a configuration error, as runner serve gives
    assert "warning: skipped" in output and "broken.yaml:3" in output
