"""``runner audit`` lists every file the templates read, and flags the ones worth a look (issue 23, 6).

A prompt ``file:`` written as an absolute path, a template included through a committed symbolic link
that points out of the repository, a file elsewhere in the repository: each reaches the model as
prompt text, so each is listed with what makes it stand out.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from runner.cli.main import app

SYSTEM_FILE = "{% include 'partials/tone.txt' %} {% from 'macros.j2' import sig %}{{ sig() }}"


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``repo/agents/a.yaml`` and its templates; ``outside/`` (not in the repository) holds secrets."""
    root, outside = tmp_path / "repo", tmp_path / "outside"
    agents = root / "agents"
    for folder in (agents / "partials", root / "shared", outside / ".aws"):
        folder.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    credentials = outside / ".aws" / "credentials"
    credentials.write_text("aws_secret_access_key = not-for-the-model\n", encoding="utf-8")
    (outside / "notes.txt").write_text("private notes\n", encoding="utf-8")
    (agents / "a.yaml").write_text(
        "version: 1\nname: a\nmodel: {id: openai/m, api_base: 'http://127.0.0.1:9/v1'}\n"
        "prompts:\n"
        "  system: {file: system.j2}\n"
        f"  status: {{file: '{credentials}'}}\n"
        "  tool_selection: {file: ../shared/select.txt}\n"
        "  user: \"{% include 'notes.txt' %}{% include page %}{% include '../up.txt' %}{{ input }}\"\n"
        "hooks:\n  turn_post:\n    - message: \"{% include 'partials/tone.txt' %}\"\n",
        encoding="utf-8",
    )
    (agents / "system.j2").write_text(SYSTEM_FILE, encoding="utf-8")
    (agents / "partials" / "tone.txt").write_text("Be brief.", encoding="utf-8")
    (agents / "macros.j2").write_text("{% macro sig() %}-- a{% endmacro %}", encoding="utf-8")
    (root / "shared" / "select.txt").write_text("Pick tools.", encoding="utf-8")
    (agents / "notes.txt").symlink_to(outside / "notes.txt")  # a committed link out of the repository
    subprocess.run(["git", "-C", str(root), "add", "."], check=True)
    monkeypatch.setenv("RUNNER_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    return root


def _audit(*args: str) -> Result:
    result = CliRunner().invoke(app, ["audit", *args])
    assert "Traceback" not in result.output
    assert result.exit_code == 0, result.output
    return result


def _rows(agent: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = json.loads(_audit(str(agent), "--json").output)["template_files"]
    return rows


def test_every_file_the_templates_read_is_listed(repo: Path) -> None:
    rows = _rows(repo / "agents" / "a.yaml")
    listed = [(r["use"], r["via"], r["written"]) for r in rows]
    assert listed == [
        ("prompts.system", "file", "system.j2"),
        ("prompts.system", "include", "partials/tone.txt"),
        ("prompts.system", "include", "macros.j2"),
        ("prompts.user", "include", "notes.txt"),
        ("prompts.user", "include", None),
        ("prompts.user", "include", "../up.txt"),
        ("prompts.status", "file", str(repo.parent / "outside" / ".aws" / "credentials")),
        ("prompts.tool_selection", "file", "../shared/select.txt"),
        ("hooks.turn_post[0]", "include", "partials/tone.txt"),
    ]
    tone = rows[1]
    assert tone["file"] == str(repo / "agents" / "partials" / "tone.txt") and tone["where"] == "folder"
    assert not (tone["absolute"] or tone["symlink"] or tone["problem"])
    assert rows[4]["problem"] == "computed at render time" and rows[4]["file"] is None
    assert rows[5]["problem"].startswith("refused by the loader")


def test_an_absolute_prompt_file_outside_the_repository_is_flagged(repo: Path) -> None:
    status = next(r for r in _rows(repo / "agents" / "a.yaml") if r["use"] == "prompts.status")
    assert status["absolute"] is True and status["where"] == "outside" and status["symlink"] is False
    out = _audit(str(repo / "agents" / "a.yaml")).output
    assert "  template files\n" in out
    assert "prompts.status  file " in out and "(OUTSIDE the repository; ABSOLUTE path)" in out


def test_a_committed_symlink_out_of_the_repository_is_flagged(repo: Path) -> None:
    notes = next(r for r in _rows(repo / "agents" / "a.yaml") if r["written"] == "notes.txt")
    assert notes["symlink"] is True and notes["where"] == "outside"
    assert notes["file"] == str(repo.parent / "outside" / "notes.txt")
    out = _audit(str(repo / "agents" / "a.yaml")).output
    assert "prompts.user  include notes.txt -> " in out
    assert "(OUTSIDE the repository; through a SYMBOLIC LINK)" in out


def test_a_file_elsewhere_in_the_repository_and_a_link_inside_it(repo: Path) -> None:
    agents = repo / "agents"
    (agents / "inner.txt").symlink_to(agents / "partials" / "tone.txt")
    text = (agents / "a.yaml").read_text(encoding="utf-8").replace("'notes.txt'", "'inner.txt'")
    (agents / "a.yaml").write_text(text, encoding="utf-8")
    rows = {r["written"]: r for r in _rows(agents / "a.yaml")}
    assert rows["../shared/select.txt"]["where"] == "repository"
    assert not rows["../shared/select.txt"]["symlink"]
    inner = rows["inner.txt"]
    assert inner["symlink"] is True and inner["where"] == "folder"  # flagged, though it stays inside


def test_outside_a_repository_the_agents_folder_is_the_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "agent").mkdir()
    (tmp_path / "up.txt").write_text("hi", encoding="utf-8")
    (tmp_path / "agent" / "a.yaml").write_text(
        "version: 1\nname: a\nmodel: {id: openai/m}\nprompts:\n  system: {file: ../up.txt}\n",
        encoding="utf-8",
    )
    (row,) = _rows(tmp_path / "agent" / "a.yaml")
    assert row["where"] == "outside"
    assert "(outside the agent's folder)" in _audit(str(tmp_path / "agent" / "a.yaml")).output


def test_serves_summary_counts_the_flagged_files(repo: Path) -> None:
    from runner.audit import load_for_audit, summary_of

    config = load_for_audit(repo / "agents" / "a.yaml", agent=None, env={})
    assert "9 template files (5 flagged)" in summary_of(config, {})
