"""docs/*.md and the README: every agent and team file they show runs as written against a local
OpenAI-compatible server, with ``OPENAI_BASE_URL`` set and no key (issue 23, item 19).

Each ```yaml block that is a whole file (``version: 1``) is written beside a copy of ``examples/``
(so its prompt files and tool modules resolve as they do for a reader of the docs) and run with
``runner run FILE -p ...`` against the scripted server."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from runner.cli.main import app
from runner.testing import ScriptedServer

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
EXAMPLES = [
    pytest.param(block, id=f"{page.relative_to(ROOT)}:{number}")
    for page in PAGES
    for number, block in enumerate(
        re.findall(r"```yaml\n(.*?)```", page.read_text(encoding="utf-8"), re.S), 1
    )
    if re.search(r"^version: 1$", block, re.M)
]


def test_the_docs_have_agent_and_team_examples() -> None:
    ids = [param.id for param in EXAMPLES]
    assert any(i.startswith("README.md") for i in ids)
    assert any(i.startswith("docs/workflows.md") for i in ids)
    assert any(i.startswith("docs/structured-output.md") for i in ids)


def _answer(body: Mapping[str, Any]) -> Mapping[str, Any]:
    """A plausible answer for each example's agent, told apart by its system prompt."""
    system = " ".join(str(m.get("content")) for m in body["messages"] if m.get("role") == "system")
    if "Split the question" in system:
        return {"content": json.dumps({"tasks": ["the first tubes", "the point-contact transistor"]})}
    if "Research one task" in system:
        return {"content": "A paragraph on it."}
    if body.get("response_format") or "city" in json.dumps(body.get("tools") or []):
        return {"content": json.dumps({"city": "Vancouver", "temps": [11, 12, 9]})}
    return {"content": "It is 12 °C and cloudy in Vancouver."}


@pytest.mark.parametrize("block", EXAMPLES)
def test_every_agent_example_runs_against_a_local_server_without_a_key(
    block: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "examples"
    shutil.copytree(ROOT / "examples", folder)
    agent = folder / "doc_example.yaml"
    agent.write_text(block, encoding="utf-8")
    for name in ("OPENAI_API_KEY", "RUNNER_MODEL", "RUNNER_DEFAULT_MODEL"):
        monkeypatch.delenv(name, raising=False)
    with ScriptedServer(_answer) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        result = CliRunner().invoke(app, ["run", str(agent), "-p", "Weather in Vancouver?"])
        assert result.exit_code == 0, result.output
        assert server.requests, "the example never reached the local server"
    assert "Traceback" not in result.output
    assert result.stdout.strip(), "the example printed no answer"
