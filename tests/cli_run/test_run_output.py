"""`runner run` with ``output:``: the installed command against the scripted server (and a cassette).

The object is the only thing on stdout (compact JSON off a terminal, indented on one), ``--json``
reports it as an ``output`` event, the transcript records it; an answer that never matches ends
the run with exit code 1, the session kept, whatever the model writes (prose, extra keys, megabytes).
"""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import time
from pathlib import Path
from typing import Any

from runner.store.transcript import Transcript, read_transcript
from tests.cli_run.conftest import RUNNER, Cli, write_agent

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "temp": {"type": "number"}},
    "required": ["city", "temp"],
    "additionalProperties": False,
}
ANSWER = {"city": "Vancouver", "temp": 11.5}
TOOLS = '''
def get_temp(city: str) -> float:
    """The temperature in a city, in °C."""
    return 11.5
'''


def agent_yaml(base_url: str, *, extra: str = "") -> str:
    return (
        "version: 1\nname: forecast\nmodel:\n  id: openai/scripted\n"
        f"  api_base: {base_url}\n  api_key: ${{TEST_API_KEY:-sk-none}}\n  retries: 0\n"
        "prompts:\n  system: You report the weather.\ntools:\n  - python: tools_mod\n"
        f"output: {json.dumps(SCHEMA)}\n{extra}"
    )


def only_transcript(cli: Cli) -> Transcript:
    (path,) = cli.transcripts()
    return read_transcript(path)


def events(transcript: Transcript, name: str) -> list[dict[str, Any]]:
    return [e for e in transcript.events() if e["event"] == name]


def last_line(text: str, prefix: str) -> str:
    (line,) = [line for line in text.splitlines() if line.startswith(prefix)]
    return line


# ----------------------------------------------------------------- where the object goes


def test_off_a_terminal_stdout_is_the_object_as_compact_json_and_nothing_else(
    cli: Cli, serve: Any, tmp_path: Path
) -> None:
    server = serve(
        [
            {"tool_calls": [{"name": "get_temp", "arguments": {"city": "Vancouver"}}]},
            {"content": json.dumps(ANSWER, indent=4)},  # the model's own layout does not matter
        ]
    )
    agent = write_agent(tmp_path / "a", agent_yaml(server.base_url), tools=TOOLS)
    result = cli("run", str(agent), "-p", "Weather in Vancouver?")
    assert result.returncode == 0, result.stderr
    assert result.stdout == '{"city":"Vancouver","temp":11.5}\n'
    # progress on stderr: the step, the tool call, the usage
    assert "· turn 1 step 1" in result.stderr and "→ get_temp" in result.stderr
    assert "usage:" in result.stderr
    # the tools kept working, and every request asked for the schema
    assert server.requests[1]["messages"][-1]["role"] == "tool"
    assert all(r["response_format"]["json_schema"]["schema"] == SCHEMA for r in server.requests)
    transcript = only_transcript(cli)
    assert [e["data"]["value"] for e in events(transcript, "output")] == [ANSWER]


def _run_on_a_terminal(cli: Cli, *args: str) -> tuple[int, str, str]:
    """``runner ARGS`` with stdout on a pseudo-terminal (stderr a pipe): exit code, stdout, stderr."""
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen(
            [RUNNER, *args],
            cwd=cli.cwd,
            env=cli.env,
            stdin=subprocess.DEVNULL,
            stdout=follower,
            stderr=subprocess.PIPE,
        )
        os.close(follower)
        follower = -1
        chunks: list[bytes] = []
        deadline = time.monotonic() + 50
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 1)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                data = os.read(leader, 65536)
            except OSError:  # EIO: the other side closed
                break
            if not data:
                break
            chunks.append(data)
        assert proc.stderr is not None
        stderr = proc.stderr.read().decode()
        code = proc.wait(timeout=10)
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)
    return code, b"".join(chunks).decode().replace("\r\n", "\n"), stderr


