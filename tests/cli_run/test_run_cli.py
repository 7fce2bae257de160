"""`runner run` end to end: the installed command, fast path and litellm, against a scripted server."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from runner.store.transcript import read_transcript
from tests.cli_run.conftest import ROOT, Cli, both_paths, write_agent

WEATHER = str(ROOT / "examples" / "weather.yaml")

TOOLS = '''
import time
from pathlib import Path


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def slow(marker: str) -> str:
    """Write a marker file, then take a long time."""
    Path(marker).write_text("started")
    time.sleep(30)
    return "done"
'''


def agent_yaml(base_url: str, **limits: Any) -> str:
    extra = "".join(f"  {k}: {v}\n" for k, v in limits.items())
    return (
        "version: 1\nname: t\nmodel:\n  id: openai/scripted\n"
        f"  api_base: {base_url}\n  api_key: ${{TEST_API_KEY:-sk-none}}\n  retries: 1\n"
        "prompts:\n  system: You add numbers.\ntools:\n  - python: tools_mod\n"
        + (f"limits:\n{extra}" if extra else "")
    )


@both_paths
def test_weather_example_answers_and_writes_transcript(cli: Cli, serve: Any) -> None:
    server = serve(
        [
            {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Vancouver"}}]},
            {"content": "11 °C and light rain in Vancouver."},
        ]
    )
    result = cli(
        "run", WEATHER, "-p", "Weather in Vancouver?", extra_env={"OPENAI_BASE_URL": server.base_url}
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "11 °C and light rain in Vancouver."
    assert "→ get_weather" in result.stderr and "usage:" in result.stderr
    # the tool really ran and its result went back to the model
    tool_message = server.requests[1]["messages"][-1]
    assert tool_message["role"] == "tool" and '"temperature":11.0' in tool_message["content"]
    (path,) = cli.transcripts()
    transcript = read_transcript(path)
    assert transcript.header["agent"] == "weather"
    assert [m["role"] for m in transcript.messages()] == ["system", "user", "assistant", "tool", "assistant"]


def test_json_output_is_one_event_per_line(cli: Cli, serve: Any, tmp_path: Path) -> None:
    server = serve([{"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]}, {"content": "5"}])
    agent = write_agent(tmp_path / "a", agent_yaml(server.base_url), tools=TOOLS)
    result = cli("run", str(agent), "-p", "2+3?", "--json")
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    kinds = [e["type"] for e in events]
    assert kinds[-1] == "end" and "tool_call" in kinds and "tool_result" in kinds and "usage" in kinds
    result_event = next(e for e in events if e["type"] == "tool_result")
    assert result_event["content"] == "5" and result_event["is_error"] is False
    assert next(e for e in events if e["type"] == "turn_end")["output"] == "5"
    # the session is the first event and the end names it again: a script can resume it
    (path,) = cli.transcripts()
    assert events[0] == {"type": "session", "session_id": path.stem, "resumed": False}
    assert events[-1]["session_id"] == path.stem


def test_a_confirmation_asked_off_a_terminal_goes_to_stderr(cli: Cli, serve: Any, tmp_path: Path) -> None:
    server = serve([{"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]}, {"content": "5"}])
    body = agent_yaml(server.base_url).replace(
        "  - python: tools_mod\n", "  - python: tools_mod\n    confirm: true\n"
    )
    agent = write_agent(tmp_path / "a", body, tools=TOOLS)
    result = cli("run", str(agent), "-p", "2+3?", "-i", "--json", input="y\n")
    assert result.returncode == 0, result.stderr
    assert "[y/n/a(lways)]" in result.stderr and "[y/n" not in result.stdout
    assert "t> " in result.stderr  # the chat's prompt too
    assert all(json.loads(line) for line in result.stdout.splitlines())


def test_prompt_from_stdin_and_several_prompts_in_order(cli: Cli, serve: Any, tmp_path: Path) -> None:
    server = serve([{"content": "one"}, {"content": "two"}])
    agent = write_agent(tmp_path / "a", agent_yaml(server.base_url), tools=TOOLS)
    result = cli("run", str(agent), "-p", "first", "-p", "second")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["one", "two"]
    assert [r["messages"][-1]["content"] for r in server.requests] == ["first", "second"]
    server2 = serve([{"content": "piped"}])
    agent2 = write_agent(tmp_path / "b", agent_yaml(server2.base_url), tools=TOOLS)
    piped = cli("run", str(agent2), input="from stdin\n")
    assert piped.returncode == 0 and piped.stdout.strip() == "piped"
    assert server2.requests[0]["messages"][-1]["content"] == "from stdin\n"


def test_max_steps_ends_with_exit_3(cli: Cli, serve: Any, tmp_path: Path) -> None:
    server = serve([{"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 1}}]}], repeat=True)
    agent = write_agent(tmp_path / "a", agent_yaml(server.base_url, max_steps=3, max_repeat=10), tools=TOOLS)
    result = cli("run", str(agent), "-p", "loop forever")
    assert result.returncode == 3, result.stderr
    assert "limits.max_steps" in result.stderr
    assert len(server.requests) == 3


def test_server_errors_are_retried_then_recover(cli: Cli, serve: Any, tmp_path: Path) -> None:
    server = serve([{"status": 500, "error": "boom"}, {"content": "recovered"}])
    agent = write_agent(tmp_path / "a", agent_yaml(server.base_url), tools=TOOLS)
    result = cli("run", str(agent), "-p", "hi")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "recovered"
    assert len(server.requests) == 2


def test_unrecoverable_model_error_exits_1_then_resume_continues(
    cli: Cli, serve: Any, tmp_path: Path
) -> None:
    failing = serve([{"status": 429, "error": "slow down"}], repeat=True)
    agent = write_agent(tmp_path / "a", agent_yaml(failing.base_url), tools=TOOLS)
    result = cli("run", str(agent), "-p", "what is 2+2?")
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr and "429" in result.stderr
    (path,) = cli.transcripts()
    assert result.stderr.rstrip().endswith(f"the session is kept: runner resume {path.stem}")
    transcript = read_transcript(path)
    assert transcript.messages()[-1] == {"role": "user", "content": "what is 2+2?"}
    assert any(e["event"] == "error" for e in transcript.events())
    # the endpoint comes back (same agent file, new URL): resume answers without a new prompt
    working = serve([{"content": "4"}])
    agent.write_text(agent_yaml(working.base_url))
    resumed = cli("resume", path.stem)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.strip() == "4"
    assert working.requests[0]["messages"][-1]["content"] == "what is 2+2?"
    # the unfinished turn kept its number: one turn, not two
    turns = [e["data"]["turn"] for e in read_transcript(path).events() if e["event"] == "turn"]
    assert turns == [1, 1]


def test_a_failed_json_run_reports_the_error_and_its_session_id_on_stdout(
    cli: Cli, serve: Any, tmp_path: Path
) -> None:
    failing = serve([{"status": 400, "error": "bad request"}], repeat=True)
    agent = write_agent(tmp_path / "a", agent_yaml(failing.base_url), tools=TOOLS)
    result = cli("run", str(agent), "-p", "hi", "--json")
    assert result.returncode == 1
    records = [json.loads(line) for line in result.stdout.splitlines()]
    (error,) = [r for r in records if r["type"] == "error"]
    (path,) = cli.transcripts()
    assert error["session_id"] == path.stem and "bad request" in error["message"]


def test_a_torn_last_transcript_line_is_cut_on_resume_and_never_written_after(
    cli: Cli, serve: Any, tmp_path: Path
) -> None:
    server = serve([{"content": "one"}, {"content": "two"}, {"content": "three"}])
    agent = write_agent(tmp_path / "a", agent_yaml(server.base_url), tools=TOOLS)
    assert cli("run", str(agent), "-p", "first").returncode == 0
    (path,) = cli.transcripts()
    with path.open("a", encoding="utf-8") as file:  # kill -9 in the middle of a large record
        file.write('{"type": "message", "message": {"role": "assistant", "content": "half a rec')
    for prompt in ("second", "third"):
        resumed = cli("resume", path.stem, "-p", prompt)
        assert resumed.returncode == 0, resumed.stderr
    shown = cli("sessions", "show", path.stem)
    assert shown.returncode == 0, shown.stderr
    transcript = read_transcript(path)
    answers = [m["content"] for m in transcript.messages() if m["role"] == "assistant"]
    assert answers == ["one", "two", "three"]
    (repair,) = [e for e in transcript.events() if e["event"] == "repaired"]
    assert repair["data"]["cut_bytes"] > 0
    assert "half a rec" not in path.read_text()


def _wait_for(path: Path, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


def _wait_for_recorded_call(cli: Cli, timeout: float = 90) -> None:
    """Until the transcript holds the assistant message with the call (eager tools start before it)."""
    deadline = time.monotonic() + timeout
    while True:
        paths = cli.transcripts()
        if paths and any(m.get("tool_calls") for m in read_transcript(paths[0]).messages()):
            return
        assert time.monotonic() < deadline, "the assistant message never reached the transcript"
        time.sleep(0.02)


def test_kill_9_mid_turn_then_resume_loses_nothing(cli: Cli, serve: Any, tmp_path: Path) -> None:
    marker = tmp_path / "started"
    server = serve([{"tool_calls": [{"name": "slow", "arguments": {"marker": str(marker)}}]}])
    agent = write_agent(tmp_path / "a", agent_yaml(server.base_url), tools=TOOLS)
    process = cli.popen("run", str(agent), "-p", "do the slow thing")
    _wait_for(marker)
    _wait_for_recorded_call(cli)  # "kill -9 loses at most the message being generated": wait past it
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=10)
    (path,) = cli.transcripts()
    before = read_transcript(path).messages()
    assert before[-1]["role"] == "assistant" and before[-1]["tool_calls"][0]["function"]["name"] == "slow"
    after_server = serve([{"content": "sorry, that took too long"}])
    agent.write_text(agent_yaml(after_server.base_url))
    resumed = cli("resume", path.stem)
    assert resumed.returncode == 0, resumed.stderr
    sent = after_server.requests[0]["messages"]
    assert [m["content"] for m in sent[: len(before)] if m["role"] == "user"] == ["do the slow thing"]
    assert sent[-1]["role"] == "tool" and "stopped before this call finished" in sent[-1]["content"]
    assert resumed.stdout.strip() == "sorry, that took too long"


def test_ctrl_c_during_a_tool_exits_130_with_every_call_answered(
    cli: Cli, serve: Any, tmp_path: Path
) -> None:
    marker = tmp_path / "started"
    server = serve([{"tool_calls": [{"name": "slow", "arguments": {"marker": str(marker)}}]}])
    agent = write_agent(tmp_path / "a", agent_yaml(server.base_url), tools=TOOLS)
    process = cli.popen("run", str(agent), "-p", "slow please")
    _wait_for(marker)
    _wait_for_recorded_call(cli)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    (path,) = cli.transcripts()
    messages = read_transcript(path).messages()
    assert messages[-2]["role"] == "tool" and "Interrupted" in messages[-2]["content"]
    assert "interrupted" in messages[-1]["content"]


def test_interactive_commands_never_reach_the_model(cli: Cli, serve: Any, tmp_path: Path) -> None:
    server = serve([{"content": "hello there"}, {"content": "again"}])
    agent = write_agent(tmp_path / "a", agent_yaml(server.base_url), tools=TOOLS)
    lines = "hi\n/tools\n/history\n/undo\n/help\n/vars mood=calm\n/reload\nagain\n/exit\n"
    result = cli("run", str(agent), "-i", input=lines)
    assert result.returncode == 0, result.stderr
    assert "hello there" in result.stdout and "again" in result.stdout
    assert "add" in result.stderr and "dropped 2 messages" in result.stderr
    assert "reloaded: no change that affects the run" in result.stderr
    assert len(server.requests) == 2
    # /undo removed the first turn: the second request does not carry it
    assert [m["content"] for m in server.requests[1]["messages"] if m["role"] == "user"] == ["again"]


def test_tools_command_lists_the_registry(cli: Cli) -> None:
    table = cli("tools", WEATHER)
    assert table.returncode == 0, table.stderr
    assert "get_weather" in table.stdout and "python:" in table.stdout
    specs = json.loads(cli("tools", WEATHER, "--json").stdout)
    assert specs[0]["function"]["name"] == "get_weather"
    assert specs[0]["function"]["parameters"]["required"] == ["city"]


def test_sessions_list_and_show_print_provenance(cli: Cli, serve: Any) -> None:
    server = serve([{"content": "fine"}])
    assert cli("run", WEATHER, "-p", "hi", extra_env={"OPENAI_BASE_URL": server.base_url}).returncode == 0
    listing = cli("sessions", "list")
    assert "weather" in listing.stdout
    session_id = listing.stdout.split()[0]
    shown = cli("sessions", "show", session_id)
    assert shown.returncode == 0, shown.stderr
    assert "sha256" in shown.stdout and "git" in shown.stdout and "[assistant] fine" in shown.stdout


def test_missing_prompt_and_missing_model_are_usage_errors(cli: Cli, tmp_path: Path) -> None:
    agent = write_agent(tmp_path / "a", "version: 1\nname: nomodel\n")
    result = cli("run", str(agent), "-p", "hi")
    assert result.returncode == 2
    assert "names no model" in result.stderr and "Traceback" not in result.stderr


def test_sessions_list_is_newest_first_with_how_each_ended_and_show_hides_bookkeeping(
    cli: Cli, serve: Any, tmp_path: Path
) -> None:
    ok = serve([{"content": "fine"}])
    agent = write_agent(tmp_path / "a", agent_yaml(ok.base_url), tools=TOOLS)
    assert cli("run", str(agent), "-p", "first").returncode == 0
    failing = serve([{"status": 400, "error": "no"}], repeat=True)
    agent.write_text(agent_yaml(failing.base_url))
    time.sleep(1.1)  # session ids begin with the second they started
    assert cli("run", str(agent), "-p", "second").returncode == 1
    listed = cli("sessions", "list")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert len(lines) == 2
    assert " failed " in lines[0] and "second" in lines[0]
    assert " done " in lines[1] and "first" in lines[1]
    sid = lines[1].split()[0]
    shown = cli("sessions", "show", sid)
    assert "status   done" in shown.stdout
    assert "(prompt:" not in shown.stdout and "(turn 1, configuration " in shown.stdout
    assert "(prompt:" in cli("sessions", "show", sid, "--all").stdout


def test_a_mistyped_var_is_warned_about_with_did_you_mean(cli: Cli, serve: Any, tmp_path: Path) -> None:
    server = serve([{"content": "ok"}], repeat=True)
    body = (
        agent_yaml(server.base_url).replace(
            "system: You add numbers.", "system: 'You add numbers in {{ units }}.'"
        )
        + "vars:\n  units: metric\n"
    )
    agent = write_agent(tmp_path / "a", body, tools=TOOLS)
    result = cli("run", str(agent), "-p", "hi", "--var", "unitz=imperial")
    assert result.returncode == 0, result.stderr
    assert "warning: --var unitz is not a variable of t (did you mean 'units'?)" in result.stderr
    quiet = cli("run", str(agent), "-p", "hi", "--var", "units=imperial")
    assert "warning: --var" not in quiet.stderr
