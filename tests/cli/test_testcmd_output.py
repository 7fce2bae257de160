"""``runner test``'s structured checks, ``expect.output_schema`` and ``expect.output_json``, end to end.

Each cassette is recorded with ``runner test --update`` against the scripted server, then the
file's ``expect`` is changed and the case replayed offline (the requests do not depend on it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runner.testing import ScriptedServer
from tests.cli.conftest import Invoke

TOOLS = '''
def get_weather(city: str) -> dict:
    """The weather of a city, today and tomorrow."""
    return {"city": city, "temps": [11, 12.5], "rain": True}
'''

MODELS = """
from pydantic import BaseModel


class Report(BaseModel):
    city: str
    temps: list[float]
    rain: bool
"""

SCHEMA = """output:
  type: object
  properties:
    city: {type: string}
    temps: {type: array, items: {type: number}}
    rain: {type: boolean}
  required: [city, temps, rain]
  additionalProperties: false
"""

ANSWER = {"city": "Vancouver", "temps": [11, 12.5], "rain": True}
SCRIPT = [
    {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Vancouver"}}]},
    {"content": json.dumps(ANSWER)},
]
CLOSED = {"W_BASE": "http://127.0.0.1:9/v1"}  # nothing listens: only the cassette can answer


def write_agent(
    folder: Path, *, output: str = SCHEMA, expect: str = "tools_called: [get_weather]", limits: str = ""
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "w_tools.py").write_text(TOOLS)
    (folder / "w_models.py").write_text(MODELS)
    path = folder / "agent.yaml"
    body = "\n".join(f"      {line}" for line in expect.strip().splitlines())
    path.write_text(
        "version: 1\nname: w\nmodel:\n  id: openai/scripted\n"
        "  api_base: ${W_BASE:-http://127.0.0.1:9/v1}\n  api_key: ${W_KEY:-sk-none}\n"
        "prompts:\n  system: You report the weather.\ntools:\n  - python: w_tools:get_weather\n"
        f"{output}{limits}"
        "tests:\n  - name: vancouver\n    input: Weather in Vancouver?\n    cassette: cassettes/v.jsonl\n"
        f"    expect:\n{body}\n"
    )
    return path


def set_expect(agent: Path, expect: str) -> None:
    text = agent.read_text()
    head = text[: text.index("    expect:\n") + len("    expect:\n")]
    agent.write_text(head + "\n".join(f"      {line}" for line in expect.strip().splitlines()) + "\n")


def record(cli: Invoke, agent: Path, script: list[dict[str, Any]] = SCRIPT) -> ScriptedServer:
    with ScriptedServer(script) as server:
        result = cli("test", str(agent), "--update", env={"W_BASE": server.base_url})
    assert result.exit_code == 0, result.output
    assert "1 passed, 0 failed" in result.output
    return server


def replay(cli: Invoke, agent: Path, expect: str) -> tuple[int, list[str]]:
    """Replay the case with ``expect``; the exit code and the failure lines of the case."""
    set_expect(agent, expect)
    result = cli("test", str(agent), env=CLOSED)
    lines = result.stdout.splitlines()
    return result.exit_code, [line.strip() for line in lines if line.startswith("  ")]


@pytest.fixture
def recorded(cli: Invoke, tmp_path: Path) -> Path:
    """An agent with an inline ``output:`` whose cassette holds a tool call and the JSON answer."""
    agent = write_agent(tmp_path / "a")
    record(cli, agent)
    return agent


def test_update_records_response_format_and_the_cassette_replays(cli: Invoke, tmp_path: Path) -> None:
    agent = write_agent(
        tmp_path / "a",
        expect="output_json: {city: Vancouver, temps.1: 12.5, rain: true}\n"
        "output_schema: {required: [temps]}",
    )
    server = record(cli, agent)
    # the scripted server saw response_format on both requests: the tools stayed on
    for request in server.requests:
        assert request["response_format"]["type"] == "json_schema"
        assert [t["function"]["name"] for t in request["tools"]] == ["get_weather"]
    lines = (agent.parent / "cassettes" / "v.jsonl").read_text().splitlines()
    interactions = [json.loads(line) for line in lines[1:]]
    assert len(interactions) == 2
    assert all("response_format" in i["request"]["params"] for i in interactions)
    result = cli("test", str(agent), env=CLOSED)
    assert result.exit_code == 0, result.output
    assert "PASS w/vancouver" in result.output and "1 passed, 0 failed" in result.output


def test_a_wrong_value_names_the_path_what_was_expected_and_what_came(cli: Invoke, recorded: Path) -> None:
    code, problems = replay(cli, recorded, 'output_json: {city: Paris, temps.0: "11", temps.1: 12.5}')
    assert code == 1
    assert problems == [
        'output_json city: expected "Paris", got "Vancouver"',
        'output_json temps.0: expected "11", got 11',
    ]


def test_values_compare_as_json_a_boolean_is_not_a_number(cli: Invoke, recorded: Path) -> None:
    code, problems = replay(cli, recorded, "output_json: {rain: 1, temps.0: 11.0}")
    assert code == 1
    assert problems == ["output_json rain: expected 1, got true"]  # 11.0 == 11 passes
    code, problems = replay(cli, recorded, "output_json: {temps: [11, 12.5], rain: true}")
    assert (code, problems) == (0, [])


def test_a_missing_key_lists_the_keys_there_are(cli: Invoke, recorded: Path) -> None:
    code, problems = replay(cli, recorded, "output_json: {country: CA}")
    assert code == 1
    assert problems == [
        "output_json country: missing: the output has no key 'country' (its keys: city, temps, rain)"
    ]


def test_an_index_out_of_range_says_how_many_items_there_are(cli: Invoke, recorded: Path) -> None:
    code, problems = replay(cli, recorded, "output_json: {temps.2: 13}")
    assert code == 1
    assert problems == ["output_json temps.2: index 2 is out of range: temps has only 2 items"]


def test_a_path_through_a_scalar_or_a_key_into_a_list_is_explained(cli: Invoke, recorded: Path) -> None:
    code, problems = replay(cli, recorded, "output_json: {city.name: V, temps.first: 11}")
    assert code == 1
    assert problems == [
        'output_json city.name: city is a string ("Vancouver"), not an object or a list',
        "output_json temps.first: temps is a list, and 'first' is not an index (list items are 0, 1, ...)",
    ]


def test_output_schema_failures_name_the_path_and_reason(cli: Invoke, recorded: Path) -> None:
    expect = "output_schema:\n  properties:\n    temps: {items: {type: string}}\n  required: [city, country]"
    code, problems = replay(cli, recorded, expect)
    assert code == 1
    assert problems == [
        "the output does not match expect.output_schema: at $: 'country' is a required property",
        "the output does not match expect.output_schema: at $.temps[0]: 11 is not of type 'string'",
        "the output does not match expect.output_schema: at $.temps[1]: 12.5 is not of type 'string'",
    ]


def test_a_python_model_output_is_checked_as_its_json_value(cli: Invoke, tmp_path: Path) -> None:
    agent = write_agent(
        tmp_path / "a", output="output: {python: w_models:Report}\n", expect="output_json: {temps.1: 12.5}"
    )
    record(cli, agent)
    code, problems = replay(cli, agent, "output_json: {rain: false}")
    assert code == 1
    assert problems == ["output_json rain: expected false, got true"]


def test_without_output_the_answer_text_is_parsed_as_json(cli: Invoke, tmp_path: Path) -> None:
    agent = write_agent(tmp_path / "a", output="", expect="output_json: {city: Vancouver, temps.1: 12.5}")
    server = record(cli, agent)
    assert all("response_format" not in request for request in server.requests)
    code, problems = replay(cli, agent, "output_json: {city: Paris}")
    assert code == 1 and problems == ['output_json city: expected "Paris", got "Vancouver"']


def test_without_output_an_answer_that_is_not_json_fails_clearly(cli: Invoke, tmp_path: Path) -> None:
    prose = [SCRIPT[0], {"content": "It is 11 °C in Vancouver."}]
    agent = write_agent(tmp_path / "a", output="")
    record(cli, agent, prose)
    code, problems = replay(cli, agent, "output_json: {city: Vancouver}\noutput_schema: {type: object}")
    assert code == 1
    assert problems == [
        "output_schema and output_json cannot be checked: the answer is not JSON "
        '(Expecting value: line 1 column 1 (char 0)): "It is 11 °C in Vancouver." '
        "(hint: give the agent an output: schema for a structured answer)"
    ]


def test_a_turn_that_ends_without_an_answer_has_no_structured_output(cli: Invoke, tmp_path: Path) -> None:
    agent = write_agent(tmp_path / "a", expect="status: limit", limits="limits:\n  max_steps: 1\n")
    record(cli, agent, SCRIPT[:1])  # one step: the tool call, then limits.max_steps ends the turn
    code, problems = replay(cli, agent, "status: limit\noutput_json: {city: Vancouver}")
    assert code == 1
    assert problems == [
        "output_json cannot be checked: no structured output: the turn ended (max_steps) "
        "without an answer that matches the output schema"
    ]


def test_validate_refuses_an_unusable_output_schema_and_malformed_paths(cli: Invoke, tmp_path: Path) -> None:
    agent = write_agent(
        tmp_path / "a",
        expect='output_schema: {type: objekt, properties: {a: {$ref: "#/$defs/nope"}}}\n'
        'output_json: {"temps[0]": 11, "a..b": 1, "$.city": V}',
    )
    result = cli("validate", str(agent))
    assert result.exit_code == 2
    errors = [line.split(": ", 1)[1] for line in result.stderr.splitlines()]
    assert errors == [
        "tests[0].expect.output_schema.type: not a valid JSON Schema: unknown type 'objekt' "
        "(did you mean 'object'?)",
        "tests[0].expect.output_schema.properties.a.$ref: $ref '#/$defs/nope' does not resolve: "
        "the schema has nothing at /$defs/nope",
        "tests[0].expect.output_json.temps[0]: output_json path 'temps[0]' is not in dotted form: keys are "
        "separated by dots, list items named by their index (did you mean 'temps.0'?)",
        "tests[0].expect.output_json.a..b: output_json path 'a..b' has an empty part: keys are separated by "
        "single dots (did you mean 'a.b'?)",
        "tests[0].expect.output_json.$.city: output_json path '$.city' is not in dotted form: keys are "
        "separated by dots, list items named by their index (did you mean 'city'?)",
    ]
    assert all(line.startswith(f"{agent}:") for line in result.stderr.splitlines())
    # runner test loads the file the same way: it refuses it before running anything
    tested = cli("test", str(agent), env=CLOSED)
    assert tested.exit_code == 2 and "not a valid JSON Schema" in tested.stderr
    assert "PASS" not in tested.stdout and "FAIL" not in tested.stdout


def test_validate_refuses_an_empty_output_json_path(cli: Invoke, tmp_path: Path) -> None:
    agent = write_agent(tmp_path / "a", expect='output_json: {"": 1}')
    result = cli("validate", str(agent))
    assert result.exit_code == 2
    assert "tests[0].expect.output_json" in result.stderr and "empty" in result.stderr
    assert "must match" not in result.stderr


def test_validate_accepts_good_structured_expectations(cli: Invoke, tmp_path: Path) -> None:
    agent = write_agent(
        tmp_path / "a",
        expect="output_schema: {type: object, required: [city]}\noutput_json: {temps.0: 11, city: V}",
    )
    result = cli("validate", str(agent))
    assert result.exit_code == 0, result.output


def test_an_answer_that_never_matches_output_fails_the_case_and_keeps_no_cassette(
    cli: Invoke, tmp_path: Path
) -> None:
    agent = write_agent(tmp_path / "a", limits="limits:\n  output_retries: 1\n")
    prose = [SCRIPT[0], {"content": "It is 11 °C."}, {"content": '{"city": "Vancouver"}'}]
    with ScriptedServer(prose) as server:
        result = cli("test", str(agent), "--update", env={"W_BASE": server.base_url})
    assert result.exit_code == 1
    problems = [line.strip() for line in result.stdout.splitlines() if line.startswith("  ")]
    assert problems[0].startswith(
        "the answer did not match the output schema after 2 tries: at $: 'temps' is a required"
    )
    assert problems[-1] == "the recording failed, so no cassette was written"
    assert len(server.requests) == 3  # the tool call, the prose, the one repair
    assert not (agent.parent / "cassettes" / "v.jsonl").exists()
