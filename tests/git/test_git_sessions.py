"""``runner sessions list --rev REV`` lists the sessions run at the commit REV names, including the
ones run with ``--rev`` and from ``git+URL`` references (their agent file is a copy under
RUNNER_HOME, outside the repository)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from typer.testing import Result

from runner.testing import ScriptedServer

from .conftest import Repo

Cli = Callable[..., Result]


def _run(cli: Cli, server: ScriptedServer, agent: str, prompt: str, *extra: str) -> None:
    result = cli("run", agent, *extra, "-p", prompt, env={"OPENAI_BASE_URL": server.base_url})
    assert result.exit_code == 0, result.output


def _listed(cli: Cli, *args: str) -> set[str]:
    """The first inputs of the sessions ``sessions list ARGS`` shows."""
    result = cli("sessions", "list", *args)
    assert result.exit_code == 0, result.output
    return {line.split("msgs")[-1].strip() for line in result.stdout.splitlines()}


def test_sessions_run_with_rev_and_git_urls_are_listed_by_the_commit_they_ran_at(
    cli: Cli, repo: Repo, home: Path, tmp_path: Path
) -> None:
    assert not home.resolve().is_relative_to(repo.path.resolve())  # the copies live outside the repo
    first = repo.commit({**repo.agent(persona="first"), **repo.tools("v1")})
    repo.git("tag", "v1")
    repo.commit(repo.agent(persona="second"))
    agent = str(repo.path / "probe.yaml")
    url = f"file://{repo.path}"
    with ScriptedServer([{"content": "ok"}], model="gpt-4o-mini", repeat=True) as server:
        _run(cli, server, agent, "rev by ancestry", "--rev", "HEAD~1")
        _run(cli, server, agent, "rev by tag", "--rev", "v1")
        _run(cli, server, agent, "work tree")
        _run(cli, server, f"git+{url}#v1:probe.yaml", "url at the tag")
        _run(cli, server, f"git+{url}#main:probe.yaml", "url at main")
        _run(cli, server, f"git+{repo.path}#{first}:probe.yaml", "plain path url at a commit")

    at_first = {"rev by ancestry", "rev by tag", "url at the tag", "plain path url at a commit"}
    at_second = {"work tree", "url at main"}
    assert _listed(cli, "--agent", "probe", "--rev", "HEAD~1") == at_first
    assert _listed(cli, "--agent", "probe", "--rev", "v1") == at_first
    assert _listed(cli, "--rev", first[:10]) == at_first
    assert _listed(cli, "--agent", "probe", "--rev", "HEAD") == at_second
    assert _listed(cli, "--rev", "main") == at_second

    repo.commit(repo.agent(persona="third"))  # REV is read now: HEAD~1 is the second commit
    assert _listed(cli, "--agent", "probe", "--rev", "HEAD~1") == at_second
    assert _listed(cli, "--agent", "probe", "--rev", "HEAD~2") == at_first


def test_sessions_of_a_repository_that_moved_away_match_by_commit_and_by_the_rev_they_named(
    cli: Cli, repo: Repo, home: Path, tmp_path: Path
) -> None:
    first = repo.commit({**repo.agent(), **repo.tools("v1")})
    repo.git("tag", "v1")
    with ScriptedServer([{"content": "ok"}], model="gpt-4o-mini", repeat=True) as server:
        _run(cli, server, f"git+file://{repo.path}#v1:probe.yaml", "url at the tag")
        _run(cli, server, str(repo.path / "probe.yaml"), "rev", "--rev", "v1")
    repo.path.rename(tmp_path / "gone")  # neither the work tree nor the URL answers now
    assert _listed(cli, "--rev", first) == {"url at the tag", "rev"}
    assert _listed(cli, "--rev", "v1") == {"url at the tag", "rev"}  # the name each was run with
    missing = cli("sessions", "list", "--rev", "v2")
    assert missing.exit_code == 2 and "no revision 'v2'" in missing.output
