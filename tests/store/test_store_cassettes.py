"""Cassettes: record, replay, strict hashes with a readable diff, and every broken-cassette case."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from typer.testing import CliRunner

from runner.agentfile import load_agent
from runner.cli.main import app
from runner.resources import load_schema
from runner.runtime import RuntimeSettings
from runner.store.cassette import CassetteError, read_cassette
from runner.testing import ScriptedServer, scripted_session

TOOLS = '''
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
'''

SCRIPT = [
    {"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]},
    {"content": "2 + 3 = 5"},
]


def write_agent(
    folder: Path,
    *,
    system: str = "You add numbers. Today is {{ now('%Y-%m-%d') }}.",
    name: str = "adder",
    secret: str | None = None,
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "adder_tools.py").write_text(TOOLS)
    key = "  api_key: ${ADDER_API_KEY}\n" if secret else ""
    path = folder / "agent.yaml"
    path.write_text(
        f"version: 1\nname: {name}\nmodel:\n  id: openai/scripted\n  api_base: ${{ADDER_BASE:-http://127.0.0.1:9/v1}}\n"
        f'{key}prompts:\n  system: "{system}"\ntools:\n  - python: adder_tools\n'
        "tests:\n  - name: adds\n    input: What is 2 + 3?\n    cassette: cassettes/adds.jsonl\n"
        "    expect:\n      tools_called: [add]\n      output_contains: '5'\n      max_steps: 2\n"
    )
    return path


async def run_once(agent: Path, settings: RuntimeSettings, text: str = "What is 2 + 3?") -> str:
    spec = load_agent(agent)
    notes: list[Any] = []
    async with scripted_session(spec, settings=settings, sink=notes.append) as session:
        result = await session.run([text])
    return result.output


@pytest.fixture
def recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An agent whose test cassette was recorded against the scripted server."""
    agent = write_agent(tmp_path / "agent")
    with ScriptedServer(SCRIPT) as server:
        monkeypatch.setenv("ADDER_BASE", server.base_url)
        result = CliRunner().invoke(app, ["test", str(agent), "--update"])
        assert result.exit_code == 0, result.output
        monkeypatch.delenv("ADDER_BASE")
    return agent


def test_cassette_matches_its_schema(recorded: Path) -> None:
    validator = Draft202012Validator(load_schema("cassette"))
    lines = (recorded.parent / "cassettes" / "adds.jsonl").read_text().splitlines()
    assert len(lines) == 3  # header + two model calls
    for line in lines:
        assert list(validator.iter_errors(json.loads(line))) == []


