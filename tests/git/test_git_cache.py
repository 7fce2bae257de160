"""The revision cache holds exactly each commit's content whenever it is used (issue 23, items 3, 4, 12).

Each test performs an attack on ``$RUNNER_HOME/git`` (a model writing into a tree, files planted or
changed on disk, a checkout carrying its own ``.runner``, a forged object in a cached clone) and
checks that the next use of the commit runs what was committed.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import tracemalloc
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import Result

from runner.agentfile.revisions import at_revision
from runner.testing import ScriptedServer

from .conftest import Repo

Cli = Callable[..., Result]

PLANTED = 'def version() -> str:\n    """Planted."""\n    return "planted"\n'
FILES = "  - builtin: files\n    with: {root: .}\n"


def _run_version(cli: Cli, agent: Path, *extra: dict[str, Any]) -> tuple[Result, list[str]]:
    """``runner run AGENT --rev HEAD``: the model calls ``extra`` tools, then ``version``; the tool
    results it was sent back."""
    sys.modules.pop("probe_tools", None)  # each run imports its tools afresh, as a new process would
    script: list[dict[str, Any]] = [
        *({"tool_calls": [call]} for call in extra),
        {"tool_calls": [{"name": "version", "arguments": {}}]},
        {"content": "done"},
    ]
    with ScriptedServer(script, model="gpt-4o-mini") as server:
        result = cli("run", str(agent), "--rev", "HEAD", "-p", "go", env={"OPENAI_BASE_URL": server.base_url})
    results = [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "tool"]
    return result, results


def test_a_model_cannot_plant_a_package_in_the_tree_it_runs_from(cli: Cli, repo: Repo, home: Path) -> None:
    agent = repo.agent()["probe.yaml"].replace("tools:\n", "tools:\n" + FILES)
    commit = repo.commit({"probe.yaml": agent, **repo.tools("v1")})
    write = {"name": "files_write", "arguments": {"path": "probe_tools/__init__.py", "content": PLANTED}}
    result, results = _run_version(cli, repo.path / "probe.yaml", write)
    assert result.exit_code == 0, result.output
    assert "runner's own cache of revisions" in results[0] and results[1] == "v1"
    tree = home / "git" / "trees" / commit / "tree"
    assert not (tree / "probe_tools").exists()
    _, again = _run_version(cli, repo.path / "probe.yaml")
    assert again == ["v1"]


def test_a_root_covering_runner_home_cannot_write_into_the_cache(cli: Cli, repo: Repo, home: Path) -> None:
    """The work-tree agent's files root holds RUNNER_HOME; the model aims at a tree of the cache."""
    commit = repo.commit({**repo.agent(), **repo.tools("v1")})
    at_revision(repo.path / "probe.yaml", "HEAD")
    agent = repo.path.parent / "writer.yaml"
    agent.write_text(
        "version: 1\nname: writer\nmodel: {id: openai/gpt-4o-mini, api_base: '${OPENAI_BASE_URL}', "
        "api_key: '${OPENAI_API_KEY:-sk-test}'}\n"
        f"tools:\n  - builtin: files\n    with: {{root: {home.parent}}}\n"
    )
    planted = f"home/git/trees/{commit}/tree/probe_tools/__init__.py"
    changed = f"home/git/trees/{commit}/tree/probe_tools.py"
    script: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "files_write", "arguments": {"path": p, "content": PLANTED}}]}
        for p in (planted, changed, f"home/git/trees/{commit}/commit.json")
    ]
    with ScriptedServer([*script, {"content": "done"}], model="gpt-4o-mini") as server:
        result = cli("run", str(agent), "-p", "go", env={"OPENAI_BASE_URL": server.base_url})
    assert result.exit_code == 0, result.output
    results = [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "tool"]
    assert len(results) == 3 and all("runner's own cache of revisions" in r for r in results), results
    assert (home / "git" / "trees" / commit / "tree" / "probe_tools.py").read_text() == repo.tools("v1")[
        "probe_tools.py"
    ]
    _, again = _run_version(cli, repo.path / "probe.yaml")
    assert again == ["v1"]


def test_files_added_or_changed_on_disk_are_gone_at_the_next_use(cli: Cli, repo: Repo, home: Path) -> None:
    commit = repo.commit({**repo.agent(), **repo.tools("v1"), "docs/readme.md": "committed\n"})
    tree = Path(at_revision(repo.path / "probe.yaml", "HEAD")).parent
    (tree / "probe_tools").mkdir()  # as root, folder and file modes stop nothing
    (tree / "probe_tools" / "__init__.py").write_text(PLANTED)
    result, results = _run_version(cli, repo.path / "probe.yaml")
    assert results == ["v1"], result.output
    assert not (tree / "probe_tools").exists()
    for attack in ("change", "mode", "extra-folder", "hard-link", "pyc"):
        target = tree / "probe_tools.py"
        if attack == "change":
            target.chmod(0o644)
            target.write_text(PLANTED)
            target.chmod(0o444)
        elif attack == "mode":
            target.chmod(0o666)
        elif attack == "extra-folder":
            (tree / "docs" / "empty").mkdir()
        elif attack == "hard-link":
            outside = repo.path.parent / "outside.py"
            shutil.copy(target, outside)
            target.unlink()
            target.hardlink_to(outside)
        else:
            cache = tree / "__pycache__"
            cache.mkdir(exist_ok=True)
            (cache / f"probe_tools.{sys.implementation.cache_tag}.pyc").write_bytes(b"planted")
        _, results = _run_version(cli, repo.path / "probe.yaml")
        assert results == ["v1"], attack
        assert target.read_text() == repo.tools("v1")["probe_tools.py"], attack
        assert target.stat().st_mode & 0o777 == 0o444 and target.stat().st_nlink == 1, attack
        assert not (tree / "docs" / "empty").exists() and not (tree / "__pycache__").exists(), attack
    assert sorted(p.name for p in (home / "git" / "trees").iterdir()) == [commit]  # nothing stale left


