"""``--rev REV``: the agent, its extends chain, templates and modules as committed, from git's objects."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import Result

from runner import Agent
from runner.errors import ConfigError
from runner.testing import ScriptedServer

from .conftest import Repo

Cli = Callable[..., Result]


def _status(repo: Repo) -> tuple[str, str]:
    """What a read of the revision must leave alone: the work tree's status and the index."""
    return repo.git("status", "--porcelain", "--untracked-files=all"), (
        repo.path / ".git" / "index"
    ).read_text(encoding="latin-1")


def test_validate_and_render_read_the_committed_file_not_the_work_tree(cli: Cli, repo: Repo) -> None:
    repo.commit({**repo.agent(description="committed"), **repo.tools("v1")})
    repo.write({"probe.yaml": "name: [broken"})
    before = _status(repo)
    agent = str(repo.path / "probe.yaml")
    assert cli("validate", agent).exit_code == 2
    assert cli("validate", agent, "--rev", "HEAD").exit_code == 0
    rendered = cli("render", agent, "--rev", "HEAD", "--json")
    assert rendered.exit_code == 0, rendered.output
    request = json.loads(rendered.stdout)
    assert request["messages"][0]["content"] == "You are terse. Tools: version."
    assert _status(repo) == before


def test_an_older_revision_by_name_and_by_ancestry(cli: Cli, repo: Repo) -> None:
    first = repo.commit({**repo.agent(persona="first"), **repo.tools("v1")})
    repo.git("tag", "v1")
    repo.commit(repo.agent(persona="second"))
    agent = str(repo.path / "probe.yaml")
    for rev in ("v1", "HEAD~1", first[:10]):
        request = json.loads(cli("render", agent, "--rev", rev, "--json").stdout)
        assert request["messages"][0]["content"].startswith("You are first."), rev
    assert "You are second." in cli("render", agent, "--rev", "main").stdout


def test_run_at_a_revision_runs_its_tool_module_and_the_header_records_it(
    cli: Cli, repo: Repo, home: Path
) -> None:
    commit = repo.commit({**repo.agent(folder="agents"), **repo.tools("v1", folder="agents")})
    repo.write(repo.tools("v2-uncommitted", folder="agents"))
    script: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "version", "arguments": {}}]},
        {"content": "done"},
    ]
    with ScriptedServer(script, model="gpt-4o-mini") as server:
        result = cli(
            "run", str(repo.path / "agents" / "probe.yaml"), "--rev", "HEAD", "-p", "which?",
            env={"OPENAI_BASE_URL": server.base_url},
        )  # fmt: skip
    assert result.exit_code == 0, result.output
    tool_message = server.requests[1]["messages"][-1]
    assert tool_message["role"] == "tool" and tool_message["content"] == "v1"
    (transcript,) = (home / "sessions").glob("*.jsonl")
    header = json.loads(transcript.read_text(encoding="utf-8").splitlines()[0])
    assert header["revision"] == {
        "repository": str(repo.path.resolve()),
        "rev": "HEAD",
        "commit": commit,
        "path": "agents/probe.yaml",
    }
    assert header["git"] == {"commit": commit, "dirty": False}


def test_the_revision_tree_is_cached_by_commit_and_read_only(cli: Cli, repo: Repo, home: Path) -> None:
    commit = repo.commit({**repo.agent(), **repo.tools("v1")})
    assert cli("validate", str(repo.path / "probe.yaml"), "--rev", "HEAD").exit_code == 0
    tree = home / "git" / "trees" / commit / "tree"
    assert (tree / "probe_tools.py").read_text() == repo.tools("v1")["probe_tools.py"]
    assert not (tree / "probe.yaml").stat().st_mode & 0o222
    assert [p.name for p in (home / "git" / "trees").iterdir()] == [commit]  # no temporary folder left
    marker = json.loads((home / "git" / "trees" / commit / "commit.json").read_text())
    assert marker["commit"] == commit
    assert cli("validate", str(repo.path / "probe.yaml"), "--rev", "main").exit_code == 0
    assert [p.name for p in (home / "git" / "trees").iterdir()] == [commit]


def test_extends_chain_and_template_files_come_from_the_revision(cli: Cli, repo: Repo) -> None:
    repo.commit(
        {
            "shared/base.yaml": "version: 1\nname: base\nmodel: {id: openai/gpt-4o-mini}\n"
            "prompts:\n  system: {file: ../prompts/system.md}\n",
            "prompts/system.md": "committed prompt\n",
            "agents/child.yaml": "extends: ../shared/base.yaml\nname: child\n",
        }
    )
    repo.write({"prompts/system.md": "work tree prompt\n"})
    agent = str(repo.path / "agents" / "child.yaml")
    assert "work tree prompt" in cli("render", agent).stdout
    rendered = cli("render", agent, "--rev", "HEAD")
    assert rendered.exit_code == 0, rendered.output
    assert "committed prompt" in rendered.stdout and "work tree" not in rendered.stdout


