"""``runner serve`` says at start-up what each served agent can execute, one line per agent."""

from __future__ import annotations

from pathlib import Path

import pytest
import uvicorn
from typer.testing import CliRunner

from runner.cli.main import app

WEATHER = """\
version: 1
name: weather
model: openai/x
tools:
  - python: weather_tools
  - python: weather_tools:forecast
  - mcp: {command: python3, args: ["-c", "open('mcp-marker', 'w')"], env: {MCP_KEY: "${SERVE_AUDIT_KEY}"}}
  - builtin: shell
  - agent: helper.yaml
permissions:
  allow: ["shell(command=git *)", "shell(command=ls *)", "shell(command=cat *)"]
  deny: ["shell(command=rm *)"]
vars:
  city: ${SERVE_AUDIT_CITY:-Paris}
  region: ${SERVE_AUDIT_REGION:-eu}
  unit: ${SERVE_AUDIT_UNIT:-C}
"""


@pytest.fixture
def no_serving(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The server starts and stops at once: the start-up lines are what is tested."""
    for name in ("RUNNER_SERVE_API_KEYS", "RUNNER_SERVE_HOST", "RUNNER_SERVE_PORT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SERVE_AUDIT_KEY", "serve-audit-secret-4242")
    monkeypatch.setenv("RUNNER_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(uvicorn.Server, "run", lambda self, sockets=None: None)


def test_serve_prints_one_audit_line_per_agent(no_serving: None, tmp_path: Path) -> None:
    served = tmp_path / "served"
    served.mkdir()
    (served / "weather.yaml").write_text(WEATHER, encoding="utf-8")
    (served / "weather_tools.py").write_text(
        "def forecast(city: str) -> str:\n    return city\n", encoding="utf-8"
    )
    (served / "helper.yaml").write_text("version: 1\nname: helper\nmodel: openai/x\n", encoding="utf-8")
    (served / "plain.yaml").write_text("version: 1\nname: plain\nmodel: openai/x\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["serve", str(served), "--port", "0"])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("audit: ")]
    assert lines == [
        "audit: helper: nothing beyond its model",
        "audit: plain: nothing beyond its model",
        "audit: weather: 2 python modules, 1 MCP stdio command, shell (3 allow, 1 deny), 4 env vars, "
        "1 sub-agent",
    ]
    assert result.output.index("serving 3 agents") < result.output.index("audit: helper")
    assert "serve-audit-secret-4242" not in result.output and "stopped" in result.output
    assert not (served / "mcp-marker").exists()  # serve starts MCP servers per session, not at start-up
