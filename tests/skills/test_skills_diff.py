"""`runner diff` and `--rev` with skills: a committed skill is read at its revision, an edit shows."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.skills.conftest import Invoke, write_agent, write_skill


def _git(folder: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=folder,
        check=True,
        capture_output=True,
    )


def test_an_edited_skill_shows_in_the_diff_against_head(tmp_path: Path, cli: Invoke) -> None:
    repo = tmp_path / "repo"
    write_skill(repo / "skills", "hello", description="First description.")
    agent = write_agent(repo)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "skill")
    assert cli("diff", str(agent), "--exit-code").exit_code == 0

    write_skill(repo / "skills", "hello", description="Second description.", body="Another body.\n")
    result = cli("diff", str(agent), "--exit-code")
    assert result.exit_code == 1, result.output
    assert 'skills.hello.description: "First description." -> "Second description."' in result.stdout
    assert "skills.hello.body_sha256:" in result.stdout
    changes = json.loads(cli("diff", str(agent), "--json").stdout)
    assert "First description." in json.dumps(changes) and "Second description." in json.dumps(changes)


def test_a_skill_at_a_revision_is_the_committed_one(tmp_path: Path, cli: Invoke) -> None:
    repo = tmp_path / "repo"
    write_skill(repo / "skills", "hello", description="Committed.")
    agent = write_agent(repo)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "skill")
    write_skill(repo / "skills", "hello", front="name: Broken\ndescription: d\n")  # not committed
    assert cli("validate", str(agent)).exit_code == 2
    at_head = cli("render", str(agent), "--rev", "HEAD")
    assert at_head.exit_code == 0, at_head.output
    assert "- hello: Committed." in at_head.stdout
