"""``examples/research_workflow.yaml``: plan, research each task, write and review until approved; offline.

The cassette was recorded with ``runner run ... --record`` against the scripted server answering
``SCRIPT`` (one model for every agent; under a cassette the steps run one at a time, so the script
is in the workflow's order). ``test_recording_it_again_gives_the_same_cassette`` records it again
the same way and checks that nothing but the header and the timings changed.
"""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path
from typing import Any

from runner.store.cassette import read_cassette
from runner.testing import ScriptedServer
from tests import example_cli

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
TEAM = EXAMPLES / "research_workflow.yaml"
CASSETTE = EXAMPLES / "cassettes" / "research-workflow.jsonl"
QUESTION = "How did the transistor replace the vacuum tube?"

TASKS = [
    {
        "topic": "vacuum tubes",
        "question": "What did vacuum tubes do in early electronics, and what were their limits?",
    },
    {"topic": "the transistor", "question": "How was the transistor invented at Bell Labs in 1947?"},
    {"topic": "adoption", "question": "Which products moved from tubes to transistors first, and why?"},
]
NOTES = [
    "Vacuum tubes amplified and switched signals in radios and early computers, but they were large, "
    "ran hot, used much power and burned out often.",
    "Bardeen and Brattain built the point-contact transistor at Bell Labs in December 1947; Shockley's "
    "junction transistor followed in 1948.",
    "Hearing aids and pocket radios (the 1954 Regency TR-1) switched first: transistors were small, "
    "cool and ran on batteries.",
]
FIRST_DRAFT = {
    "title": "From tubes to transistors",
    "findings": [
        {"topic": "vacuum tubes", "summary": "Tubes amplified signals but were bulky and unreliable."},
        {"topic": "the transistor", "summary": "Bell Labs invented the transistor in 1947."},
    ],
    "conclusion": "The transistor replaced the tube.",
}
REPORT = {
    "title": "From tubes to transistors",
    "findings": [
        {
            "topic": "vacuum tubes",
            "summary": "Tubes amplified and switched signals but were bulky, hot and short-lived.",
        },
        {
            "topic": "the transistor",
            "summary": "Bell Labs built the point-contact transistor in 1947, the junction one in 1948.",
        },
        {
            "topic": "adoption",
            "summary": "Hearing aids and pocket radios such as the 1954 Regency TR-1 adopted it first.",
        },
    ],
    "conclusion": (
        "Smaller, cooler and battery-friendly, the transistor displaced the tube product by product."
    ),
}
SCRIPT: list[dict[str, Any]] = [
    {"content": json.dumps({"tasks": TASKS})},
    *({"content": note} for note in NOTES),
    {"content": json.dumps(FIRST_DRAFT)},
    {"content": json.dumps({"approved": False, "feedback": "The adoption task has no finding; add it."})},
    {"content": json.dumps(REPORT)},
    {"content": json.dumps({"approved": True, "feedback": "Every task has a finding."})},
]

cli = example_cli.cli  # the fixture: runner in process


def test_the_example_validates(cli: Any) -> None:
    result = cli("validate", str(TEAM))
    assert result.exit_code == 0, result.output


def test_the_readme_command_replays_offline_and_prints_the_typed_report(cli: Any) -> None:
    readme = (EXAMPLES.parent / "README.md").read_text(encoding="utf-8")
    (line,) = [row for row in readme.splitlines() if "runner run examples/research_workflow.yaml" in row]
    start = line.index("`runner run examples/research_workflow.yaml") + 1
    command = shlex.split(line[start : line.index("`", start)])
    assert command[:2] == ["runner", "run"]
    paths = [str(EXAMPLES.parent / arg) if arg.startswith("examples/") else arg for arg in command[2:]]
    result = cli("run", *paths)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == REPORT
    assert "[research[2]/notes] ok" in result.stderr
    assert "[review#2/critique] ok" in result.stderr  # the first draft was sent back once
    assert "[review#3" not in result.stderr


def test_the_cassette_holds_the_whole_workflow_in_order() -> None:
    cassette = read_cassette(CASSETTE)
    assert cassette.header["workflow"] == "research_workflow"
    assert len(cassette.interactions) == len(SCRIPT)
    asked = [i.request["messages"][-1]["content"] for i in cassette.interactions]
    assert asked[0] == f"Plan research on: {QUESTION}"
    assert asked[1:4] == [f"{t['topic']}: {t['question']}" for t in TASKS]
    assert "Reviewer's feedback: The adoption task has no finding" in asked[6]
    spec = cassette.interactions[0].request["params"]["response_format"]["json_schema"]
    assert spec["name"] == "research_plan"


def test_recording_it_again_gives_the_same_cassette(cli: Any, tmp_path: Path) -> None:
    shutil.copy(TEAM, tmp_path / TEAM.name)
    shutil.copytree(EXAMPLES / "shared", tmp_path / "shared")
    recorded = tmp_path / "cassettes" / CASSETTE.name
    with ScriptedServer(SCRIPT, model="gpt-4o-mini") as server:
        result = cli(
            "run",
            str(tmp_path / TEAM.name),
            "-p",
            QUESTION,
            "--record",
            str(recorded),
            env={"OPENAI_BASE_URL": server.base_url},
        )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == REPORT

    def interactions(path: Path) -> list[dict[str, Any]]:
        lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        return [{k: v for k, v in i.items() if k != "events"} for i in lines[1:]]

    assert interactions(recorded) == interactions(CASSETTE)
    again = cli("run", str(tmp_path / TEAM.name), "-p", QUESTION, "--replay", str(recorded))
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout) == REPORT


def test_runner_test_replays_the_examples_case_offline(cli: Any) -> None:
    result = cli("test", str(TEAM))
    assert result.exit_code == 0, result.output
    assert "PASS research_workflow/transistor" in result.stdout
    assert result.stdout.splitlines()[-1] == "1 passed, 0 failed"