def test_on_a_terminal_the_object_is_indented(cli: Cli, serve: Any, tmp_path: Path) -> None:
    server = serve([{"content": json.dumps(ANSWER)}])
    agent = write_agent(tmp_path / "a", agent_yaml(server.base_url), tools=TOOLS)
    code, stdout, stderr = _run_on_a_terminal(cli, "run", str(agent), "-p", "Weather?")
    assert code == 0, stderr
    assert stdout == json.dumps(ANSWER, indent=2) + "\n"
    assert "usage:" in stderr and "usage:" not in stdout


def test_json_reports_one_output_event_then_the_turn_end(cli: Cli, serve: Any, tmp_path: Path) -> None:
    server = serve([{"content": json.dumps(ANSWER)}])
    agent = write_agent(tmp_path / "a", agent_yaml(server.base_url), tools=TOOLS)
    result = cli("run", str(agent), "-p", "Weather?", "--json")
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    outputs = [r for r in records if r["type"] == "output"]
    assert outputs == [{"type": "output", "output": ANSWER}]
    kinds = [r["type"] for r in records]
    assert kinds.index("output") < kinds.index("turn_end") < kinds.index("end")
    turn_end = records[kinds.index("turn_end")]
    assert turn_end["reason"] == "done" and json.loads(turn_end["output"]) == ANSWER
    assert [e["data"]["value"] for e in events(only_transcript(cli), "output")] == [ANSWER]


def test_a_recorded_run_replays_offline_to_the_same_object(cli: Cli, serve: Any, tmp_path: Path) -> None:
    server = serve(
        [
            {"tool_calls": [{"name": "get_temp", "arguments": {"city": "Vancouver"}}]},
            {"content": json.dumps(ANSWER)},
        ]
    )
    agent = write_agent(tmp_path / "a", agent_yaml(server.base_url), tools=TOOLS)
    cassette = tmp_path / "forecast.jsonl"
    recorded = cli("run", str(agent), "-p", "Weather?", "--record", str(cassette))
    assert recorded.returncode == 0, recorded.stderr
    server.close()  # the replay reaches no server
    replayed = cli("run", str(agent), "-p", "Weather?", "--replay", str(cassette))
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout == recorded.stdout == '{"city":"Vancouver","temp":11.5}\n'
    assert len(server.requests) == 2
    replay_transcript = read_transcript(max(cli.transcripts(), key=lambda p: p.stat().st_mtime_ns))
    assert [e["data"]["value"] for e in events(replay_transcript, "output")] == [ANSWER]


# ----------------------------------------------------------------- answers that never match


def test_prose_forever_fails_after_the_retries_with_the_session_kept(
    cli: Cli, serve: Any, tmp_path: Path
) -> None:
    server = serve([{"content": "It is sunny and mild."}], repeat=True)
    agent = write_agent(tmp_path / "a", agent_yaml(server.base_url), tools=TOOLS)
    result = cli("run", str(agent), "-p", "Weather?")
    assert result.returncode == 1, result.stderr
    assert len(server.requests) == 3  # limits.output_retries defaults to 2: three answers
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    error = last_line(result.stderr, "error:")
    assert "after 3 tries" in error and "the answer holds no JSON object or array" in error
    (path,) = cli.transcripts()
    assert result.stderr.rstrip().endswith(f"the session is kept: runner resume {path.stem}")
    transcript = read_transcript(path)
    assert transcript.messages()[-1] == {"role": "assistant", "content": "It is sunny and mild."}
    assert len(events(transcript, "output_invalid")) == 3 and events(transcript, "output") == []
    # each retry told the model why, and what to match
    for request in server.requests[1:]:
        repair = request["messages"][-1]
        assert repair["role"] == "user" and "the answer holds no JSON object or array" in repair["content"]
        assert json.dumps(SCHEMA) in repair["content"]


