"""``examples/weather_report.yaml``: a tool call, then a typed answer, replayed offline from its cassette.

The cassette was recorded with ``runner test --update`` against the scripted server answering
``SCRIPT``; ``test_recording_it_again_gives_the_same_cassette`` records it again the same way and
checks that nothing but the header and the timings changed.
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
AGENT = EXAMPLES / "weather_report.yaml"
CASSETTE = EXAMPLES / "cassettes" / "weather-report-vancouver.jsonl"
QUESTION = "Do I need an umbrella in Vancouver over the next two days?"
REPORT = {
    "city": "Vancouver",
    "days": [
        {"day": "today", "high_c": 11.0, "low_c": 6.0, "conditions": "light rain"},
        {"day": "tomorrow", "high_c": 9.5, "low_c": 5.0, "conditions": "showers"},
    ],
    "umbrella": True,
    "summary": "Rain today and showers tomorrow in Vancouver: take an umbrella.",
}
SCRIPT: list[dict[str, Any]] = [
    {"tool_calls": [{"name": "get_forecast", "arguments": {"city": "Vancouver", "days": 2}}]},
    {"content": json.dumps(REPORT, ensure_ascii=False)},
]

cli = example_cli.cli  # the fixture: runner in process


def test_the_example_validates_and_its_test_passes_offline(cli: Any) -> None:
    assert cli("validate", str(AGENT)).exit_code == 0
    result = cli("test", str(AGENT))
    assert result.exit_code == 0, result.output
    assert "PASS weather_report/vancouver" in result.stdout
    assert result.stdout.splitlines()[-1] == "1 passed, 0 failed"


def test_run_with_the_cassette_prints_the_report_as_json(cli: Any) -> None:
    result = cli("run", str(AGENT), "--replay", str(CASSETTE), "-p", QUESTION)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == REPORT
    assert result.stdout.count("\n") == 1  # compact off a terminal: one line
    assert "→ get_forecast" in result.stderr  # the tool ran for real on the way
    streamed = cli("run", str(AGENT), "--replay", str(CASSETTE), "-p", QUESTION, "--json")
    events = [json.loads(line) for line in streamed.stdout.splitlines()]
    assert [e["output"] for e in events if e["type"] == "output"] == [REPORT]


def test_the_readme_command_for_the_example_replays(cli: Any) -> None:
    readme = (EXAMPLES.parent / "README.md").read_text(encoding="utf-8")
    (line,) = [row for row in readme.splitlines() if "runner run examples/weather_report.yaml" in row]
    command = shlex.split(line.split("(`", 1)[1].split("`)", 1)[0])
    assert command[:2] == ["runner", "run"]
    paths = [str(EXAMPLES.parent / arg) if arg.startswith("examples/") else arg for arg in command[2:]]
    result = cli("run", *paths)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == REPORT


def test_the_cassette_asked_for_the_schema_with_the_tools_on(cli: Any) -> None:
    cassette = read_cassette(CASSETTE)
    assert len(cassette.interactions) == 2  # no repair request: the first answer validated
    for interaction in cassette.interactions:
        request = interaction.request
        assert [t["function"]["name"] for t in request["tools"]] == ["get_forecast"]
        spec = request["params"]["response_format"]["json_schema"]
        assert spec["name"] == "weather_report" and spec["strict"] is True
    result_message = cassette.interactions[1].request["messages"][-1]
    assert result_message["role"] == "tool" and '"conditions":"showers"' in result_message["content"]


def test_a_changed_expectation_fails_against_the_same_cassette(cli: Any, tmp_path: Path) -> None:
    copy = _copy_example(tmp_path)
    text = copy.read_text()
    copy.write_text(text.replace("umbrella: true, days.0.high_c: 11", "umbrella: false, days.0.high_c: 11"))
    result = cli("test", str(copy))
    assert result.exit_code == 1
    assert "  output_json umbrella: expected false, got true" in result.stdout


def test_recording_it_again_gives_the_same_cassette(cli: Any, tmp_path: Path) -> None:
    copy = _copy_example(tmp_path)
    recorded = copy.parent / "cassettes" / CASSETTE.name
    recorded.unlink()
    with ScriptedServer(SCRIPT, model="gpt-4o-mini") as server:
        result = cli("test", str(copy), "--update", env={"OPENAI_BASE_URL": server.base_url})
    assert result.exit_code == 0, result.output
    assert all("response_format" in request for request in server.requests)

    def interactions(path: Path) -> list[dict[str, Any]]:
        return [{k: v for k, v in i.items() if k != "events"} for i in _lines(path)[1:]]

    assert interactions(recorded) == interactions(CASSETTE)
    assert cli("test", str(copy)).exit_code == 0


def _copy_example(folder: Path) -> Path:
    shutil.copy(AGENT, folder / AGENT.name)
    shutil.copy(EXAMPLES / "forecast_tools.py", folder / "forecast_tools.py")
    (folder / "cassettes").mkdir()
    shutil.copy(CASSETTE, folder / "cassettes" / CASSETTE.name)
    return folder / AGENT.name


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
