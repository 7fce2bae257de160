"""``runner audit``: every kind of thing an agent file runs or reaches is listed, and none of it runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from runner.cli.main import app

from .conftest import API_KEY, TOKEN, AuditRepo

MODULES = ("local_tools", "local_hooks", "local_models", "localpkg", "shared_hooks", "outside_hooks")


def _audit(*args: str) -> Any:
    result = CliRunner().invoke(app, ["audit", *args])
    assert "Traceback" not in result.output
    return result


def _json(path: Path) -> dict[str, Any]:
    result = _audit(str(path), "--json")
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.output)
    return data


def _by_use(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {row["use"]: row for row in rows}


def test_the_listing_names_every_kind_grouped(audit_repo: AuditRepo) -> None:
    result = _audit(str(audit_repo.main))
    assert result.exit_code == 0, result.output
    out = result.output
    headings = [
        "model", "python modules", "command hooks", "MCP stdio commands", "URLs", "OpenAPI files",
        "fetch", "files", "shell", "permissions", "confirm", "environment variables", "sub-agents",
    ]  # fmt: skip
    at = [out.index(f"\n  {h}\n") for h in headings]
    assert at == sorted(at), "the groups come in their documented order"
    assert "openai/audit-model  api_base http://127.0.0.1:9/v1  api_key set (not shown)" in out
    assert "tools[0]  local_tools -> repo/agents/local_tools.py  (in the agent's folder)" in out
    assert (
        "hooks.step_pre[0]  shared_hooks:check -> repo/shared/shared_hooks.py  (in the repository, outside"
        in out
    )
    assert (
        "hooks.session_end[0]  outside_hooks:bye -> outside/outside_hooks.py  (OUTSIDE the repository)" in out
    )
    assert "output  local_models:Answer -> repo/agents/local_models.py" in out
    assert "tools[2]  no_such_module_for_audit  NOT FOUND: no module 'no_such_module_for_audit'" in out
    assert "hooks.turn_post[0]  touch hook-marker  (in repo/agents)" in out
    assert (
        "python3 -c open('mcp-marker', 'w').write('ran') --token ***"
        "  env: MCP_MODE, MCP_TOKEN  cwd: repo/agents" in out
    )
    assert "tools[5]  mcp  http://127.0.0.1:9/mcp  headers: Authorization" in out
    assert "tools[6]  openapi  http://127.0.0.1:9/openapi.json" in out
    assert "tools[7]  openapi-base-url  http://127.0.0.1:9/api" in out
    assert "tools[7]  repo/agents/petstore.yaml" in out
    assert "tools[11]  public http(s) addresses, and private ones of 127.0.0.1:8080  headers: X-Api" in out
    assert (
        "tools[8]  repo/agents/data  read-only" in out and "tools[9]  repo/agents/scratch  read-write" in out
    )
    assert "tools[10]  cwd repo/agents/work  env: GREETING  asks before each command" in out
    for rule in ("allow  shell(command=git *)", "ask    shell(command=make *)", "deny   shell(command=rm *)"):
        assert rule in out
    assert "tools[11]  builtin:fetch  asks\n" in out and "tools[10]  builtin:shell  asks (default)" in out
    assert "tools[0]  python:local_tools  does not ask (default)" in out
    assert "AUDIT_MISSING  UNSET, no default: a run fails" in out
    assert "AUDIT_DEFAULTED  unset (its default is used)" in out  # from the extended file in the repo
    assert "AUDIT_OUTSIDE  unset (its default is used)" in out  # from the file outside it
    assert "AUDIT_API_KEY  set  secret" in out and "AUDIT_SET  set\n" in out
    assert (
        "sub-agent helper (repo/agents/sub.yaml" in out and "sub-agent deeper (repo/agents/subsub.yaml" in out
    )
    assert "tools[1]  main.yaml  a cycle: already listed above" in out


def test_json_has_the_documented_shape(audit_repo: AuditRepo) -> None:
    data = _json(audit_repo.main)
    assert data["version"] == 1
    assert set(data) == {
        "version", "agent", "file", "folder", "repository", "model", "python_modules", "commands",
        "mcp_commands", "urls", "openapi_files", "template_files", "fetch", "files", "shell", "skills",
        "permissions", "confirm", "variables", "subagents",
    }  # fmt: skip
    assert data["agent"] == "main" and data["repository"] == str(audit_repo.repo.resolve())
    assert data["model"] == {
        "id": "openai/audit-model",
        "api_base": "http://127.0.0.1:9/v1",
        "api_key": True,
        "fallbacks": [],
        "selector": None,
    }
    modules = _by_use(data["python_modules"])
    assert modules["tools[0]"]["where"] == "folder"
    assert modules["tools[0]"]["file"] == str(audit_repo.agents.resolve() / "local_tools.py")
    assert modules["tools[1]"]["module"] == "yaml" and modules["tools[1]"]["where"] == "outside"
    assert modules["tools[3]"]["file"].endswith("localpkg/inner.py")
    assert modules["hooks.step_pre[0]"]["where"] == "repository"
    assert modules["hooks.session_end[0]"]["where"] == "outside"
    assert modules["output"]["target"] == "local_models:Answer"
    assert data["commands"] == [
        {"use": "hooks.turn_post[0]", "command": "touch hook-marker", "cwd": str(audit_repo.agents.resolve())}
    ]
    (stdio,) = data["mcp_commands"]
    assert stdio["command"] == "python3" and stdio["env"] == ["MCP_MODE", "MCP_TOKEN"]
    assert stdio["cwd"] == str(audit_repo.agents.resolve())
    assert [(u["use"], u["kind"]) for u in data["urls"]] == [
        ("tools[5]", "mcp"),
        ("tools[6]", "openapi"),
        ("tools[7]", "openapi-base-url"),
    ]
    assert data["openapi_files"] == [
        {"use": "tools[7]", "file": str(audit_repo.agents.resolve() / "petstore.yaml")}
    ]
    assert (
        data["fetch"][0]["allow_hosts"] == ["127.0.0.1:8080"] and data["fetch"][0]["allow_private"] is False
    )
    assert [(f["root"].rsplit("/", 1)[1], f["mode"]) for f in data["files"]] == [
        ("data", "read-only"),
        ("scratch", "read-write"),
    ]
    (shell,) = data["shell"]
    assert shell["env"] == ["GREETING"] and shell["confirm"] is True and shell["inherit_secrets"] is False
    assert data["permissions"]["deny"] == ["shell(command=rm *)"] and len(data["permissions"]["allow"]) == 2
    confirm = _by_use(data["confirm"])
    assert confirm["tools[11]"]["written"] is True and confirm["tools[10]"] == {
        "use": "tools[10]",
        "source": "builtin:shell",
        "written": None,
        "asks": True,
    }
    variables = {v["name"]: v for v in data["variables"]}
    assert variables["AUDIT_API_KEY"] == {
        "name": "AUDIT_API_KEY",
        "set": True,
        "defaulted": False,
        "secret": True,
        "files": [str(audit_repo.main.resolve())],
    }
    assert variables["AUDIT_MISSING"]["set"] is False and variables["AUDIT_MISSING"]["defaulted"] is False
    assert variables["AUDIT_OUTSIDE"]["files"] == [str((audit_repo.outside / "base.yaml").resolve())]
    assert variables["AUDIT_SET"]["secret"] is False
    (helper,) = data["subagents"]
    assert helper["status"] == "listed" and helper["audit"]["agent"] == "helper"
    (deeper,) = helper["audit"]["subagents"]
    assert deeper["audit"]["agent"] == "deeper"
    assert deeper["audit"]["shell"][0]["confirm"] is False  # confirm: false on the sub-sub-agent's shell
    (cycle,) = deeper["audit"]["subagents"]
    assert (
        cycle["status"] == "cycle"
        and cycle["audit"] is None
        and cycle["file"] == str(audit_repo.main.resolve())
    )


def test_nothing_is_imported_started_or_run(audit_repo: AuditRepo) -> None:
    before = set(sys.modules)
    assert _audit(str(audit_repo.main)).exit_code == 0
    _json(audit_repo.main)
    assert audit_repo.markers() == []  # no module imported (not even a package's __init__), no process
    assert not (set(MODULES) | {"localpkg.inner"}) & (set(sys.modules) - before)
    # the markers work: importing the module, or running the MCP command, does leave one
    subprocess.run([sys.executable, "-c", "import local_tools"], cwd=audit_repo.agents, check=True)
    subprocess.run(
        [sys.executable, "-c", "open('mcp-marker', 'w').write('ran')"], cwd=audit_repo.agents, check=True
    )
    assert [p.name for p in audit_repo.markers()] == ["imported-local_tools", "mcp-marker"]


def test_secret_values_are_never_printed(audit_repo: AuditRepo) -> None:
    for args in ((), ("--json",)):
        result = _audit(str(audit_repo.main), *args)
        assert result.exit_code == 0
        assert API_KEY not in result.output and TOKEN not in result.output
        assert "***" in result.output  # the token given as an MCP argument


def test_a_module_that_cannot_be_found(audit_repo: AuditRepo) -> None:
    audit_repo.main.write_text(
        "version: 1\nname: lost\ntools:\n  - python: gone_module:fn\n  - python: local_tools.nothing\n",
        encoding="utf-8",
    )
    result = _audit(str(audit_repo.main))
    assert result.exit_code == 0, result.output  # an audit reports it; `runner validate` refuses it
    assert "tools[0]  gone_module:fn  NOT FOUND: no module 'gone_module'" in result.output
    assert (
        "tools[1]  local_tools.nothing  NOT FOUND: 'local_tools' is a module, not a package" in result.output
    )
    rows = _json(audit_repo.main)["python_modules"]
    assert [(r["where"], r["file"]) for r in rows] == [("missing", None), ("missing", None)]
    assert audit_repo.markers() == []


def test_an_agent_outside_any_repository(audit_repo: AuditRepo) -> None:
    agent = audit_repo.outside / "alone.yaml"
    agent.write_text("version: 1\nname: alone\ntools:\n  - python: outside_hooks\n", encoding="utf-8")
    data = _json(agent)
    assert data["repository"] is None and data["python_modules"][0]["where"] == "folder"
    result = _audit(str(agent))
    assert "not in a git repository" in result.output


def test_a_team_member_and_its_references(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "team.yaml").write_text(
        "version: 1\nagents:\n  lead:\n    tools:\n      - agent: '#worker'\n"
        "  worker:\n    tools:\n      - agent: '#lead'\n"
        "      - builtin: fetch\n        with: {allow_private: true}\n",
        encoding="utf-8",
    )
    data = _json(tmp_path / "team.yaml")
    (worker,) = data["subagents"]
    assert worker["audit"]["agent"] == "worker"
    assert worker["audit"]["fetch"][0]["reach"] == "any http(s) address"
    assert worker["audit"]["subagents"][0]["status"] == "cycle"
    assert _json_of(tmp_path / "team.yaml", "--agent", "worker")["agent"] == "worker"


def _json_of(path: Path, *args: str) -> dict[str, Any]:
    result = _audit(str(path), "--json", *args)
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.output)
    return data


def test_a_sub_agent_that_cannot_be_loaded_is_reported(audit_repo: AuditRepo) -> None:
    (audit_repo.agents / "sub.yaml").write_text("version: 1\nname: [broken\n", encoding="utf-8")
    data = _json(audit_repo.main)
    (sub,) = data["subagents"]
    assert sub["status"] == "error" and sub["audit"] is None and sub["error"]


def test_bad_input_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.yaml").write_text("version: 1\nname: x\ntools: 3\n", encoding="utf-8")
    result = _audit("bad.yaml")
    assert result.exit_code == 2 and "bad.yaml:3" in result.output
    missing = _audit("nowhere.yaml")
    assert missing.exit_code == 2 and "nowhere.yaml" in missing.output


def test_audit_imports_no_heavy_module(audit_repo: AuditRepo) -> None:
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "runner", "audit", str(audit_repo.main), "--json"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    names = {
        line.rsplit("|", 1)[1].strip().split(".")[0]
        for line in result.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    assert "runner" in names and not {"litellm", "mcp", "httpx", "openai", "starlette", "uvicorn"} & names
    assert audit_repo.markers() == []


def test_an_unset_variable_without_default_is_listed_not_fatal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AUDIT_NO_KEY", raising=False)
    monkeypatch.delenv("AUDIT_NO_MODEL", raising=False)
    (tmp_path / "a.yaml").write_text(
        "version: 1\nname: a\nmodel:\n  id: ${AUDIT_NO_MODEL}\n  api_key: ${AUDIT_NO_KEY}\n", encoding="utf-8"
    )
    assert CliRunner().invoke(app, ["validate", "a.yaml"]).exit_code == 2  # a run would fail
    data = _json(tmp_path / "a.yaml")
    assert data["model"]["id"] == "<AUDIT_NO_MODEL unset>" and data["model"]["api_key"] is False
    variables = {v["name"]: (v["set"], v["defaulted"], v["secret"]) for v in data["variables"]}
    assert variables == {"AUDIT_NO_MODEL": (False, False, False), "AUDIT_NO_KEY": (False, False, True)}
    assert "AUDIT_NO_KEY  UNSET, no default: a run fails  secret" in _audit("a.yaml").output


def test_rev_audits_the_file_as_committed_not_the_work_tree(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    repo = tmp_path / "rev"
    repo.mkdir()
    (repo / "agent.yaml").write_text("version: 1\nname: revved\nmodel: openai/x\ntools:\n  - builtin: time\n")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "one"], check=True)
    (repo / "agent.yaml").write_text(
        "version: 1\nname: revved\nmodel: openai/x\ntools:\n  - builtin: shell\n"
    )
    runner = str(Path(sys.executable).parent / "runner")
    env = {**os.environ, "RUNNER_HOME": str(tmp_path / "home")}

    committed = subprocess.run(
        [runner, "audit", str(repo / "agent.yaml"), "--rev", "HEAD"], capture_output=True, text=True, env=env
    )
    work_tree = subprocess.run(
        [runner, "audit", str(repo / "agent.yaml")], capture_output=True, text=True, env=env
    )
    assert committed.returncode == 0 and work_tree.returncode == 0, committed.stderr + work_tree.stderr
    assert "builtin:shell" not in committed.stdout and "agent.yaml@HEAD" in committed.stdout
    assert "builtin:shell" in work_tree.stdout
    missing = subprocess.run(
        [runner, "audit", str(repo / "agent.yaml"), "--rev", "nope"], capture_output=True, text=True, env=env
    )
    assert missing.returncode == 2 and "no revision 'nope'" in missing.stderr


def test_a_url_password_is_masked_whatever_the_variable_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    password = "hunter2-proxy-pw"
    monkeypatch.setenv("PROXYPASS", password)
    monkeypatch.chdir(tmp_path)
    agent = tmp_path / "proxied.yaml"
    agent.write_text(
        "version: 1\nname: proxied\n"
        "model: {id: openai/m, api_base: 'https://user:${PROXYPASS}@proxy.example/v1'}\n"
        "tools:\n  - mcp: 'https://bot:${PROXYPASS}@mcp.example/mcp'\n"
        "hooks:\n  turn_post:\n    - command: curl -s https://bob:${PROXYPASS}@h.example/x\n",
        encoding="utf-8",
    )
    text, data = _audit(str(agent)), _json(agent)
    assert text.exit_code == 0, text.output
    for out in (text.output, json.dumps(data)):
        assert password not in out
    assert "api_base https://user:***@proxy.example/v1" in text.output
    assert "tools[0]  mcp  https://bot:***@mcp.example/mcp" in text.output
    assert "curl -s https://bob:***@h.example/x" in text.output
    (variable,) = data["variables"]
    assert variable["name"] == "PROXYPASS" and variable["secret"] is True


def test_a_fetch_that_sends_the_trace_context_says_so(tmp_path: Path) -> None:
    agent = tmp_path / "agent.yaml"
    agent.write_text(
        "version: 1\nname: a\ntools:\n  - builtin: fetch\n    with: {propagate_trace: true}\n"
        "  - builtin: fetch\n    id: quiet\n",
        encoding="utf-8",
    )
    data = _json(agent)
    assert [use["propagate_trace"] for use in data["fetch"]] == [True, False]
    text = _audit(str(agent))
    assert text.exit_code == 0, text.output
    assert text.output.count("sends the trace context (traceparent) with --otel") == 1
