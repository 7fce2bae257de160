"""``runner acp`` refuses what it cannot serve before it speaks any protocol: one clean error on
stderr, nothing on stdout (which the editor reads as the protocol)."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from runner.cli import main

TEAM = """\
version: 1
agents:
  writer:
    model: openai/gpt-4o-mini
    prompts: {system: Write.}
  reviewer:
    model: openai/gpt-4o-mini
    prompts: {system: Review.}
"""


def test_a_missing_file_is_one_error_and_no_protocol(tmp_path: Path) -> None:
    result = CliRunner().invoke(main.app, ["acp", str(tmp_path / "nothing.yaml")])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert "nothing.yaml" in result.stderr and "Traceback" not in result.stderr


def test_an_agent_the_team_does_not_have_is_refused_naming_the_members(tmp_path: Path) -> None:
    (tmp_path / "team.yaml").write_text(TEAM, encoding="utf-8")
    result = CliRunner().invoke(main.app, ["acp", str(tmp_path / "team.yaml"), "--agent", "editor"])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert "--agent editor" in result.stderr and "writer, reviewer" in result.stderr
