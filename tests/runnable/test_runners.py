"""The runner interface: an agent and a workflow run, interrupted, and read by the same outcome."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from runner.models.base import Reply, Request
from runner.runnable import AgentRunner, WorkflowRunner, resolve, runner_for
from runner.runtime.settings import RuntimeSettings
from runner.session import RunOptions
from runner.session.events import LoopEvent, UsageUpdate, WorkflowStep
from runner.testing import ScriptedModel, text

AGENT = "version: 1\nname: solo\nmodel: openai/any\nprompts: {system: Answer.}\n"
TEAM = """\
version: 1
agents:
  drafter: {model: openai/any, prompts: {system: Draft.}}
workflow:
  steps:
    - {id: draft, agent: drafter}
"""


class Stuck(ScriptedModel):
    """A model whose call never returns until it is cancelled (what Ctrl+C interrupts)."""

    def __init__(self) -> None:
        super().__init__([])
        self.started = asyncio.Event()

    async def complete(self, request: Request) -> Reply:
        self.started.set()
        await asyncio.sleep(3600)
        raise AssertionError("never")

    async def stream(self, request: Request) -> Any:
        yield await self.complete(request)


def _settings(tmp_path: Path) -> RuntimeSettings:
    return RuntimeSettings(home=tmp_path / "home", write_transcript=False)


async def test_an_agent_and_a_workflow_answer_through_one_interface(tmp_path: Path) -> None:
    (tmp_path / "solo.yaml").write_text(AGENT, encoding="utf-8")
    (tmp_path / "team.yaml").write_text(TEAM, encoding="utf-8")
    agent = runner_for(
        resolve(tmp_path / "solo.yaml"), _settings(tmp_path), model=ScriptedModel([text("hi")])
    )
    flow = runner_for(
        resolve(tmp_path / "team.yaml"),
        _settings(tmp_path),
        model_for=lambda _: ScriptedModel([text("a draft")]),
    )
    assert isinstance(agent, AgentRunner) and isinstance(flow, WorkflowRunner)
    seen: list[LoopEvent] = []
    try:
        one = await agent.run(["hello"], options=RunOptions(), sink=seen.append)
        two = await flow.run("a topic", sink=seen.append, on_event=lambda e: seen.append(WorkflowStep(e)))
    finally:
        await agent.aclose()
        await flow.aclose()
    assert (one.status, one.answer, one.exit_code()) == ("ok", "hi", 0)
    assert (two.status, two.answer, two.exit_code()) == ("ok", "a draft", 0)
    assert sum(isinstance(e, UsageUpdate) for e in seen) == 2  # both runs' sessions report to the sink
    assert [e.data["type"] for e in seen if isinstance(e, WorkflowStep)] == ["step_start", "step_end"]


async def test_interrupting_either_runner_is_interrupted_with_exit_130(tmp_path: Path) -> None:
    (tmp_path / "solo.yaml").write_text(AGENT, encoding="utf-8")
    (tmp_path / "team.yaml").write_text(TEAM, encoding="utf-8")
    for path in ("solo.yaml", "team.yaml"):
        model = Stuck()
        given = model
        options: dict[str, Any] = (
            {"model": model} if path == "solo.yaml" else {"model_for": lambda _, m=given: m}
        )
        runner = runner_for(resolve(tmp_path / path), _settings(tmp_path), **options)
        try:
            running = asyncio.create_task(
                runner.run(["go"]) if isinstance(runner, AgentRunner) else runner.run("go")
            )
            await asyncio.wait_for(model.started.wait(), 10)
            runner.interrupt()
            outcome = await asyncio.wait_for(running, 10)
        finally:
            await runner.aclose()
        assert outcome.status == "interrupted", path
        assert outcome.exit_code() == 130 and outcome.exit_code(interactive=True) == 0