def test_output_retries_zero_fails_on_the_first_bad_answer(cli: Cli, serve: Any, tmp_path: Path) -> None:
    server = serve([{"content": "Sunny."}], repeat=True)
    body = agent_yaml(server.base_url, extra="limits:\n  output_retries: 0\n")
    agent = write_agent(tmp_path / "a", body, tools=TOOLS)
    result = cli("run", str(agent), "-p", "Weather?")
    assert result.returncode == 1, result.stderr
    assert len(server.requests) == 1
    assert "after 1 try" in last_line(result.stderr, "error:")
    assert "the session is kept: runner resume" in result.stderr


def test_extra_keys_under_closed_properties_are_repaired_by_the_next_answer(
    cli: Cli, serve: Any, tmp_path: Path
) -> None:
    server = serve([{"content": json.dumps({**ANSWER, "wind": 3})}, {"content": json.dumps(ANSWER)}])
    agent = write_agent(tmp_path / "a", agent_yaml(server.base_url), tools=TOOLS)
    result = cli("run", str(agent), "-p", "Weather?")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == ANSWER
    assert len(server.requests) == 2
    repair = server.requests[1]["messages"][-1]["content"]
    assert "'wind' was unexpected" in repair and "1 more try" not in repair and "2 more tries" in repair
    assert "'wind' was unexpected" in result.stderr  # the warning says it too


def _repairs(server: Any) -> list[str]:
    return [r["messages"][-1]["content"] for r in server.requests[1:]]


def test_a_huge_answer_is_refused_quickly_with_short_messages(cli: Cli, serve: Any, tmp_path: Path) -> None:
    prose = "weather " * 375_000  # 3 MB of text
    huge_json = json.dumps({"city": "V", "temp": "9" * 3_000_000})  # 3 MB, a string where a number goes
    server = serve([{"content": prose}, {"content": huge_json}, {"content": prose}])
    agent = write_agent(tmp_path / "a", agent_yaml(server.base_url), tools=TOOLS)
    started = time.monotonic()
    result = cli("run", str(agent), "-p", "Weather?")
    elapsed = time.monotonic() - started
    assert result.returncode == 1, result.stderr[-2000:]
    assert elapsed < 30  # about a second on a quiet machine; a parser stuck in megabytes takes minutes
    assert len(server.requests) == 3
    for repair in _repairs(server):
        assert len(repair.encode()) < 2000 and "characters long; an answer may have at most" in repair
    error = last_line(result.stderr, "error:")
    assert len(error) < 600 and "after 3 tries: the answer is 3,000,000 characters long" in error
    assert all(len(line) < 1000 for line in result.stderr.splitlines())
    transcript = only_transcript(cli)
    assert transcript.messages()[-1]["content"] == prose  # the last invalid answer is kept whole


def test_a_long_string_where_a_number_goes_keeps_the_reason_in_a_short_message(
    cli: Cli, serve: Any, tmp_path: Path
) -> None:
    # under the length limit, so it is parsed and validated: the validator quotes the value
    wrong = json.dumps({"city": "V", "temp": "9" * 900_000})
    server = serve([{"content": wrong}], repeat=True)
    agent = write_agent(tmp_path / "a", agent_yaml(server.base_url), tools=TOOLS)
    result = cli("run", str(agent), "-p", "Weather?")
    assert result.returncode == 1, result.stderr[-2000:]
    reason = "at $.temp: a string of 900,000 characters (\"99999999999999999999...) is not of type 'number'"
    for repair in _repairs(server):
        assert len(repair.encode()) < 2000 and reason in repair
    error = last_line(result.stderr, "error:")
    assert reason in error and len(error) < 600


