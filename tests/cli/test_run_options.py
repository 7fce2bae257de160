"""`runner run` option combinations that make no sense are refused with a clear message."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from runner.cli.main import app


def test_replay_loose_without_replay_is_an_error(tmp_path: Path) -> None:
    agent = tmp_path / "a.yaml"
    agent.write_text("version: 1\nname: a\nmodel: openai/gpt-4o-mini\n")
    result = CliRunner().invoke(app, ["run", str(agent), "-p", "hi", "--replay-loose"])
    assert result.exit_code == 2
    assert "--replay-loose only changes --replay" in result.output
