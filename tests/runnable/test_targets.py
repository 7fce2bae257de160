"""What a user names is resolved once (``runner.runnable.resolve``), with one error per bad case, in
every door; and what the one-runnable layer changed at the doors: the request ``runner render``
shows, ``runner test``'s refusal path, a batch item's retry after a 429 with ``Retry-After``."""

from __future__ import annotations

import json
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import runner
from runner.cli import main
from runner.testing import ScriptedServer

TEAM = """\
version: 1
agents:
  writer:
    model: openai/gpt-4o-mini
    prompts: {system: Write.}
  reviewer:
    model: openai/gpt-4o-mini
    prompts: {system: Review.}
"""
WORKFLOW = TEAM + "workflow:\n  steps:\n    - {id: draft, agent: writer}\n"


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    monkeypatch.setitem(main._state, "debug", False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RUNNER_HOME", str(tmp_path / "home"))

    def invoke(*args: str) -> Any:
        result = CliRunner().invoke(main.app, list(args))
        assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
        assert "Traceback" not in result.output
        return result

    return invoke


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "command",
    [
        ["run", "{}", "-p", "hi"],
        ["render", "{}"],
        ["tools", "{}"],
        ["batch", "{}", "in.jsonl", "-o", "out.jsonl"],
    ],
    ids=["run", "render", "tools", "batch"],
)
def test_a_team_without_a_workflow_named_without_agent_is_one_error_listing_its_members(
    cli: Any, tmp_path: Path, command: list[str]
) -> None:
    team = write(tmp_path, "team.yaml", TEAM)
    write(tmp_path, "in.jsonl", '"hi"\n')
    result = cli(*[part.format(team) for part in command])
    assert result.exit_code == 2, result.output
    assert "team.yaml is a team of 2 agents and has no workflow: name the one to run with --agent" in (
        result.stderr
    )
    assert "agents here: writer, reviewer" in result.stderr
    assert not (tmp_path / "out.jsonl").exists()


def test_the_python_api_and_run_batch_refuse_it_the_same_way(tmp_path: Path) -> None:
    team = write(tmp_path, "team.yaml", TEAM)
    with pytest.raises(runner.ConfigError, match="has no workflow: name the one to run") as caught:
        runner.Agent.from_file(team)
    assert "agents here: writer, reviewer" in str(caught.value)


@pytest.mark.parametrize("command", [["run", "{}", "-p", "hi"], ["render", "{}"], ["tools", "{}"]])
def test_agent_naming_no_member_says_did_you_mean(cli: Any, tmp_path: Path, command: list[str]) -> None:
    team = write(tmp_path, "team.yaml", WORKFLOW)
    result = cli(*[part.format(team) for part in command], "--agent", "writr")
    assert result.exit_code == 2
    assert "no agent named 'writr' in this file (did you mean 'writer'?)" in result.stderr


def test_agent_on_a_one_agent_file_is_an_error(cli: Any, tmp_path: Path) -> None:
    one = write(tmp_path, "one.yaml", "version: 1\nname: solo\nmodel: openai/gpt-4o-mini\n")
    for name in ("other", "solo"):
        result = cli("render", str(one), "--agent", name)
        assert result.exit_code == 2 and f"--agent {name}: one.yaml is not a team file" in result.stderr


@pytest.mark.parametrize(
    ("command", "door"),
    [
        (["run", "{}", "-i"], "the chat (-i)"),
        (["tools", "{}"], "runner tools"),
    ],
)
def test_a_workflow_given_to_a_door_that_runs_one_agent_says_which_and_exits_2(
    cli: Any, tmp_path: Path, command: list[str], door: str
) -> None:
    team = write(tmp_path, "team.yaml", WORKFLOW)
    result = cli(*[part.format(team) for part in command])
    assert result.exit_code == 2, result.output
    assert f"team.yaml runs a workflow, and {door} runs one agent" in result.stderr
    assert "give --agent NAME to run one of its agents: writer, reviewer" in result.stderr


def test_a_workflow_on_the_ray_backend_is_refused_before_any_input_is_read(cli: Any, tmp_path: Path) -> None:
    team = write(tmp_path, "team.yaml", WORKFLOW)
    result = cli("batch", str(team), "missing.jsonl", "-o", "out.jsonl", "--backend", "ray")
    assert result.exit_code == 2
    assert "has a workflow: a batch of workflows runs on the local backend, not on Ray" in result.stderr


def test_runner_agent_runs_a_team_workflow(tmp_path: Path) -> None:
    from runner.testing import ScriptedModel, text

    team = write(tmp_path, "team.yaml", WORKFLOW)
    agent = runner.Agent.from_file(team, model=ScriptedModel([text("a draft")]))
    assert agent.is_workflow and agent.name == "team"
    result = agent.run_sync("a topic")
    assert result.outcome.status == "ok" and result.output == "a draft"


def test_render_shows_the_model_parameters_the_first_request_carries(cli: Any, tmp_path: Path) -> None:
    agent = write(
        tmp_path,
        "a.yaml",
        "version: 1\nname: a\nmodel:\n  id: openai/gpt-4o-mini\n  temperature: 0.2\n"
        "  params: {seed: 7}\nprompts: {system: Hi.}\n",
    )
    shown = cli("render", str(agent), "--json")
    assert shown.exit_code == 0, shown.output
    params = json.loads(shown.stdout)["params"]
    assert params["temperature"] == 0.2 and params["seed"] == 7
    text = cli("render", str(agent)).stdout
    assert "--- temperature ---\n0.2" in text and "--- seed ---\n7" in text


