"""``runner diff [REV1] [REV2] AGENT``: the semantic diff of an agent's resolved configuration."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from typer.testing import Result

from runner.agentdiff import compare

from .conftest import Repo

Cli = Callable[..., Result]

TOOLS_V2 = '''\
def version(verbose: bool = False) -> str:
    """Which version of the tools answered."""
    return "v2"


def extra(n: int) -> int:
    """A new tool."""
    return n
'''


def test_no_change_is_empty_and_exit_code_zero(cli: Cli, repo: Repo) -> None:
    repo.commit({**repo.agent(), **repo.tools("v1")})
    agent = str(repo.path / "probe.yaml")
    result = cli("diff", agent, "--exit-code")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("no differences between probe.yaml@HEAD (")
    assert json.loads(cli("diff", agent, "--json").stdout)["same"] is True


def test_head_against_the_work_tree_shows_every_kind_of_change(cli: Cli, repo: Repo) -> None:
    repo.commit({**repo.agent(), **repo.tools("v1")})
    repo.write({**repo.agent(temperature=0.7, persona="chatty", max_steps=9), "probe_tools.py": TOOLS_V2})
    agent = str(repo.path / "probe.yaml")
    result = cli("diff", agent, "--exit-code")
    assert result.exit_code == 1, result.output
    out = result.stdout
    assert out.startswith("--- probe.yaml@HEAD (") and "probe.yaml (work tree)\n" in out
    assert "  model.temperature: 0 -> 0.7" in out
    assert "  limits.max_steps: 5 -> 9" in out
    assert "  + extra" in out
    assert "  ~ version" in out and "parameters.properties.verbose: (none) -> " in out
    assert "-You are terse. Tools: version." in out
    assert "+You are chatty. Tools: version, extra." in out
    assert cli("diff", agent).exit_code == 0  # without --exit-code a diff is not a failure


def test_json_diff_of_two_revisions(cli: Cli, repo: Repo) -> None:
    first = repo.commit({**repo.agent(), **repo.tools("v1")})
    repo.commit({"probe_tools.py": TOOLS_V2})
    repo.commit(
        {
            "probe.yaml": repo.agent()["probe.yaml"]
            + "permissions:\n  deny: [extra]\noutput:\n  type: object\n  properties: {a: {type: string}}\n"
        }
    )
    repo.write(repo.agent(description="work tree only"))
    result = cli("diff", first, "HEAD", str(repo.path / "probe.yaml"), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["same"] is False
    assert data["old"].startswith(f"probe.yaml@{first} (") and data["new"].startswith("probe.yaml@HEAD (")
    assert data["tools"]["added"] == ["extra"] and data["tools"]["removed"] == []
    (change,) = data["tools"]["changed"]["version"]
    assert change["path"] == "parameters.properties.verbose" and "before" not in change
    assert change["after"]["type"] == "boolean"
    paths = {c["path"]: c for c in data["settings"]}
    assert paths["permissions.deny"] == {"path": "permissions.deny", "before": [], "after": ["extra"]}
    assert paths["output"]["after"]["properties"] == {"a": {"type": "string"}}
    assert "description" not in paths  # the work tree is not one of the two sides
    assert "system" in data["prompts"]


def test_one_revision_is_compared_with_the_work_tree(cli: Cli, repo: Repo) -> None:
    repo.commit({**repo.agent(description="one"), **repo.tools("v1")})
    repo.commit({**repo.agent(description="two"), **repo.tools("v1")})
    result = cli("diff", "HEAD~1", str(repo.path / "probe.yaml"), "--json")
    data = json.loads(result.stdout)
    assert data["new"].endswith("(work tree)")
    assert data["settings"] == [{"path": "description", "before": "one", "after": "two"}]


def test_hooks_and_mcp_sources_compare_by_configuration(cli: Cli, repo: Repo) -> None:
    base = repo.agent()["probe.yaml"]
    repo.commit({**repo.agent(), **repo.tools("v1")})
    repo.write(
        {
            "probe.yaml": base.replace("limits:", "  - mcp: {command: python3 -m server}\nlimits:")
            + "hooks:\n  turn_post:\n    - command: echo done\n"
        }
    )
    data = json.loads(cli("diff", str(repo.path / "probe.yaml"), "--json").stdout)
    paths = {c["path"]: c for c in data["settings"]}
    assert paths["other_sources"]["after"][0]["kind"] == "mcp"
    assert paths["hooks.turn_post"]["after"][0]["value"] == "echo done"


def test_bad_input(cli: Cli, repo: Repo, tmp_path: Path) -> None:
    repo.commit({**repo.agent(), **repo.tools("v1")})
    agent = str(repo.path / "probe.yaml")
    missing = cli("diff", "nope", agent)
    assert missing.exit_code == 2 and "no revision 'nope'" in missing.stderr
    many = cli("diff", "a", "b", "c", agent)
    assert many.exit_code == 2 and "at most two revisions" in many.stderr
    (tmp_path / "loose.yaml").write_text("version: 1\nname: a\nmodel: {id: openai/gpt-4o-mini}\n")
    loose = cli("diff", str(tmp_path / "loose.yaml"))
    assert loose.exit_code == 2 and "--rev needs a file in a git repository" in loose.stderr


def test_the_library_api_and_secrets_stay_out(repo: Repo, home: Path, monkeypatch: object) -> None:
    import os

    os.environ["PROBE_SECRET"] = "s3cr3t-value-123"
    try:
        repo.commit({**repo.agent(), **repo.tools("1")})  # the module it names, committed
        text = repo.agent()["probe.yaml"].replace("${OPENAI_API_KEY:-sk-test}", "${PROBE_SECRET}")
        assert "PROBE_SECRET" in text
        text = text.replace("description: first", "description: second")
        repo.write({"probe.yaml": text})
        # In a fresh interpreter: in a test worker, a module another test imported hid that this
        # test had not committed the one its agent names.
        code = (
            "import json, sys; from runner.agentdiff import diff_agent; "
            "r = diff_agent(sys.argv[1], 'HEAD', None); "
            "print(json.dumps({'same': r.same, 'diff': r.to_json()}))"
        )
        done = subprocess.run(
            [sys.executable, "-c", code, str(repo.path / "probe.yaml")],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout)
        assert not result["same"]
        assert "s3cr3t-value-123" not in json.dumps(result["diff"])
        assert compare(*[{"prompts": {}, "tools": {}, "x": 1}] * 2).same
    finally:
        del os.environ["PROBE_SECRET"]


def test_a_helper_module_of_a_tool_comes_from_the_same_side(cli: Cli, repo: Repo) -> None:
    tools = (
        "from probe_helper import DOC\n\n\ndef version() -> str:\n    return 'x'\n\n\nversion.__doc__ = DOC\n"
    )
    repo.commit({**repo.agent(), "probe_tools.py": tools, "probe_helper.py": "DOC = 'committed helper'\n"})
    repo.write({"probe_helper.py": "DOC = 'work tree helper'\n"})
    agent = str(repo.path / "probe.yaml")
    for _ in range(2):  # either order of loading, in one process
        data = json.loads(cli("diff", agent, "--json", "--import-code").stdout)
        assert data["compared"]["python"] == "imported"
        (change,) = data["tools"]["changed"]["version"]
        assert (change["before"], change["after"]) == ("committed helper", "work tree helper")
        data = json.loads(cli("diff", "HEAD", "HEAD", agent, "--json", "--import-code").stdout)
        assert data["same"] is True
    # read from the source, a docstring set by code is not seen: the default says how it read them
    data = json.loads(cli("diff", agent, "--json").stdout)
    assert data["same"] is True and data["compared"]["python"] == "source"