def test_extends_outside_the_repository_is_refused(cli: Cli, repo: Repo, tmp_path: Path) -> None:
    (tmp_path / "outside.yaml").write_text("version: 1\nname: outside\nmodel: {id: openai/gpt-4o-mini}\n")
    repo.commit({"agents/a.yaml": "extends: ../../outside.yaml\nname: a\n"})
    agent = str(repo.path / "agents" / "a.yaml")
    assert cli("validate", agent).exit_code == 0  # from the work tree, a path outside is allowed
    result = cli("validate", agent, "--rev", "HEAD")
    assert result.exit_code == 2
    assert result.stderr.startswith("agents/a.yaml@HEAD:1:10: extends: ")  # located, named by revision
    assert "is outside the repository at revision 'HEAD'" in result.stderr


def test_a_template_file_outside_the_repository_is_refused(cli: Cli, repo: Repo, tmp_path: Path) -> None:
    (tmp_path / "secret.md").write_text("outside text\n")
    # from the revision's tree (RUNNER_HOME/git/trees/COMMIT/tree) five levels up is tmp_path
    repo.commit(
        {
            "a.yaml": "version: 1\nname: a\nmodel: {id: openai/gpt-4o-mini}\n"
            "prompts:\n  system: {file: ../../../../../secret.md}\n"
        }
    )
    result = cli("render", str(repo.path / "a.yaml"), "--rev", "HEAD")
    assert result.exit_code == 2
    assert "the template file" in result.stderr and "outside the repository" in result.stderr
    assert "outside text" not in result.output


