"""The workflow engine in-process: one runtime per team agent, shared by its steps (issue 17)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import runner.workflow.agents as agents_module
from runner.agentfile.files import load_file
from runner.agentfile.workflow import build_workflow
from runner.runtime.runtime import AgentRuntime
from runner.runtime.settings import RuntimeSettings
from runner.testing import ScriptedServer
from runner.workflow import WorkflowEngine, open_record
from tests.workflow.helpers import Models, team, user_text

BODY = """workflow:
  - id: all
    parallel:
      - {id: a, agent: echo, input: "a"}
      - {id: b, agent: echo, input: "b"}
      - {id: c, agent: other, input: "c"}
  - id: each
    for_each: "['x', 'y', 'z']"
    step: {id: one, agent: echo, input: "{{ item }}"}
"""


def test_each_team_agent_runtime_opens_once_and_its_steps_share_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[str] = []
    closed: list[str] = []
    real = agents_module.open_runtime

    async def counting(config: Any, settings: Any, **options: Any) -> Any:
        opened.append(config.name)
        return await real(config, settings, **options)

    real_close = AgentRuntime.aclose

    async def closing(self: AgentRuntime) -> None:
        closed.append(self.config.name)
        await real_close(self)

    monkeypatch.setattr(AgentRuntime, "aclose", closing)
    monkeypatch.setattr(agents_module, "open_runtime", counting)
    models = Models({"echo": lambda body: user_text(body), "other": lambda body: "o"})
    with ScriptedServer(models) as server:
        path = team(tmp_path, server.base_url, {"echo": "", "other": ""}, BODY)
        workflow = build_workflow(load_file(path).document)
        assert workflow is not None
        settings = RuntimeSettings(home=tmp_path / "home")
        record = open_record(
            settings.home, workflow="team", path=path, input="go", variables={}, secrets=frozenset()
        )
        engine = WorkflowEngine(path, workflow, settings, input="go", variables={}, record=record)
        result = asyncio.run(engine.run())
    assert result.exit_code == 0, result.notes
    assert result.output == ["x", "y", "z"]
    assert sorted(opened) == ["echo", "other"]  # five echo steps, one runtime
    assert sorted(closed) == ["echo", "other"]
    assert models.calls == {"echo": 5, "other": 1}
