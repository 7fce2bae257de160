"""Fixtures of the interpreter tests: agents written into tmp_path, driven in process by a scripted model.

``agent(body, tools=..., hooks=...)`` writes ``agent.yaml`` (plus a tools module and a hooks module with
unique names, so tests never share an imported module) and loads it with ``load_agent``. In the body,
``$TOOLS`` and ``$HOOKS`` stand for those module names. ``drive(spec, script, "input", ...)`` opens a
runtime on a ``ScriptedModel`` and a session on it, runs ``Session.run`` per input (None: a run with no
new input, which continues a history waiting for the model) and returns a ``Run`` with everything a
test checks: turn results, loop events, model requests, the session and its transcript records.
"""

from __future__ import annotations

import itertools
import json
import sys
import textwrap
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from runner.agentfile import load_agent
from runner.agentfile.config import AgentConfig
from runner.models.base import Model
from runner.runtime import RuntimeSettings
from runner.session import RunOptions, RunResult, Session, TurnResult, open_runtime
from runner.session.events import LoopEvent, Note
from runner.store.transcript import Transcript, read_transcript, sessions_dir
from runner.testing import ScriptedModel

_serial = itertools.count(1)


@dataclass
class Agents:
    """Writes agent files (and their Python modules) into one temporary folder."""

    root: Path
    modules: dict[str, str] = field(default_factory=dict)

    def __call__(
        self,
        body: str = "",
        *,
        tools: str | None = None,
        hooks: str | None = None,
        name: str = "tester",
        env: dict[str, str] | None = None,
        filename: str = "agent.yaml",
    ) -> AgentConfig:
        """Write and load an agent; ``tools`` adds a ``python:`` source unless the body has ``tools:``."""
        tag = f"{next(_serial)}_{uuid.uuid4().hex[:8]}"
        text = f"version: 1\nname: {name}\n" + textwrap.dedent(body).strip("\n") + "\n"
        if tools is not None:
            module = f"loop_tools_{tag}"
            (self.root / f"{module}.py").write_text(textwrap.dedent(tools), encoding="utf-8")
            self.modules["tools"] = module
            if "\ntools:" not in "\n" + text:
                text += f"tools:\n  - python: {module}\n"
            text = text.replace("$TOOLS", module)
        if hooks is not None:
            module = f"loop_hooks_{tag}"
            (self.root / f"{module}.py").write_text(textwrap.dedent(hooks), encoding="utf-8")
            self.modules["hooks"] = module
            text = text.replace("$HOOKS", module)
        path = self.root / filename
        path.write_text(text, encoding="utf-8")
        return load_agent(path, env=env if env is not None else {})

    def module(self, kind: str = "tools") -> ModuleType:
        """The imported tools (or hooks) module of the last agent written, to share state with it."""
        return sys.modules[self.modules[kind]]


@dataclass
class Run:
    """What one driven session produced."""

    session: Session
    model: Model
    #: Every turn of every run, in order.
    results: list[TurnResult]
    events: list[LoopEvent]
    home: Path
    #: One ``RunResult`` per input given to ``drive``.
    runs: list[RunResult] = field(default_factory=list)

    @property
    def result(self) -> RunResult:
        """The last run's result (its last turn's output and reason)."""
        return self.runs[-1]

    @property
    def requests(self) -> list[Any]:
        assert isinstance(self.model, ScriptedModel)
        return self.model.requests

    @property
    def history(self) -> list[dict[str, Any]]:
        return self.session.history

    @property
    def transcript_path(self) -> Path:
        return sessions_dir(self.home) / f"{self.session.session_id}.jsonl"

    def transcript(self) -> Transcript:
        return read_transcript(self.transcript_path)

    def records(self) -> list[dict[str, Any]]:
        lines = self.transcript_path.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines]

    def transcript_events(self, name: str | None = None) -> list[dict[str, Any]]:
        return [r for r in self.records() if r["type"] == "event" and name in (None, r["event"])]

    def notes(self) -> list[Note]:
        return [e for e in self.events if isinstance(e, Note)]

    def tool_results(self) -> list[dict[str, Any]]:
        return [m for m in self.history if m.get("role") == "tool"]


Driver = Callable[..., Awaitable[Run]]


@pytest.fixture
def agent(tmp_path: Path) -> Agents:
    """Write and load an agent into this test's temporary folder."""
    return Agents(tmp_path)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """The ``RUNNER_HOME`` of this test's sessions."""
    return tmp_path / ".runner"


@pytest.fixture
def drive(home: Path) -> Driver:
    """Open a session on a scripted model, run one turn per input, return the ``Run``."""

    async def run(
        spec: AgentConfig,
        script: Iterable[Any] | None = None,
        *inputs: str | None,
        model: Model | None = None,
        options: RunOptions | None = None,
        resume: Transcript | None = None,
        during: Callable[[Session], Awaitable[Any]] | None = None,
    ) -> Run:
        events: list[LoopEvent] = []
        chosen = model if model is not None else ScriptedModel(script or [])
        results: list[TurnResult] = []
        runs: list[RunResult] = []
        runtime = await open_runtime(spec, RuntimeSettings(home=home), model=chosen)
        try:
            session = Session(runtime, sink=events.append, options=options or RunOptions(), resume=resume)
            try:
                for text in inputs:
                    runs.append(await session.run([text] if text is not None else []))
                    results.extend(runs[-1].turns)
                if during is not None:
                    await during(session)
            finally:
                await session.close()
        finally:
            await runtime.aclose()
        return Run(session, chosen, results, events, home, runs)

    return run


def history_problems(messages: Sequence[dict[str, Any]]) -> list[str]:
    """What makes a history one a provider would reject: a call without exactly one result, in order."""
    problems: list[str] = []
    index = 0
    while index < len(messages):
        message = messages[index]
        calls = message.get("tool_calls") or []
        if message.get("role") == "tool":
            problems.append(f"message {index}: a tool result that follows no assistant tool call")
        if calls:
            ids = [call["id"] for call in calls]
            answers = []
            cursor = index + 1
            while cursor < len(messages) and messages[cursor].get("role") == "tool":
                answers.append(messages[cursor].get("tool_call_id"))
                cursor += 1
            if answers != ids:
                problems.append(f"message {index}: calls {ids} answered by {answers}")
            index = cursor
            continue
        index += 1
    return problems


@pytest.fixture
def assert_valid_history() -> Callable[[Sequence[dict[str, Any]]], None]:
    """Fail unless every tool call has exactly one result, right after its message, in call order."""

    def check(messages: Sequence[dict[str, Any]]) -> None:
        problems = history_problems(messages)
        assert not problems, "\n".join(problems)

    return check
