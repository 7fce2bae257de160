"""A git repository with an agent that uses every kind of source and hook, for ``runner audit``.

``repo/agents/main.yaml`` extends ``repo/shared/base.yaml`` (in the repository, outside the agent's
folder), which extends ``outside/base.yaml`` (outside the repository). Every Python module writes a
marker file when it is imported, and the MCP server and the command hook would write one when run:
an audit must leave no marker behind.
"""

from __future__ import annotations

import subprocess
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

API_KEY = "sk-audit-secret-value-1234"
TOKEN = "tok-audit-secret-value-5678"

MAIN = """\
version: 1
name: main
description: "main agent for ${AUDIT_MISSING}"
extends: ../shared/base.yaml
model:
  id: openai/audit-model
  api_base: ${AUDIT_API_BASE:-http://127.0.0.1:9/v1}
  api_key: ${AUDIT_API_KEY}
tools:
  - python: local_tools
  - python: yaml:safe_load
  - python: no_such_module_for_audit
  - python: localpkg.inner:tool
  - id: stdio
    mcp:
      command: python3
      args: ["-c", "open('mcp-marker', 'w').write('ran')", "--token", "${AUDIT_TOKEN}"]
      env: {MCP_TOKEN: "${AUDIT_TOKEN}", MCP_MODE: "${AUDIT_SET}"}
      cwd: .
  - mcp: http://127.0.0.1:9/mcp
    headers: {Authorization: "Bearer ${AUDIT_TOKEN}"}
  - openapi: http://127.0.0.1:9/openapi.json
  - openapi: petstore.yaml
    base_url: http://127.0.0.1:9/api
  - builtin: files
    with: {root: data, allow_write: false}
  - builtin: files
    with: {root: scratch}
  - builtin: shell
    with: {cwd: work, env: {GREETING: hi}}
  - builtin: fetch
    with: {allow_hosts: ["127.0.0.1:8080"], headers: {X-Api: "${AUDIT_TOKEN}"}}
    confirm: true
  - agent: sub.yaml
permissions:
  allow: ["shell(command=git *)", "shell(command=ls *)"]
  ask: ["shell(command=make *)"]
  deny: ["shell(command=rm *)"]
hooks:
  turn_pre:
    - python: local_hooks:before
  turn_post:
    - command: "touch hook-marker"
output:
  python: local_models:Answer
"""

SHARED_BASE = """\
extends: ../../outside/base.yaml
vars:
  region: ${AUDIT_DEFAULTED:-eu}
hooks:
  step_pre:
    - python: shared_hooks:check
"""

OUTSIDE_BASE = """\
vars:
  place: ${AUDIT_OUTSIDE:-here}
hooks:
  session_end:
    - python: outside_hooks:bye
"""

SUB = """\
version: 1
name: helper
model: openai/audit-model
tools:
  - python: local_tools
  - agent: subsub.yaml
"""

SUBSUB = """\
version: 1
name: deeper
model: openai/audit-model
tools:
  - builtin: shell
    confirm: false
  - agent: main.yaml
"""


def _marker_module(name: str, body: str = "") -> str:
    return (
        "from pathlib import Path\n"
        f"Path(__file__).with_name('imported-{name}').write_text('imported')\n" + textwrap.dedent(body)
    )


@dataclass
class AuditRepo:
    root: Path
    repo: Path
    agents: Path
    outside: Path

    @property
    def main(self) -> Path:
        return self.agents / "main.yaml"

    def markers(self) -> list[Path]:
        """Every marker file an import or a started process would have left."""
        return sorted(
            p for p in self.root.rglob("*") if p.name.startswith("imported-") or p.name.endswith("-marker")
        )


@pytest.fixture
def audit_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AuditRepo:
    repo, outside = tmp_path / "repo", tmp_path / "outside"
    agents, shared = repo / "agents", repo / "shared"
    for folder in (agents, shared, outside, agents / "localpkg"):
        folder.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    files = {
        agents / "main.yaml": MAIN,
        agents / "sub.yaml": SUB,
        agents / "subsub.yaml": SUBSUB,
        agents / "petstore.yaml": "openapi: 3.0.0\ninfo: {title: pets, version: '1'}\npaths: {}\n",
        agents / "local_tools.py": _marker_module("local_tools", "def hello() -> str:\n    return 'hi'\n"),
        agents / "local_hooks.py": _marker_module("local_hooks", "def before(event):\n    return None\n"),
        agents / "local_models.py": _marker_module("local_models", "class Answer:\n    pass\n"),
        agents / "localpkg" / "__init__.py": _marker_module("localpkg"),
        agents / "localpkg" / "inner.py": _marker_module("inner", "def tool() -> str:\n    return 'x'\n"),
        shared / "base.yaml": SHARED_BASE,
        shared / "shared_hooks.py": _marker_module("shared_hooks", "def check(event):\n    return None\n"),
        outside / "base.yaml": OUTSIDE_BASE,
        outside / "outside_hooks.py": _marker_module("outside_hooks", "def bye(event):\n    return None\n"),
    }
    for path, text in files.items():
        path.write_text(text, encoding="utf-8")
    for name in ("AUDIT_MISSING", "AUDIT_DEFAULTED", "AUDIT_OUTSIDE", "AUDIT_API_BASE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AUDIT_API_KEY", API_KEY)
    monkeypatch.setenv("AUDIT_TOKEN", TOKEN)
    monkeypatch.setenv("AUDIT_SET", "stdio")
    monkeypatch.setenv("RUNNER_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    return AuditRepo(tmp_path, repo, agents, outside)