def test_inline_mode_reads_json_with_trailing_commas_and_single_quotes(
    cli: Cli, serve: Any, tmp_path: Path
) -> None:
    server = serve([{"content": "Here it is:\n```json\n{'city': 'Vancouver', 'temp': 11.5,}\n```"}])
    body = agent_yaml(server.base_url, extra="function_calling: inline\n")
    agent = write_agent(tmp_path / "a", body, tools=TOOLS)
    result = cli("run", str(agent), "-p", "Weather?")
    assert result.returncode == 0, result.stderr
    assert result.stdout == '{"city":"Vancouver","temp":11.5}\n'
    assert len(server.requests) == 1  # repaired locally: no extra request
    assert "response_format" not in server.requests[0]
    assert "reply with only a JSON value" in server.requests[0]["messages"][0]["content"]


def test_a_model_that_does_not_import_stops_the_run_before_any_request(
    cli: Cli, serve: Any, tmp_path: Path
) -> None:
    server = serve([{"content": json.dumps(ANSWER)}])
    body = agent_yaml(server.base_url).replace(
        f"output: {json.dumps(SCHEMA)}", "output: {python: types_mod:Forecast}"
    )
    agent = write_agent(tmp_path / "a", body, tools=TOOLS)
    (tmp_path / "a" / "types_mod.py").write_text("import pydantic\nraise ValueError('half-written')\n")
    result = cli("run", str(agent), "-p", "Weather?")
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines()[0] == (
        "a/agent.yaml:12:18: output.python: importing 'types_mod' failed: ValueError: half-written"
    )
    assert "Traceback" not in result.stderr and result.stdout == "" and server.requests == []


def test_json_mode_ends_a_failed_answer_with_an_error_record_and_no_output(
    cli: Cli, serve: Any, tmp_path: Path
) -> None:
    server = serve([{"content": "Sunny."}], repeat=True)
    agent = write_agent(tmp_path / "a", agent_yaml(server.base_url), tools=TOOLS)
    result = cli("run", str(agent), "-p", "Weather?", "--json")
    assert result.returncode == 1, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]  # every line is JSON
    assert [r for r in records if r["type"] == "output"] == []
    (error,) = [r for r in records if r["type"] == "error"]
    (path,) = cli.transcripts()
    assert error["session_id"] == path.stem and "the answer holds no JSON object or array" in error["message"]


def test_each_prompt_prints_its_own_object_on_its_own_line(cli: Cli, serve: Any, tmp_path: Path) -> None:
    second = {"city": "Paris", "temp": 8}
    server = serve([{"content": json.dumps(ANSWER)}, {"content": f"```json\n{json.dumps(second)}\n```"}])
    agent = write_agent(tmp_path / "a", agent_yaml(server.base_url), tools=TOOLS)
    result = cli("run", str(agent), "-p", "Vancouver?", "-p", "Paris?")
    assert result.returncode == 0, result.stderr
    assert [json.loads(line) for line in result.stdout.splitlines()] == [ANSWER, second]


def test_a_pydantic_model_that_prints_as_it_loads_leaves_stdout_to_the_object(
    cli: Cli, serve: Any, tmp_path: Path
) -> None:
    server = serve([{"content": json.dumps(ANSWER)}])
    body = agent_yaml(server.base_url).replace(
        f"output: {json.dumps(SCHEMA)}", "output: {python: noisy_types:Forecast}"
    )
    agent = write_agent(tmp_path / "a", body, tools=TOOLS)
    (tmp_path / "a" / "noisy_types.py").write_text(
        "import pydantic\nprint('loading the forecast types')\n\n\n"
        "class Forecast(pydantic.BaseModel):\n    city: str\n    temp: float\n"
    )
    result = cli("run", str(agent), "-p", "Weather?")
    assert result.returncode == 0, result.stderr
    assert result.stdout == '{"city":"Vancouver","temp":11.5}\n'
    assert "loading the forecast types" in result.stderr
    schema = server.requests[0]["response_format"]["json_schema"]["schema"]
    assert schema["required"] == ["city", "temp"] and set(schema["properties"]) == {"city", "temp"}
