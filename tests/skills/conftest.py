"""Skill folders written by the tests, an agent file beside them, and the in-process ``runner`` command."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from runner.cli import main

Invoke = Callable[..., Result]


def write_skill(
    root: Path,
    name: str,
    *,
    description: str = "Says hello. Use when the user wants a greeting.",
    extra: str = "",
    body: str = "# Hello\n\nRun scripts/hi.sh and repeat what it prints.\n",
    front: str | None = None,
    folder: str | None = None,
) -> Path:
    """``root/<folder or name>/SKILL.md`` (``front`` replaces the whole frontmatter text)."""
    skill = root / (folder or name)
    skill.mkdir(parents=True, exist_ok=True)
    head = front if front is not None else f"name: {name}\ndescription: {description}\n{extra}"
    (skill / "SKILL.md").write_text(f"---\n{head}---\n{body}", encoding="utf-8")
    return skill


def write_agent(folder: Path, extra: str = "skills: true\n", *, model: str = "openai/scripted") -> Path:
    """``folder/agent.yaml``, with ``extra`` (the ``skills:`` key by default) at the end."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "agent.yaml"
    path.write_text(f"version: 1\nname: skilled\nmodel: {model}\n{extra}", encoding="utf-8")
    return path


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Invoke:
    """``cli("validate", "a.yaml")``: the app in-process; it never shows a traceback."""
    monkeypatch.setitem(main._state, "debug", False)
    monkeypatch.setenv("RUNNER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.chdir(tmp_path)

    def invoke(*args: str, input: str | None = None) -> Result:
        result = CliRunner().invoke(main.app, list(args), input=input)
        assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
        assert "Traceback" not in result.output
        return result

    return invoke
