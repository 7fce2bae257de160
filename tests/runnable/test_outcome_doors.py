"""One outcome, read the same by every door: each way a run can end × each door (docs/decisions.md).

For every end — the model answers, a hook stops the turn, a limit drops a queued input, a
confirmation nobody can give is refused, a limit ends the turn, the model fails transiently, the
model fails for good — the same agent file runs through every door, and each door's reading of the
end is compared with the one table: ``runner run``'s exit code, a ``runner batch`` line's status,
the workflow step's status and the workflow's exit code, a sub-agent's result, ``runner serve``'s
``runner`` field, ``runner test`` with ``expect.status``, ``runner eval``, and ``runner.Agent``.
(Ctrl+C in each door has tests of its own: tests/cli_run, tests/batch, tests/workflow, tests/serve.)
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import runner
from runner.cli import main
from runner.session.outcome import EXIT_CODES, Outcome
from runner.testing import ScriptedServer

TOOLS = '''
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def guard(event):
    return {"stop": "the guard rail held"}
'''


@dataclass(frozen=True)
class End:
    """One way a run ends: the agent file's extra keys, the model's answers, the status expected."""

    name: str
    status: str
    script: list[dict[str, Any]]
    body: str = ""
    tools: str = "tools:\n  - python: outcome_tools:add\n"
    refused: tuple[str, ...] = ()
    transient: bool = False
    #: The model's answers after the ones the run makes (a sub-agent's parent goes on after it).
    extra: list[dict[str, Any]] = field(default_factory=list)


CALL = {"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]}

ENDS = [
    End("done", "ok", [{"content": "three"}]),
    End("hook_stop", "stopped", [], body="hooks:\n  turn_pre:\n    - python: outcome_tools:guard\n"),
    End(
        "dropped_queue",
        "limit",
        [{"content": "one"}],
        body="limits:\n  max_turns: 1\nhooks:\n  turn_post:\n    - message: Once more.\n",
    ),
    End(
        "refused_confirmation",
        "ok",
        [CALL, {"content": "it was refused"}],
        tools="tools:\n  - python: outcome_tools:add\n    confirm: true\n",
        refused=("add",),
    ),
    End("limited", "limit", [CALL], body="limits:\n  max_steps: 1\n"),
    End("failed_transiently", "error", [{"status": 503, "error": "overloaded"}], transient=True),
    End("failed_for_good", "error", [{"status": 401, "error": "bad key"}]),
]


@pytest.fixture(params=ENDS, ids=[end.name for end in ENDS])
def end(request: pytest.FixtureRequest) -> End:
    return request.param


@pytest.fixture
def case(end: End, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Case]:
    (tmp_path / "outcome_tools.py").write_text(textwrap.dedent(TOOLS), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RUNNER_HOME", str(tmp_path / "home"))
    monkeypatch.setitem(main._state, "debug", False)
    with ScriptedServer(end.script + end.extra) as server:
        yield Case(end, tmp_path, server)


@dataclass
class Case:
    end: End
    root: Path
    server: ScriptedServer

    def agent_yaml(self, name: str = "worker", base: str | None = None) -> str:
        return (
            f"name: {name}\ndescription: Works.\nmodel:\n  id: openai/scripted\n"
            f"  api_base: {base or self.server.base_url}\n"
            "  api_key: ${SCRIPTED_API_KEY:-sk-test}\n  retries: 0\n"
            f"prompts:\n  system: You are {name}.\n{self.end.tools}{self.end.body}"
        )

    def agent(self, **extra: str) -> Path:
        path = self.root / "worker.yaml"
        path.write_text("version: 1\n" + self.agent_yaml() + "".join(extra.values()), encoding="utf-8")
        return path

    def cli(self, *args: str) -> Any:
        result = CliRunner().invoke(main.app, list(args))
        assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
        assert "Traceback" not in result.output
        return result


def test_runner_run_exits_with_the_outcomes_code(case: Case) -> None:
    result = case.cli("run", str(case.agent()), "-p", "hi")
    assert result.exit_code == EXIT_CODES[case.end.status], result.output


def test_the_python_api_gives_the_same_status(case: Case) -> None:
    agent = runner.Agent.from_file(case.agent())
    try:
        outcome = agent.run_sync("hi").outcome
    except runner.RunnerError as exc:  # an error raises; the outcome reads it the same way
        outcome = Outcome.of_error(exc)
    assert outcome.status == case.end.status
    assert outcome.refused == case.end.refused
    assert outcome.transient == case.end.transient
    assert outcome.exit_code() == EXIT_CODES[case.end.status]


def test_a_batch_line_has_the_same_status(case: Case) -> None:
    inputs = case.root / "in.jsonl"
    inputs.write_text('"hi"\n', encoding="utf-8")
    out = case.root / "out.jsonl"
    result = case.cli("batch", str(case.agent()), str(inputs), "-o", str(out))
    assert out.is_file(), result.output
    [line] = [json.loads(text) for text in out.read_text(encoding="utf-8").splitlines()]
    assert line["status"] == case.end.status, line
    assert line["refused"] == list(case.end.refused)
    assert line["transient"] == case.end.transient


def test_a_workflow_step_has_the_same_status_and_the_workflow_its_exit_code(case: Case) -> None:
    team = case.root / "team.yaml"
    body = textwrap.indent(case.agent_yaml(), "    ").replace("    name: worker\n", "")
    team.write_text(
        f"version: 1\nagents:\n  worker:\n{body}workflow:\n  steps:\n    - id: work\n      agent: worker\n",
        encoding="utf-8",
    )
    result = case.cli("run", str(team), "-p", "hi", "--json")
    events = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    [step] = [e for e in events if e["type"] == "step_end"]
    assert step["status"] == case.end.status, step
    assert result.exit_code == EXIT_CODES[case.end.status]
    [last] = [e for e in events if e["type"] == "end"]
    assert last["status"] == case.end.status


def test_a_sub_agent_result_says_the_same_end(case: Case) -> None:
    worker = case.agent()
    parent_model = ScriptedServer(
        [{"tool_calls": [{"name": "worker", "arguments": {"input": "hi"}}]}, {"content": "done"}]
    )
    with parent_model:
        lead = case.root / "lead.yaml"
        lead.write_text(
            "version: 1\nname: lead\nmodel:\n  id: openai/scripted\n"
            f"  api_base: {parent_model.base_url}\n  api_key: ${{SCRIPTED_API_KEY:-sk-test}}\n  retries: 0\n"
            f"tools:\n  - agent: {worker.name}\n",
            encoding="utf-8",
        )
        result = case.cli("run", str(lead), "-p", "ask the worker")
        assert result.exit_code == 0, result.output
        tool_message = parent_model.requests[1]["messages"][-1]
    assert tool_message["role"] == "tool"
    status = case.end.status
    if status == "ok":
        assert "[worker ended" not in tool_message["content"]
    else:
        assert f"[worker ended: {status} (" in tool_message["content"], tool_message


def test_runner_serve_says_the_same_status(case: Case) -> None:
    from starlette.testclient import TestClient

    from runner.runtime.settings import RuntimeSettings
    from runner.serve.app import create_app
    from runner.serve.catalog import load_catalog
    from runner.serve.reload import CatalogHolder

    paths = [case.agent()]
    holder = CatalogHolder(paths, load_catalog(paths))
    app = create_app(holder, settings=RuntimeSettings(home=case.root / "home"), api_keys=["sk-outcome"])
    body = {"model": "worker", "messages": [{"role": "user", "content": "hi"}]}
    with TestClient(app, base_url="http://127.0.0.1") as client:
        response = client.post(
            "/v1/chat/completions", json=body, headers={"Authorization": "Bearer sk-outcome"}
        )
    if case.end.status == "error":
        assert response.status_code == 502, response.text
        return
    assert response.status_code == 200, response.text
    assert response.json()["runner"]["status"] == case.end.status
    assert response.json()["runner"]["exit_code"] == EXIT_CODES[case.end.status]


def _with_case(case: Case, expect: str) -> Path:
    return case.agent(
        tests="tests:\n  - name: one\n    input: hi\n    cassette: one.jsonl\n"
        f"    expect:\n      status: {expect}\n"
    )


@pytest.mark.parametrize("door", ["test", "eval"])
def test_runner_test_and_eval_read_the_same_status(case: Case, door: str) -> None:
    if case.end.status == "error" and door == "test":
        pytest.skip("an error is a failed case whatever it expects: nothing is recorded")
    agent = _with_case(case, case.end.status)
    args = ["test", "--update", str(agent)] if door == "test" else ["eval", str(agent)]
    result = case.cli(*args)
    assert result.exit_code == 0, result.output
    if door == "test":
        assert "PASS worker/one" in result.output
