"""``runner serve --watch`` with a workflow: an edited team file gives the next request the new
workflow and its agents' new configurations; an invalid edit keeps the last good one (issue 17)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import Any

from runner.testing import ScriptedServer
from tests.serve.watch_common import reply, wait_for, wait_until_watching

TEAM = """version: 1
agents:
  writer:
    model: {{id: openai/writer, api_base: '{base}', retries: 0}}
    prompts:
      system: Old prompt.
    tools:
      - python: {tools}
workflow:
  name: drafting
  output: "v1: {{{{ steps.draft.output }}}}"
  steps:
    - {{id: draft, agent: writer}}
"""

TOOLS = '''
import time


def version() -> str:
    """Which version of the tool code runs."""
    time.sleep({sleep})
    return "{version}"
'''


def test_watch_reloads_the_workflow_its_agents_and_their_tools_and_keeps_the_last_good_one(
    scripted: Callable[..., ScriptedServer], agent_files: Any, serve_app: Callable[..., Any]
) -> None:
    server = scripted(reply)
    module = f"wf_watch_tools_{uuid.uuid4().hex[:10]}"
    tools = agent_files.root / f"{module}.py"
    tools.write_text(TOOLS.format(sleep=1.0, version="t1"), encoding="utf-8")
    path = agent_files.root / "team.yaml"
    path.write_text(TEAM.format(base=server.base_url, tools=module), encoding="utf-8")
    lines: list[str] = []
    served = serve_app([agent_files.root], watch=True, report=lines.append)
    client = served.openai()
    wait_until_watching(agent_files.root, lines)  # an edit before the watcher started would be missed

    def ask() -> str:
        answer = client.chat.completions.create(
            model="drafting", messages=[{"role": "user", "content": "go"}]
        )
        return answer.choices[0].message.content or ""

    # an edit during a request: the running request finishes on the workflow it started with
    answers: list[str] = []
    running = threading.Thread(target=lambda: answers.append(ask()))
    running.start()
    wait_for(lambda: len(server.requests) == 1, what="the first step")
    text = path.read_text().replace("v1:", "v2:").replace("Old prompt.", "New prompt.")
    path.write_text(text, encoding="utf-8")
    wait_for(lambda: any("~drafting" in line for line in lines), what=f"the reload line in {lines}")
    running.join(timeout=15)
    assert answers == ["v1: tool said t1"]
    assert [r["messages"][0]["content"] for r in server.requests] == ["Old prompt.", "Old prompt."]
    assert ask() == "v2: tool said t1"  # the new workflow and the agent's new prompt
    assert server.requests[-1]["messages"][0]["content"] == "New prompt."

    # edited tool code: the agents' configuration is the same, their runtimes are built again
    lines.clear()
    tools.write_text(TOOLS.format(sleep=0, version="t2"), encoding="utf-8")
    wait_for(lambda: any("~drafting" in line for line in lines), what=f"the tool reload in {lines}")
    assert ask() == "v2: tool said t2"

    # an invalid edit keeps the last good workflow, with one line saying why
    lines.clear()
    path.write_text(text.replace("agent: writer", "agent: nobody"), encoding="utf-8")
    wait_for(
        lambda: any("keeping the last good config of writer, drafting" in line for line in lines),
        what=f"the error in {lines}",
    )
    assert "nobody" in " ".join(lines) and path.name in " ".join(lines)
    assert sorted(m.id for m in client.models.list()) == ["drafting", "writer"]
    assert ask() == "v2: tool said t2"

    # removed from the file: the workflow is no longer served
    lines.clear()
    path.write_text(text.split("workflow:")[0], encoding="utf-8")
    wait_for(lambda: any("-drafting" in line for line in lines), what=f"the removal in {lines}")
    assert [m.id for m in client.models.list()] == ["writer"]


def test_a_reload_whose_agent_cannot_open_keeps_the_last_good_workflow(
    scripted: Callable[..., ScriptedServer], agent_files: Any, serve_app: Callable[..., Any]
) -> None:
    server = scripted(reply)
    module = f"wf_watch_tools_{uuid.uuid4().hex[:10]}"
    tools = agent_files.root / f"{module}.py"
    tools.write_text(TOOLS.format(sleep=0, version="t1"), encoding="utf-8")
    path = agent_files.root / "team.yaml"
    path.write_text(TEAM.format(base=server.base_url, tools=module), encoding="utf-8")
    lines: list[str] = []
    served = serve_app([agent_files.root], watch=True, report=lines.append)
    client = served.openai()
    wait_until_watching(agent_files.root, lines)

    def ask() -> str:
        answer = client.chat.completions.create(
            model="drafting", messages=[{"role": "user", "content": "go"}]
        )
        return answer.choices[0].message.content or ""

    assert ask() == "v1: tool said t1"
    tools.write_text("raise RuntimeError('broken on purpose')\n", encoding="utf-8")
    wait_for(
        lambda: any("reload of drafting failed, keeping the last good config" in line for line in lines),
        what=f"the error in {lines}",
    )
    assert "broken on purpose" in " ".join(lines)
    assert ask() == "v1: tool said t1"  # the pool it had still answers