def test_a_checkout_cannot_plant_the_tree_of_a_pinned_commit(
    cli: Cli, repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """RUNNER_HOME defaults to ./.runner: a checkout may carry a ``.runner/git/trees/<sha>``."""
    commit = repo.commit(
        {**repo.agent(folder="agents", persona="trusted"), **repo.tools("v1", folder="agents")}
    )
    checkout = tmp_path / "checkout"
    planted = checkout / ".runner" / "git" / "trees" / commit
    (planted / "tree" / "agents").mkdir(parents=True)
    shutil.copy(repo.path / "agents" / "probe_tools.py", planted / "tree" / "agents")
    text = repo.agent(persona="the attacker")["probe.yaml"]
    (planted / "tree" / "agents" / "probe.yaml").write_text(text)
    marker = {"commit": commit, "repository": str(repo.path), "rev": commit}
    (planted / "commit.json").write_text(json.dumps(marker))
    monkeypatch.delenv("RUNNER_HOME")
    monkeypatch.chdir(checkout)
    result = cli("render", f"git+file://{repo.path}#{commit}:agents/probe.yaml")
    assert result.exit_code == 0, result.output
    assert "You are trusted." in result.stdout and "attacker" not in result.stdout
    assert "attacker" not in (planted / "tree" / "agents" / "probe.yaml").read_text()


def _forge_loose_object(git_dir: Path, sha: str, content: bytes) -> None:
    """Replace the loose object ``sha`` by another blob under the same name."""
    path = git_dir / "objects" / sha[:2] / sha[2:]
    path.chmod(0o644)
    path.write_bytes(zlib.compress(b"blob %d\0" % len(content) + content))


def test_a_forged_object_in_a_cached_clone_is_refused(cli: Cli, repo: Repo, home: Path) -> None:
    commit = repo.commit({**repo.agent(persona="trusted"), **repo.tools("v1")})
    ref = f"git+file://{repo.path}#{commit}:probe.yaml"
    assert cli("validate", ref).exit_code == 0
    shutil.rmtree(home / "git" / "trees")
    (clone,) = (home / "git" / "repos").glob("*.git")
    shutil.rmtree(clone / "objects" / "pack")  # the planted clone keeps its objects loose
    shutil.copytree(repo.path / ".git" / "objects", clone / "objects", dirs_exist_ok=True)
    blob = repo.git("rev-parse", f"{commit}:probe.yaml")
    _forge_loose_object(clone, blob, repo.agent(persona="the attacker")["probe.yaml"].encode())
    result = cli("render", ref)
    assert result.exit_code == 2
    assert "does not hash to its id" in result.stderr and "attacker" not in result.stdout


def test_a_large_blob_is_written_whole_in_bounded_memory(repo: Repo, home: Path) -> None:
    size = 24 * 1024 * 1024 + 7
    pattern = hashlib.sha256(b"seed").digest() * 8
    body = (pattern * (size // len(pattern) + 1))[:size]
    (repo.path / "big.bin").write_bytes(body)
    repo.commit(repo.agent())
    repo.git("add", "big.bin")
    repo.git("commit", "-q", "-m", "big")
    del body
    tracemalloc.start()
    try:
        tree = Path(at_revision(repo.path / "probe.yaml", "HEAD")).parent
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * 1024 * 1024, f"materializing held {peak} bytes at once"
    written = (tree / "big.bin").read_bytes()
    assert len(written) == size
    assert written == (repo.path / "big.bin").read_bytes()


def test_an_intact_tree_is_reused_not_written_again(cli: Cli, repo: Repo, home: Path) -> None:
    """The check passes for the tree as written and as used: importing its modules adds nothing."""
    repo.commit({**repo.agent(), **repo.tools("v1"), "bin/tool.sh": "#!/bin/sh\n", "link.md": "x"})
    (repo.path / "bin" / "tool.sh").chmod(0o755)
    (repo.path / "alias.md").symlink_to("link.md")
    repo.git("add", "-A")
    repo.git("commit", "-q", "-m", "more")
    _, results = _run_version(cli, repo.path / "probe.yaml")
    assert results == ["v1"]
    tree = Path(at_revision(repo.path / "probe.yaml", "HEAD")).parent
    written = (tree.stat().st_ino, (tree / "probe_tools.py").stat().st_ino)
    assert not (tree / "__pycache__").exists()  # no bytecode is written into a revision's tree
    _, results = _run_version(cli, repo.path / "probe.yaml")
    assert results == ["v1"]
    assert (tree.stat().st_ino, (tree / "probe_tools.py").stat().st_ino) == written
    assert (tree / "alias.md").is_symlink() and (tree / "bin" / "tool.sh").stat().st_mode & 0o777 == 0o555


def test_links_are_kept_only_when_they_stay_inside_the_tree() -> None:
    from runner.agentfile.gitobjects import kept_links

    links = {
        "here": ".",
        "docs/up": "..",
        "docs/readme": "../README.md",
        "out": "../x",
        "abs": "/etc/passwd",
        "through": "out/y",  # through a link that leads out
        "sneaky": "here/../../x",
        "docs/deep": "up/../x",  # docs/up is the root: its parent is outside
        "docs/dangling": "up/missing/x",  # inside, to nothing
        "loop": "loop2",
        "loop2": "loop",
    }
    assert sorted(kept_links(links)) == ["docs/dangling", "docs/readme", "docs/up", "here"]