TOOLS = '''
def delete(path: str) -> str:
    """Delete a file."""
    return "deleted " + path
'''


def _asking_agent(tmp_path: Path, server: ScriptedServer, case: str) -> Path:
    (tmp_path / "ask_tools.py").write_text(textwrap.dedent(TOOLS), encoding="utf-8")
    return write(
        tmp_path,
        "asker.yaml",
        "version: 1\nname: asker\nmodel:\n  id: openai/scripted\n"
        f"  api_base: {server.base_url}\n  api_key: ${{SCRIPTED_API_KEY:-sk-test}}\n  retries: 0\n"
        "tools:\n  - python: ask_tools:delete\n    confirm: true\n"
        f"tests:\n  - name: one\n    input: delete x\n    cassette: one.jsonl\n{case}",
    )


CALL = {"tool_calls": [{"name": "delete", "arguments": {"path": "x"}}]}


def test_runner_test_refuses_ask_tools_as_a_user_gets_it_and_can_expect_the_refusal(
    cli: Any, tmp_path: Path
) -> None:
    with ScriptedServer([CALL, {"content": "I was not allowed."}] * 2) as server:
        agent = _asking_agent(tmp_path, server, "    expect:\n      tools_refused: [delete]\n")
        recorded = cli("test", "--update", str(agent))
        assert recorded.exit_code == 0, recorded.output
        assert "Refused: delete needs the user's confirmation" in json.dumps(server.requests[1])
        # the same expectation fails when the case allows the tool (yes: true)
        allowed = _asking_agent(
            tmp_path, server, "    yes: true\n    expect:\n      tools_refused: [delete]\n"
        )
        result = cli("test", "--update", str(allowed))
    assert result.exit_code == 1
    assert "tools not refused: ['delete'] (refused: []; called: ['delete'])" in result.stdout


def test_a_batch_item_hit_by_a_429_waits_as_retry_after_says_then_succeeds(cli: Any, tmp_path: Path) -> None:
    script = [{"status": 429, "error": "slow down", "headers": {"Retry-After": "1"}}, {"content": "fine"}]
    with ScriptedServer(script) as server:
        agent = write(
            tmp_path,
            "a.yaml",
            "version: 1\nname: a\nmodel:\n  id: openai/scripted\n"
            f"  api_base: {server.base_url}\n  api_key: ${{SCRIPTED_API_KEY:-sk-test}}\n  retries: 0\n",
        )
        write(tmp_path, "in.jsonl", '"hi"\n')
        started = time.monotonic()
        result = cli("batch", str(agent), "in.jsonl", "-o", "out.jsonl", "--retries", "1")
        waited = time.monotonic() - started
    assert result.exit_code == 0, result.output
    [line] = [json.loads(text) for text in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert line["status"] == "ok" and line["answer"] == "fine" and line["attempts"] == 2
    assert waited >= 1.0  # at least what the server asked (a lower bound: a loaded machine only adds)


def test_runner_eval_reads_a_cases_yes_as_runner_test_does(cli: Any, tmp_path: Path) -> None:
    (tmp_path / "ask_tools.py").write_text(textwrap.dedent(TOOLS), encoding="utf-8")
    with ScriptedServer([CALL, {"content": "done."}] * 2) as server:
        agent = write(
            tmp_path,
            "asker.yaml",
            "version: 1\nname: asker\nmodel:\n  id: openai/scripted\n"
            f"  api_base: {server.base_url}\n  api_key: ${{SCRIPTED_API_KEY:-sk-test}}\n  retries: 0\n"
            "tools:\n  - python: ask_tools:delete\n    confirm: true\n"
            "evals:\n"
            "  - {name: allowed, input: delete x, yes: true, expect: {tools_called: [delete]}}\n"
            "  - {name: refused, input: delete y, expect: {tools_refused: [delete]}}\n",
        )
        result = cli("eval", str(agent), "--concurrency", "1", "--json")
    assert result.exit_code == 0, result.output
    cases = {case["name"]: case for case in json.loads(result.stdout)["cases"]}
    assert (cases["allowed"]["passes"], cases["refused"]["passes"]) == (1, 1), cases
    tool_results = [m for body in server.requests for m in body["messages"] if m["role"] == "tool"]
    contents = sorted(m["content"] for m in tool_results)
    assert contents[1] == "deleted x" and contents[0].startswith("Refused: delete needs"), contents


def test_render_reads_and_checks_a_workflow_file_once(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runner.agentfile import files

    team = write(tmp_path, "team.yaml", WORKFLOW)
    inspected: list[Path] = []
    real = files.inspect_file

    def counting(path: Path, **kw: Any) -> Any:
        inspected.append(path)
        return real(path, **kw)

    monkeypatch.setattr(files, "inspect_file", counting)
    result = cli("render", str(team))
    assert result.exit_code == 0, result.output
    assert "# workflow:" in result.stdout and "draft" in result.stdout
    assert len(inspected) == 1, inspected
