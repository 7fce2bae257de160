"""`runner run` at the session level: queued turns, limits on them, resuming, switching models, exiting."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from runner.store.transcript import read_transcript
from tests.cli_run.conftest import Cli, write_agent


def agent_yaml(base_url: str, extra: str = "", *, name: str = "t") -> str:
    return (
        f"version: 1\nname: {name}\nmodel:\n  id: openai/scripted\n  api_base: {base_url}\n  retries: 0\n"
        "prompts:\n  system: You answer.\n" + extra
    )


FOREVER_HOOK = '''
def again(event):
    """Queue three more messages after every turn, forever."""
    return {"messages": ["more", "and more", "still more"]}
'''


def test_a_hook_that_queues_forever_is_stopped_by_max_queue_then_max_turns_with_exit_3(
    cli: Cli, serve: Any, tmp_path: Path
) -> None:
    server = serve([{"content": "ok"}], repeat=True)
    extra = (
        "limits:\n  max_queue: 2\n  max_turns: 4\nhooks:\n  loop_continue:\n    - python: hooks_mod:again\n"
    )
    folder = tmp_path / "a"
    agent = write_agent(folder, agent_yaml(server.base_url, extra))
    (folder / "hooks_mod.py").write_text(FOREVER_HOOK)
    result = cli("run", str(agent), "-p", "start")
    assert result.returncode == 3, result.stderr
    assert len(server.requests) == 4  # max_turns: the queued messages ran until the bound
    assert "the queue is full (limits.max_queue = 2)" in result.stderr
    assert "it would exceed limits.max_turns (4)" in result.stderr
    (path,) = cli.transcripts()
    drops = [e["data"]["reason"] for e in read_transcript(path).events() if e["event"] == "queue_drop"]
    assert set(drops) == {"max_queue", "max_turns"}
    users = [m["content"] for m in read_transcript(path).messages() if m["role"] == "user"]
    assert users == ["start", "more", "and more", "more"]


def test_a_session_of_another_agent_is_refused_naming_both(cli: Cli, serve: Any, tmp_path: Path) -> None:
    server = serve([{"content": "hello"}])
    first = write_agent(tmp_path / "a", agent_yaml(server.base_url, name="alpha"))
    other = write_agent(tmp_path / "b", agent_yaml(server.base_url, name="beta"))
    assert cli("run", str(first), "-p", "hi").returncode == 0
    (path,) = cli.transcripts()
    refused = cli("run", str(other), "--session", path.stem, "-p", "more")
    assert refused.returncode == 2
    assert "belongs to agent 'alpha'" in refused.stderr and "not to 'beta'" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert len(server.requests) == 1  # nothing was sent


def test_a_team_members_session_continues_with_agent(cli: Cli, serve: Any, tmp_path: Path) -> None:
    server = serve([{"content": "from calc"}, {"content": "calc again"}])
    team = write_agent(
        tmp_path / "t",
        "version: 1\nagents:\n"
        f"  lead:\n    model: {{id: openai/scripted, api_base: '{server.base_url}'}}\n"
        f"  calc:\n    model: {{id: openai/scripted, api_base: '{server.base_url}'}}\n",
    )
    assert cli("run", str(team), "--agent", "calc", "-p", "one").returncode == 0
    (path,) = cli.transcripts()
    again = cli("run", str(team), "--agent", "calc", "--session", path.stem, "-p", "two")
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == "calc again"
    wrong = cli("run", str(team), "--agent", "lead", "--session", path.stem, "-p", "three")
    assert wrong.returncode == 2 and "belongs to agent 'calc'" in wrong.stderr


def test_a_resumed_unfinished_turn_keeps_its_number(cli: Cli, serve: Any, tmp_path: Path) -> None:
    failing = serve([{"content": "first"}, {"status": 500, "error": "down"}])
    agent = write_agent(tmp_path / "a", agent_yaml(failing.base_url))
    result = cli("run", str(agent), "-p", "one", "-p", "two")
    assert result.returncode == 1
    (path,) = cli.transcripts()
    working = serve([{"content": "second"}, {"content": "third"}])
    agent.write_text(agent_yaml(working.base_url))
    resumed = cli("resume", path.stem, "-p", "three")
    assert resumed.returncode == 0, resumed.stderr
    turns = [e["data"] for e in read_transcript(path).events() if e["event"] == "turn"]
    assert [t["turn"] for t in turns] == [1, 2, 2, 3]  # the unfinished turn 2 goes on as turn 2
    assert turns[2].get("continued") is True


def test_model_command_keeps_the_fast_path_setting(cli: Cli, serve: Any, tmp_path: Path) -> None:
    server = serve([{"content": "one"}, {"content": "two"}])
    agent = write_agent(tmp_path / "a", agent_yaml(server.base_url))
    lines = "hi\n/model openai/other\nagain\n/exit\n"
    result = cli("run", str(agent), "-i", input=lines)
    assert result.returncode == 0, result.stderr
    assert [r["model"] for r in server.requests] == ["scripted", "other"]
    # the httpx fast path sends no x-stainless-* headers (litellm's openai client does)
    assert not any(k.startswith("x-stainless") for k in server.headers[1])


def test_model_command_goes_through_litellm_when_the_fast_path_is_off(
    cli: Cli, serve: Any, tmp_path: Path
) -> None:
    server = serve([{"content": "one"}, {"content": "two"}])
    agent = write_agent(tmp_path / "a", agent_yaml(server.base_url))
    lines = "hi\n/model openai/other\nagain\n/exit\n"
    result = cli("run", str(agent), "-i", input=lines, extra_env={"RUNNER_FAST_PATH": "0"})
    assert result.returncode == 0, result.stderr
    assert [r["model"] for r in server.requests] == ["scripted", "other"]
    assert any(k.startswith("x-stainless") for k in server.headers[1])


ATEXIT_TOOLS = '''
import atexit
import os
import time


def _goodbye():
    with open(os.environ["GOODBYE_FILE"], "w") as file:
        file.write("bye")


atexit.register(_goodbye)


def hang() -> str:
    """Take much longer than the tool timeout."""
    time.sleep(30)
    return "late"
'''


def test_tool_modules_atexit_handlers_run_even_with_an_abandoned_tool(
    cli: Cli, serve: Any, tmp_path: Path
) -> None:
    server = serve([{"tool_calls": [{"name": "hang", "arguments": {}}]}, {"content": "gave up"}])
    folder = tmp_path / "a"
    extra = "tools:\n  - python: tools_mod\nlimits:\n  tool_timeout_s: 0.2\n"
    agent = write_agent(folder, agent_yaml(server.base_url, extra), tools=ATEXIT_TOOLS)
    goodbye = tmp_path / "goodbye"
    result = cli.process("run", str(agent), "-p", "go", extra_env={"GOODBYE_FILE": str(goodbye)}, timeout=20)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "gave up"
    assert goodbye.read_text() == "bye"  # the process did not wait 30 s for the thread, and ran atexit


def test_tool_modules_atexit_handlers_run_on_a_normal_exit(cli: Cli, serve: Any, tmp_path: Path) -> None:
    server = serve([{"content": "fine"}])
    folder = tmp_path / "a"
    agent = write_agent(
        folder, agent_yaml(server.base_url, "tools:\n  - python: tools_mod\n"), tools=ATEXIT_TOOLS
    )
    goodbye = tmp_path / "goodbye"
    result = cli.process("run", str(agent), "-p", "go", extra_env={"GOODBYE_FILE": str(goodbye)})
    assert result.returncode == 0, result.stderr
    assert goodbye.read_text() == "bye"


def test_json_run_reports_each_queued_turn(cli: Cli, serve: Any, tmp_path: Path) -> None:
    server = serve([{"content": "draft"}, {"content": "final"}])
    extra = "limits:\n  max_turns: 2\nhooks:\n  turn_post:\n    - message: Check it.\n"
    agent = write_agent(tmp_path / "a", agent_yaml(server.base_url, extra))
    result = cli("run", str(agent), "-p", "go", "--json")
    assert result.returncode == 3  # the second "Check it." is dropped: it would exceed max_turns
    records = [json.loads(line) for line in result.stdout.splitlines()]
    ends = [r for r in records if r["type"] == "turn_end"]
    assert [(e["output"], e["reason"]) for e in ends] == [("draft", "done"), ("final", "done")]
    assert any(r["type"] == "note" and "limits.max_turns (2)" in r["text"] for r in records)