def test_an_uncommitted_tool_module_is_an_error_even_when_the_work_tree_is_on_sys_path(
    cli: Cli, repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo.commit(repo.agent())  # probe_tools.py is never committed
    repo.write(repo.tools("work"))
    agent = str(repo.path / "probe.yaml")
    assert cli("validate", agent).exit_code == 0
    monkeypatch.delitem(sys.modules, "probe_tools", raising=False)
    missing = cli("validate", agent, "--rev", "HEAD")
    assert missing.exit_code == 2
    assert "cannot import module 'probe_tools'" in missing.stderr
    monkeypatch.syspath_prepend(str(repo.path))  # e.g. `python -m runner` started in the work tree
    monkeypatch.delitem(sys.modules, "probe_tools", raising=False)
    shadowed = cli("validate", agent, "--rev", "HEAD")
    assert shadowed.exit_code == 2
    assert "module 'probe_tools' is not in the repository at revision 'HEAD'" in shadowed.stderr
    assert "only the work tree has it" in shadowed.stderr


def test_a_work_tree_module_already_imported_does_not_shadow_the_revisions(cli: Cli, repo: Repo) -> None:
    repo.commit({**repo.agent(), **repo.tools("v1")})
    repo.write({"probe_tools.py": repo.tools("v2")["probe_tools.py"].replace("Which version", "Work tree")})
    agent = str(repo.path / "probe.yaml")
    work = json.loads(cli("tools", agent, "--json").stdout)
    at_rev = json.loads(cli("tools", agent, "--json", "--rev", "HEAD").stdout)
    again = json.loads(cli("tools", agent, "--json").stdout)
    assert work[0]["function"]["description"].startswith("Work tree")
    assert at_rev[0]["function"]["description"].startswith("Which version")
    assert again == work


def test_a_revision_that_does_not_exist(cli: Cli, repo: Repo) -> None:
    repo.commit(repo.agent())
    result = cli("validate", str(repo.path / "probe.yaml"), "--rev", "no-such-branch")
    assert result.exit_code == 2
    assert "error: no revision 'no-such-branch' in the repository" in result.stderr
    assert cli("run", str(repo.path / "probe.yaml"), "--rev", "--all", "-p", "x").exit_code == 2


def test_a_path_that_does_not_exist_at_the_revision(cli: Cli, repo: Repo) -> None:
    repo.commit(repo.agent())
    repo.write({"new.yaml": "version: 1\nname: new\nmodel: {id: openai/gpt-4o-mini}\n"})
    result = cli("render", str(repo.path / "new.yaml"), "--rev", "HEAD")
    assert result.exit_code == 2
    assert "error: 'new.yaml' does not exist at revision 'HEAD'" in result.stderr


def test_a_shallow_clone_missing_the_revision(cli: Cli, repo: Repo, tmp_path: Path) -> None:
    repo.commit({**repo.agent(persona="old"), **repo.tools("v1")})
    repo.commit(repo.agent(persona="new"))
    shallow = tmp_path / "shallow"
    Repo(tmp_path).git("clone", "-q", "--depth", "1", f"file://{repo.path}", str(shallow))
    agent = str(shallow / "probe.yaml")
    assert cli("validate", agent, "--rev", "HEAD").exit_code == 0
    result = cli("validate", agent, "--rev", "HEAD~1")
    assert result.exit_code == 2
    assert "no revision 'HEAD~1'" in result.stderr and "shallow clone" in result.stderr


def test_rev_outside_any_repository_is_refused(cli: Cli, tmp_path: Path) -> None:
    loose = tmp_path / "loose"
    loose.mkdir()
    (loose / "a.yaml").write_text("version: 1\nname: a\nmodel: {id: openai/gpt-4o-mini}\n")
    for command in ("validate", "render", "tools"):
        result = cli(command, str(loose / "a.yaml"), "--rev", "HEAD")
        assert result.exit_code == 2, command
        assert "--rev needs a file in a git repository" in result.stderr


def test_test_batch_and_serve_take_rev(cli: Cli, repo: Repo, tmp_path: Path) -> None:
    repo.commit({**repo.agent(), **repo.tools("v1")})
    agent = str(repo.path / "probe.yaml")
    for args in (
        ("test", agent),
        ("batch", agent, "in.jsonl", "-o", str(tmp_path / "o.jsonl")),
        ("serve", agent),
    ):
        result = cli(*args, "--rev", "nope")
        assert result.exit_code == 2, args
        assert "no revision 'nope'" in result.stderr, args


def test_the_python_api_loads_a_revision(repo: Repo, home: Path) -> None:
    repo.commit({**repo.agent(description="at head"), **repo.tools("v1")})
    repo.write(repo.agent(description="in the work tree"))
    assert Agent.from_file(repo.path / "probe.yaml").config.description == "in the work tree"
    assert Agent.from_file(repo.path / "probe.yaml", rev="HEAD").config.description == "at head"


def test_a_folder_at_a_revision(cli: Cli, repo: Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    repo.commit({**repo.agent(folder="agents"), **repo.tools("v1", folder="agents")})
    repo.write({"agents/uncommitted.yaml": "version: 1\nname: [broken"})
    monkeypatch.chdir(repo.path)
    for folder in (".", "agents"):
        result = cli("validate", folder, "--rev", "HEAD")
        assert result.exit_code == 0, result.output
        assert result.stdout.splitlines() == ["agents/probe.yaml@HEAD: ok (probe)"]


def test_a_committed_symlink_out_of_the_repository_reads_nothing_outside(
    cli: Cli, repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "probe_tools.py").write_text(
        'def version() -> str:\n    """Outside."""\n    return "outside"\n'
    )
    repo.commit(repo.agent())
    (repo.path / "here").symlink_to(".")
    (repo.path / "probe_tools.py").symlink_to(outside / "probe_tools.py")  # absolute, out
    (repo.path / "sneaky.py").symlink_to("here/../../elsewhere/probe_tools.py")  # out through a link
    (repo.path / "fine.md").symlink_to("probe.yaml")
    repo.git("add", "here", "probe_tools.py", "sneaky.py", "fine.md")
    commit = repo.commit({"x.txt": "x"})
    monkeypatch.delitem(sys.modules, "probe_tools", raising=False)
    result = cli("validate", str(repo.path / "probe.yaml"), "--rev", "HEAD")
    assert result.exit_code == 2
    assert "cannot import module 'probe_tools'" in result.stderr
    tree = Path(os.environ["RUNNER_HOME"]) / "git" / "trees" / commit / "tree"
    assert not (tree / "probe_tools.py").is_symlink() and not (tree / "sneaky.py").is_symlink()
    assert (tree / "fine.md").read_text() == (tree / "probe.yaml").read_text()


def test_processes_materializing_the_same_commit_at_once_share_one_tree(repo: Repo, home: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from runner.agentfile.revisions import at_revision

    commit = repo.commit({**repo.agent(), **repo.tools("v1")})
    with ThreadPoolExecutor(6) as pool:
        paths = set(pool.map(lambda _: at_revision(repo.path / "probe.yaml", "HEAD"), range(12)))
    assert paths == {home.resolve() / "git" / "trees" / commit / "tree" / "probe.yaml"}
    assert sorted(p.name for p in (home / "git" / "trees").iterdir()) == [commit]


def test_a_module_cached_from_another_revision_does_not_stand_in_for_a_missing_one(
    repo: Repo, home: Path
) -> None:
    first = repo.commit({**repo.agent(), **repo.tools("v1")})
    repo.git("rm", "-q", "probe_tools.py")
    repo.git("commit", "-q", "-m", "the module goes")
    assert Agent.from_file(repo.path / "probe.yaml", rev=first).config.name  # imports probe_tools at first
    with pytest.raises(ConfigError) as caught:  # the same process: probe_tools is still cached
        Agent.from_file(repo.path / "probe.yaml", rev="HEAD")
    assert "module 'probe_tools' is not in the repository at revision 'HEAD'" in str(caught.value)
    assert f"comes from revision {first[:12]}" in str(caught.value)


def test_test_at_a_revision_names_the_cassette_by_its_path_in_the_repository(
    cli: Cli, repo: Repo, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # issue 23 item 21: the failure named $RUNNER_HOME/git/trees/<commit>/tree/tests/cassettes/...
    agent = (
        "version: 1\nname: t\nmodel: openai/x\ntests:\n  - name: adds\n    input: What is 2 + 3?\n"
        "    cassette: tests/cassettes/adds.jsonl\n"
    )
    repo.commit({"agent.yaml": agent})
    monkeypatch.chdir(repo.path)
    result = cli("test", "agent.yaml", "--rev", "HEAD")
    assert result.exit_code == 1
    assert "cassette not found: tests/cassettes/adds.jsonl@HEAD" in result.stdout
    assert str(home) not in result.output
