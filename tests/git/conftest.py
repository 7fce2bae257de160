"""Real git repositories in tmp_path and the runner command, in-process, with RUNNER_HOME there too."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from runner.cli import main

AGENT = """\
version: 1
name: probe
description: {description}
model:
  id: openai/gpt-4o-mini
  api_base: ${{OPENAI_BASE_URL:-http://127.0.0.1:9}}
  api_key: ${{OPENAI_API_KEY:-sk-test}}
  temperature: {temperature}
prompts:
  system: "You are {persona}. Tools: {{{{ tools | map(attribute='name') | join(', ') }}}}."
tools:
  - python: probe_tools
limits:
  max_steps: {max_steps}
"""

TOOLS = '''\
def version() -> str:
    """Which version of the tools answered."""
    return "{version}"
'''


@dataclass
class Repo:
    """A git repository in a temporary folder; ``commit`` writes files and commits them."""

    path: Path

    def git(self, *args: str) -> str:
        done = subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
            cwd=self.path,
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout.strip()

    def write(self, files: dict[str, str]) -> None:
        for name, text in files.items():
            target = self.path / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")

    def commit(self, files: dict[str, str], message: str = "change") -> str:
        self.write(files)
        self.git("add", *files)
        self.git("commit", "-q", "-m", message)
        return self.git("rev-parse", "HEAD")

    def agent(self, folder: str = "", **fields: Any) -> dict[str, str]:
        values = {"description": "first", "temperature": 0, "persona": "terse", "max_steps": 5, **fields}
        prefix = f"{folder}/" if folder else ""
        return {f"{prefix}probe.yaml": AGENT.format(**values)}

    def tools(self, version: str, folder: str = "") -> dict[str, str]:
        prefix = f"{folder}/" if folder else ""
        return {f"{prefix}probe_tools.py": TOOLS.format(version=version)}


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    path = tmp_path / "repo"
    path.mkdir()
    made = Repo(path)
    made.git("init", "-q", "-b", "main")
    return made


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "home"
    monkeypatch.setenv("RUNNER_HOME", str(folder))
    return folder


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, home: Path) -> Callable[..., Result]:
    monkeypatch.setitem(main._state, "debug", False)
    for name in ("RUNNER_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)

    def invoke(*args: str, env: dict[str, str] | None = None) -> Result:
        result = CliRunner().invoke(main.app, list(args), env=env)
        assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
        assert "Traceback" not in result.output
        return result

    return invoke
