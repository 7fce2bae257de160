"""``git+URL#REV:path``: an agent from another repository, fetched into RUNNER_HOME, by commit."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from typer.testing import Result

from .conftest import Repo

Cli = Callable[..., Result]


def test_run_from_a_file_url_reference(cli: Cli, repo: Repo, home: Path) -> None:
    commit = repo.commit(
        {**repo.agent(folder="agents", persona="remote"), **repo.tools("v1", folder="agents")}
    )
    ref = f"git+file://{repo.path}#main:agents/probe.yaml"
    rendered = cli("render", ref, "--json")
    assert rendered.exit_code == 0, rendered.output
    assert json.loads(rendered.stdout)["messages"][0]["content"] == "You are remote. Tools: version."
    assert len(list((home / "git" / "repos").glob("*.git"))) == 1
    assert (home / "git" / "trees" / commit / "tree" / "agents" / "probe_tools.py").is_file()
    assert cli("validate", ref).exit_code == 0
    assert cli("tools", ref).exit_code == 0


def test_a_plain_path_url_and_a_new_commit_fetched_later(cli: Cli, repo: Repo, home: Path) -> None:
    repo.commit({**repo.agent(persona="one"), **repo.tools("v1")})
    assert "You are one." in cli("render", f"git+{repo.path}#main:probe.yaml").stdout
    second = repo.commit(repo.agent(persona="two"))
    assert "You are two." in cli("render", f"git+{repo.path}#main:probe.yaml").stdout  # a branch is fetched
    assert "You are two." in cli("render", f"git+{repo.path}#{second}:probe.yaml").stdout
    assert "You are one." in cli("render", f"git+{repo.path}#{second}~1:probe.yaml").stdout
    assert len(list((home / "git" / "repos").glob("*.git"))) == 1


def test_a_pinned_commit_already_cached_needs_no_fetch(cli: Cli, repo: Repo, tmp_path: Path) -> None:
    commit = repo.commit({**repo.agent(persona="pinned"), **repo.tools("v1")})
    ref = f"git+file://{repo.path}#{commit}:probe.yaml"
    assert cli("validate", ref).exit_code == 0
    repo.path.rename(tmp_path / "gone")  # the origin disappears: the cache still holds the commit
    result = cli("render", ref)
    assert result.exit_code == 0, result.output
    assert "You are pinned." in result.stdout


def test_a_repository_that_cannot_be_fetched(cli: Cli, tmp_path: Path) -> None:
    result = cli("run", f"git+file://{tmp_path}/nowhere#main:agent.yaml", "-p", "hi")
    assert result.exit_code == 2
    assert f"error: cannot fetch the repository file://{tmp_path}/nowhere" in result.stderr


def test_a_revision_or_path_the_remote_lacks(cli: Cli, repo: Repo) -> None:
    repo.commit(repo.agent())
    missing_rev = cli("validate", f"git+file://{repo.path}#nope:probe.yaml")
    assert missing_rev.exit_code == 2
    assert "no revision 'nope'" in missing_rev.stderr or "cannot fetch" in missing_rev.stderr
    missing_path = cli("validate", f"git+file://{repo.path}#main:other.yaml")
    assert missing_path.exit_code == 2
    assert "'other.yaml' does not exist at revision 'main'" in missing_path.stderr


def test_malformed_and_escaping_references(cli: Cli, repo: Repo) -> None:
    repo.commit(repo.agent())
    for ref in (f"git+file://{repo.path}", f"git+file://{repo.path}#main", "git+#main:probe.yaml"):
        result = cli("validate", ref)
        assert result.exit_code == 2, ref
        assert "cannot read the reference" in result.stderr and "git+URL#REV:path" in result.stderr
    escaping = cli("validate", f"git+file://{repo.path}#main:../probe.yaml")
    assert escaping.exit_code == 2 and "leaves the repository" in escaping.stderr
    both = cli("validate", f"git+file://{repo.path}#main:probe.yaml", "--rev", "HEAD")
    assert both.exit_code == 2 and "names its revision after '#'" in both.stderr


def test_the_header_of_a_remote_run_names_the_url(cli: Cli, repo: Repo, home: Path) -> None:
    from runner.testing import ScriptedServer

    commit = repo.commit({**repo.agent(), **repo.tools("remote-v1")})
    url = f"file://{repo.path}"
    with ScriptedServer([{"content": "hello"}], model="gpt-4o-mini") as server:
        result = cli(
            "run", f"git+{url}#main:probe.yaml", "-p", "hi", env={"OPENAI_BASE_URL": server.base_url}
        )
    assert result.exit_code == 0, result.output
    (transcript,) = (home / "sessions").glob("*.jsonl")
    header = json.loads(transcript.read_text(encoding="utf-8").splitlines()[0])
    assert header["revision"] == {"repository": url, "rev": "main", "commit": commit, "path": "probe.yaml"}