def test_a_failed_update_keeps_the_old_cassette_and_says_so(
    recorded: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cassette = recorded.parent / "cassettes" / "adds.jsonl"
    before = cassette.read_bytes()
    with ScriptedServer([{"status": 400, "error": "no"}], repeat=True) as server:
        monkeypatch.setenv("ADDER_BASE", server.base_url)
        result = CliRunner().invoke(app, ["test", str(recorded), "--update"])
    assert result.exit_code == 1
    assert "the recording failed, so the old cassette is kept" in result.output
    assert cassette.read_bytes() == before
    assert list(cassette.parent.iterdir()) == [cassette]
    monkeypatch.delenv("ADDER_BASE")
    assert CliRunner().invoke(app, ["test", str(recorded)]).exit_code == 0


def test_a_failed_first_recording_writes_no_cassette(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    agent = write_agent(tmp_path / "agent")
    with ScriptedServer([{"status": 400, "error": "no"}], repeat=True) as server:
        monkeypatch.setenv("ADDER_BASE", server.base_url)
        result = CliRunner().invoke(app, ["test", str(agent), "--update"])
    assert result.exit_code == 1 and "no cassette was written" in result.output
    assert not (agent.parent / "cassettes" / "adds.jsonl").exists()


def test_a_changed_request_hints_at_runner_test_update(recorded: Path) -> None:
    recorded.write_text(recorded.read_text().replace("What is 2 + 3?", "What is 3 + 4?"))
    result = CliRunner().invoke(app, ["test", str(recorded)])
    assert result.exit_code == 1
    assert "runner test --update" in result.output and "--replay-loose" not in result.output


def test_runner_test_replays_offline_and_passes(recorded: Path) -> None:
    # ADDER_BASE now points at a closed port: only the cassette can answer
    result = CliRunner().invoke(app, ["test", str(recorded)])
    assert result.exit_code == 0, result.output
    assert "PASS adder/adds" in result.output
    assert result.output.strip().splitlines()[-1] == "1 passed, 0 failed"


async def test_replay_freezes_now_to_the_recording_clock(recorded: Path, tmp_path: Path) -> None:
    cassette = read_cassette(recorded.parent / "cassettes" / "adds.jsonl")
    system = cassette.interactions[0].request["messages"][0]["content"]
    assert cassette.header["clock"][:10] in system  # the recorded date, whatever today is
    config = RuntimeSettings(home=tmp_path / "home", replay=cassette.path)
    assert await run_once(recorded, config) == "2 + 3 = 5"


def test_changed_prompt_fails_strict_replay_with_a_diff(recorded: Path) -> None:
    text = recorded.read_text().replace("You add numbers.", "You add numbers carefully.")
    recorded.write_text(text)
    result = CliRunner().invoke(app, ["test", str(recorded)])
    assert result.exit_code == 1
    assert "FAIL adder/adds" in result.output
    assert "model request #1 differs from the recording" in result.output
    assert '-   "content": "You add numbers. Today' in result.output.replace("\n  ", "\n")
    assert '+   "content": "You add numbers carefully.' in result.output.replace("\n  ", "\n")
    assert "0 passed, 1 failed" in result.output


def test_loose_replay_warns_and_answers(recorded: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        [
            "run",
            str(recorded),
            "-p",
            "What is 20 + 30?",
            "--replay",
            str(recorded.parent / "cassettes" / "adds.jsonl"),
            "--replay-loose",
        ],
        env={"RUNNER_HOME": str(tmp_path / "home")},
    )
    assert result.exit_code == 0, result.output
    assert "differs from the recording" in result.output and "2 + 3 = 5" in result.output


def test_cassette_of_another_agent_is_refused(recorded: Path, tmp_path: Path) -> None:
    other = write_agent(tmp_path / "other", name="subtractor")
    result = CliRunner().invoke(
        app,
        ["run", str(other), "-p", "x", "--replay", str(recorded.parent / "cassettes" / "adds.jsonl")],
        env={"RUNNER_HOME": str(tmp_path / "home")},
    )
    assert result.exit_code == 1
    assert "recorded for agent 'adder', not 'subtractor'" in result.output


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda lines: [*lines[:2], lines[2][: len(lines[2]) // 2]], "truncated cassette line"),
        (lambda lines: [lines[0], "{not json", *lines[2:]], "corrupt cassette line"),
        (lambda lines: [json.dumps({"type": "something"}), *lines[1:]], "not a runner cassette"),
        (lambda lines: [], "the cassette is empty"),
        (lambda lines: [lines[0], json.dumps({"type": "interaction", "index": 0})], "malformed interaction"),
    ],
    ids=["truncated", "corrupt", "no-header", "empty", "malformed"],
)
def test_broken_cassettes_give_a_clear_error(recorded: Path, mutate: Any, message: str) -> None:
    path = recorded.parent / "cassettes" / "adds.jsonl"
    path.write_text("\n".join(mutate(path.read_text().splitlines())))
    with pytest.raises(CassetteError, match=message):
        read_cassette(path)
    result = CliRunner().invoke(app, ["test", str(recorded)])
    assert result.exit_code == 1 and message in result.output and "Traceback" not in result.output


def test_cassette_with_too_few_responses_names_the_request(recorded: Path) -> None:
    path = recorded.parent / "cassettes" / "adds.jsonl"
    path.write_text("\n".join(path.read_text().splitlines()[:2]) + "\n")
    result = CliRunner().invoke(app, ["test", str(recorded)])
    assert result.exit_code == 1
    assert "no recorded response for model request #2 (the cassette has 1)" in result.output
    assert "tool message" in result.output


def test_unused_responses_fail_the_case(recorded: Path) -> None:
    path = recorded.parent / "cassettes" / "adds.jsonl"
    lines = path.read_text().splitlines()
    extra = json.loads(lines[2])
    extra["index"] = 2
    path.write_text("\n".join([*lines, json.dumps(extra)]) + "\n")
    result = CliRunner().invoke(app, ["test", str(recorded)])
    assert result.exit_code == 1 and "1 response unused" in result.output


def test_failed_expectations_are_listed(recorded: Path) -> None:
    text = (
        recorded.read_text()
        .replace("output_contains: '5'", "output_contains: '6'")
        .replace("tools_called: [add]", "tools_called: [multiply]")
    )
    recorded.write_text(text)
    result = CliRunner().invoke(app, ["test", str(recorded)])
    assert result.exit_code == 1
    assert "the output does not contain '6'" in result.output
    assert "tools not called: ['multiply']" in result.output


def test_secrets_never_reach_a_cassette(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-very-secret-value-123"
    agent = write_agent(tmp_path / "agent", secret=secret, system="The key is ${ADDER_API_KEY}.")
    monkeypatch.setenv("ADDER_API_KEY", secret)
    with ScriptedServer(SCRIPT) as server:
        monkeypatch.setenv("ADDER_BASE", server.base_url)
        result = CliRunner().invoke(app, ["test", str(agent), "--update"])
        assert result.exit_code == 0, result.output
        assert server.headers[0].get("authorization") == f"Bearer {secret}"  # it was really used
    text = (agent.parent / "cassettes" / "adds.jsonl").read_text()
    assert secret not in text and "The key is ***." in text
    # and the redacted request still replays (hashes are taken after redaction)
    monkeypatch.delenv("ADDER_BASE")
    assert CliRunner().invoke(app, ["test", str(agent)]).exit_code == 0


def test_a_cassette_recorded_from_a_hook_queued_turn_replays_in_runner_test(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """runner run and runner test both run what turn_post queues (Session.run): the same model calls."""
    folder = tmp_path / "agent"
    folder.mkdir()
    (folder / "agent.yaml").write_text(
        "version: 1\nname: reviewer\nmodel:\n  id: openai/scripted\n  api_base: ${REVIEW_BASE:-http://127.0.0.1:9/v1}\n"
        "prompts:\n  system: You answer.\nlimits:\n  max_turns: 2\n"
        "hooks:\n  turn_post:\n    - message: Check your answer.\n"
        "tests:\n  - name: reviewed\n    input: Is water wet?\n    cassette: reviewed.jsonl\n"
        "    expect:\n      output_contains: checked\n      status: limit\n"
    )
    with ScriptedServer([{"content": "Yes."}, {"content": "Yes, checked."}]) as server:
        monkeypatch.setenv("REVIEW_BASE", server.base_url)
        recorded = CliRunner().invoke(
            app,
            [
                "run",
                str(folder / "agent.yaml"),
                "-p",
                "Is water wet?",
                "--record",
                str(folder / "reviewed.jsonl"),
            ],
        )
        assert len(server.requests) == 2
    monkeypatch.delenv("REVIEW_BASE")
    assert recorded.exit_code == 3, recorded.output  # the third turn the hook queued was over max_turns
    # runner test reads the run's end as runner run does: a limit (expect.status says it is meant)
    result = CliRunner().invoke(app, ["test", str(folder / "agent.yaml")])
    assert result.exit_code == 0, result.output
    assert "PASS reviewer/reviewed" in result.output


def test_a_team_whose_lead_calls_another_agent_records_and_replays_one_cassette(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The helper's model calls go to the same cassette as the lead's, in the order they happened."""
    folder = tmp_path / "team"
    folder.mkdir()
    (folder / "team.yaml").write_text(
        "version: 1\n"
        "agents:\n"
        "  lead:\n"
        "    model: {id: openai/scripted, api_base: '${TEAM_BASE:-http://127.0.0.1:9/v1}'}\n"
        "    tools:\n"
        "      - agent: '#helper'\n"
        "    tests:\n"
        "      - name: asks\n"
        "        input: Ask the helper.\n"
        "        cassette: asks.jsonl\n"
        "        expect: {tools_called: [helper], output_contains: swordfish}\n"
        "  helper:\n"
        "    model: {id: openai/scripted, api_base: '${TEAM_BASE:-http://127.0.0.1:9/v1}'}\n"
    )
    script = [
        {"tool_calls": [{"name": "helper", "arguments": {"input": "the word?"}}]},
        {"content": "swordfish"},  # the helper's answer
        {"content": "The helper says swordfish."},
    ]
    with ScriptedServer(script) as server:
        monkeypatch.setenv("TEAM_BASE", server.base_url)
        recorded = CliRunner().invoke(app, ["test", str(folder / "team.yaml"), "--update"])
        assert recorded.exit_code == 0, recorded.output
        assert len(server.requests) == 3
    monkeypatch.delenv("TEAM_BASE")
    cassette = read_cassette(folder / "asks.jsonl")
    assert len(cassette.interactions) == 3  # lead, helper, lead
    result = CliRunner().invoke(app, ["test", str(folder / "team.yaml")])
    assert result.exit_code == 0, result.output
    assert "PASS lead/asks" in result.output
