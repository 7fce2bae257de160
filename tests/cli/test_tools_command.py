"""`runner tools --check` and the connection-free source checks of `runner validate`."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from runner.cli.main import app

TOOLS = '''
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
'''


def test_tools_check_reports_each_source(tmp_path: Path) -> None:
    (tmp_path / "check_tools.py").write_text(TOOLS)
    agent = tmp_path / "agent.yaml"
    agent.write_text(
        "version: 1\nname: c\nmodel: openai/x\ntools:\n  - python: check_tools\n"
        "  - mcp: {command: surely-not-an-mcp-server-command}\n    id: ghost\n"
    )
    result = CliRunner().invoke(
        app, ["tools", str(agent), "--check"], env={"RUNNER_HOME": str(tmp_path / "h")}
    )
    assert result.exit_code == 2
    lines = result.output.splitlines()
    assert lines[0].startswith("ok   tools[0] python:check_tools  1 tool(s): add")
    assert lines[1].startswith("FAIL tools[1] ghost") and "command not found" in lines[1]
    assert lines[-1] == "1 ok, 1 failed"


def test_validate_checks_builtin_options_without_opening_anything(tmp_path: Path) -> None:
    agent = tmp_path / "agent.yaml"
    agent.write_text(
        "version: 1\nname: b\nmodel: openai/x\ntools:\n"
        "  - builtin: files\n    with: {root: ./ws, max_read_charz: 9}\n"
    )
    result = CliRunner().invoke(app, ["validate", str(agent)])
    assert result.exit_code == 2
    assert (
        "agent.yaml:5:5: tools[0].with.max_read_charz: builtin toolset 'files': unknown option"
        in result.output
    )
    assert "max_read_chars" in result.output
    assert not (tmp_path / "ws").exists()  # nothing was opened or created
