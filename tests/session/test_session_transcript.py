"""Transcripts (SPEC section 12) and the session commands that change a running session: the header,
times, secrets, the schema of every record; undo, set_variables, set_model."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import subprocess
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

import runner
from runner.resources import load_schema
from runner.testing import ScriptedModel, text, tool_call

TOOLS = """
def add(a: int, b: int) -> int:
    \"\"\"Add two numbers.\"\"\"
    return a + b


def show_vars(__vars__) -> dict:
    \"\"\"The template variables the tool sees.\"\"\"
    return dict(__vars__)


def fail() -> str:
    \"\"\"Fail.\"\"\"
    raise RuntimeError("broken")
"""


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=Test", "-c", "user.email=test@example.com", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


# ----------------------------------------------------------------------------- the file


async def test_header_names_the_session_agent_file_runner_and_model(agent, drive, tmp_path):
    spec = agent(tools=TOOLS)
    run = await drive(spec, [text("hi")], "hello")
    header = run.records()[0]
    assert header["type"] == "header"
    assert header["session_id"] == run.session.session_id
    assert run.transcript_path.name == f"{run.session.session_id}.jsonl"
    assert header["agent"] == "tester"
    assert header["agent_path"] == str(spec.path)
    assert header["agent_sha256"] == hashlib.sha256(spec.path.read_bytes()).hexdigest()
    assert header["runner_version"] == runner.__version__
    assert header["model"] == "scripted"
    assert header["git"] is None
    started = dt.datetime.fromisoformat(header["started_at"])
    assert abs((dt.datetime.now(dt.UTC) - started).total_seconds()) < 60


async def test_header_records_the_git_commit_and_whether_the_file_is_dirty(agent, drive, tmp_path):
    spec = agent(tools=TOOLS)
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", spec.path.name)
    git(tmp_path, "commit", "-q", "-m", "agent")
    head = git(tmp_path, "rev-parse", "HEAD")
    clean = await drive(spec, [text("hi")], "hello")
    assert clean.records()[0]["git"] == {"commit": head, "dirty": False}

    with spec.path.open("a", encoding="utf-8") as file:
        file.write("# an edit\n")
    dirty = await drive(spec, [text("hi")], "hello")
    header = dirty.records()[0]
    assert header["git"] == {"commit": head, "dirty": True}
    assert header["agent_sha256"] == hashlib.sha256(spec.path.read_bytes()).hexdigest()


async def test_every_record_has_a_time_and_matches_the_transcript_schema(agent, drive):
    body = "limits:\n  max_steps: 2\nhooks:\n  turn_pre:\n    - command: exit 1\n"
    spec = agent(body, tools=TOOLS)
    script = [tool_call("fail"), tool_call("add", a=1, b=2), text("unused")]
    run = await drive(spec, script, "go")
    records = run.records()
    validator = Draft202012Validator(load_schema("transcript"))
    for record in records:
        errors = [e.message for e in validator.iter_errors(record)]
        assert not errors, f"{record}: {errors}"
    for record in records[1:]:
        assert dt.datetime.fromisoformat(record["time"]).tzinfo is not None
    kinds = {(r["type"], r.get("event") or r.get("role")) for r in records[1:]}
    assert {("message", "user"), ("message", "assistant"), ("message", "tool")} <= kinds
    assert {("event", "hook"), ("event", "limit")} <= kinds
    tool = next(r for r in records if r.get("role") == "tool")
    assert tool["name"] == "fail" and tool["is_error"] is True and tool["duration_s"] >= 0
    assistant = next(r for r in records if r.get("role") == "assistant")
    assert assistant["usage"] == {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}


@pytest.mark.parametrize("secret", ["sk-live-4f9a2c7e", 'pa"ss\\word-1234'], ids=["plain", "quote-backslash"])
async def test_secrets_never_reach_the_transcript(agent, drive, secret):
    body = """
    model:
      id: scripted/x
      api_key: ${MY_API_KEY}
    vars:
      key: ${MY_API_KEY}
    prompts:
      system: "Use the key {{ key }} carefully."
    """
    spec = agent(body, tools=TOOLS, env={"MY_API_KEY": secret})
    assert secret in spec.secrets
    script = [tool_call("show_vars"), text(f"the key is {secret}")]
    run = await drive(spec, script, f"my key is {secret}")
    assert secret in run.requests[0].messages[0]["content"]  # the model did get it
    escaped = json.dumps(secret)[1:-1]
    assert escaped in run.tool_results()[0]["content"]  # a tool output (JSON) carries it too
    saved = run.transcript_path.read_text(encoding="utf-8")
    twice = json.dumps(escaped)[1:-1]
    for form in {secret, escaped, twice}:
        assert form not in saved
    assert "***" in saved


# ----------------------------------------------------------------------------- session commands


async def test_undo_drops_the_last_turn_from_the_history_and_the_transcript(agent, drive):
    spec = agent(tools=TOOLS)
    outcome = {}

    async def undo_then_ask(session):
        outcome["removed"] = session.undo()
        await session.run(["third"])

    script = [text("one"), tool_call("add", a=1, b=1), text("two"), text("three")]
    run = await drive(spec, script, "first", "second", during=undo_then_ask)
    assert outcome["removed"] == 4
    assert [m["content"] for m in run.requests[-1].messages] == ["first", "one", "third"]
    assert run.transcript().messages() == run.history
    assert [e["event"] for e in run.transcript_events()].count("undo") == 1


async def test_undo_survives_resume(agent, drive):
    spec = agent("prompts:\n  system: Be brief.\n", tools=TOOLS)

    async def undo(session):
        session.undo()

    first = await drive(spec, [text("one"), text("two")], "first", "second", during=undo)
    resumed = await drive(spec, [text("three")], "third", resume=first.transcript())
    assert [m["content"] for m in resumed.requests[0].messages] == ["Be brief.", "first", "one", "third"]


async def test_set_variables_renders_the_system_prompt_again(agent, drive):
    spec = agent("prompts:\n  system: 'Units: {{ units }}.'\nvars:\n  units: metric\n", tools=TOOLS)

    async def switch(session):
        session.set_variables({"units": "imperial"})
        await session.run(["and now?"])

    run = await drive(spec, [text("metric"), text("imperial")], "units?", during=switch)
    assert run.requests[0].messages[0]["content"] == "Units: metric."
    assert run.requests[1].messages[0]["content"] == "Units: imperial."
    [event] = run.transcript_events("vars")
    assert event["data"]["names"] == ["units"]


async def test_set_variables_reaches_the_tools(agent, drive):
    spec = agent("vars:\n  units: metric\n", tools=TOOLS)

    async def switch(session):
        session.set_variables({"units": "imperial"})
        await session.run(["and now?"])

    script = [tool_call("show_vars"), text("metric"), tool_call("show_vars"), text("imperial")]
    run = await drive(spec, script, "units?", during=switch)
    first, second = (json.loads(m["content"]) for m in run.tool_results())
    assert first["units"] == "metric"
    assert second["units"] == "imperial"


async def test_set_model_sends_the_next_step_to_the_new_model(agent, drive):
    spec = agent(tools=TOOLS)
    other = ScriptedModel([text("from the other model")], name="other")

    async def switch(session):
        await session.switch_model(other)
        outputs.append((await session.run(["again"])).output)

    outputs = []
    run = await drive(spec, [text("from the first model")], "hello", during=switch)
    assert len(run.requests) == 1
    [request] = other.requests
    assert request.model == "other"
    assert [m["content"] for m in request.messages] == ["hello", "from the first model", "again"]
    assert [run.result.output, *outputs] == ["from the first model", "from the other model"]
    [event] = run.transcript_events("model")
    assert event["data"]["model"] == "other"


async def test_provenance_is_computed_off_the_loop_once_per_runtime(agent, home, monkeypatch):
    """runner serve opens a session per request on one runtime: git runs once, on a worker thread."""
    import threading

    from runner.runtime import RuntimeSettings, runtime
    from runner.session import Session, open_runtime

    calls: list[str] = []
    real = runtime.git_state

    def counting(path):
        calls.append(threading.current_thread().name)
        return real(path)

    monkeypatch.setattr(runtime, "git_state", counting)
    spec = agent(tools=TOOLS)
    settings = RuntimeSettings(home=home)
    shared = await open_runtime(spec, settings, model=ScriptedModel([text("hi")] * 3))
    ids = []
    for _ in range(3):
        async with Session(shared) as session:
            await session.run(["hello"])
            ids.append(session.session_id)
    await shared.aclose()
    assert len(calls) == 1
    assert calls[0].startswith("runner-tool-")
    with spec.path.open("a", encoding="utf-8") as file:
        file.write("# an edit\n")
    edited = await open_runtime(spec, settings, model=ScriptedModel([]))
    await edited.aclose()
    assert len(calls) == 2
    assert edited.provenance.sha256 == hashlib.sha256(spec.path.read_bytes()).hexdigest()
    for session_id in ids:
        header = json.loads((home / "sessions" / f"{session_id}.jsonl").read_text().splitlines()[0])
        assert header["agent_sha256"] == shared.provenance.sha256


async def test_a_new_commit_shows_in_the_next_sessions_header_without_touching_the_agent(
    agent, drive, tmp_path
):
    spec = agent(tools=TOOLS)
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", spec.path.name)
    git(tmp_path, "commit", "-q", "-m", "agent")
    first = await drive(spec, [text("hi")], "hello")
    assert first.records()[0]["git"]["commit"] == git(tmp_path, "rev-parse", "HEAD")
    (tmp_path / "other.txt").write_text("x", encoding="utf-8")
    git(tmp_path, "add", "other.txt")
    git(tmp_path, "commit", "-q", "-m", "other")
    second = await drive(spec, [text("hi")], "hello")
    head = git(tmp_path, "rev-parse", "HEAD")
    assert second.records()[0]["git"] == {"commit": head, "dirty": False}


def test_a_restored_history_is_written_whole_and_valid(tmp_path: Path) -> None:
    from runner.session.conversation import Conversation
    from runner.store.transcript import TranscriptWriter

    path = tmp_path / "restored.jsonl"
    conversation = Conversation(TranscriptWriter(path))
    history = [
        {"role": "user", "content": "broken \ud800 text"},
        {"role": "assistant", "content": None, "tool_calls": [_call("c1", "lookup")]},
        {"role": "tool", "tool_call_id": "c1", "content": "found"},
    ]
    conversation.restore(history, record=True, names={"c1": "lookup"})
    conversation.transcript.close()  # type: ignore[union-attr]
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert [r["role"] for r in records] == ["user", "assistant", "tool"]
    assert records[0]["content"] == conversation.history[0]["content"] == "broken \ufffd text"
    assert records[2]["name"] == "lookup" and len({r["time"] for r in records}) == 1


def _call(call_id: str, name: str) -> dict[str, object]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


def _restored_records(path: Path) -> list[dict[str, object]]:
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return [{k: v for k, v in r.items() if k != "time"} for r in records]


HISTORY: list[dict[str, object]] = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "add"},
    {"role": "assistant", "content": None, "tool_calls": [_call("c1", "add"), _call("c2", "mul")]},
    {"role": "tool", "tool_call_id": "c1", "content": "2"},
    {"role": "assistant", "content": "[runner] a note, not a turn"},
    {"role": "user", "content": "[runner] stopped"},
    {"role": "user", "content": "again"},
    {"role": "assistant", "content": None, "tool_calls": [_call("c3", "add")]},
]


def test_a_part_restored_into_two_conversations_is_what_restoring_the_messages_gives(
    tmp_path: Path,
) -> None:
    from runner.session.conversation import Conversation, joined, restored_part
    from runner.store.transcript import TranscriptWriter

    names = {"c1": "add"}
    part = joined([restored_part(HISTORY[:4], names), restored_part(HISTORY[4:], names)])
    made = []
    for name in ("one", "two"):
        conversation = Conversation(TranscriptWriter(tmp_path / f"{name}.jsonl"))
        conversation.restore_parts([part], first_input="add")
        conversation.transcript.close()  # type: ignore[union-attr]
        made.append(conversation)
    whole = Conversation(TranscriptWriter(tmp_path / "whole.jsonl"))
    whole.restore([dict(m) for m in HISTORY], first_input="add", names=names, record=True)
    whole.transcript.close()  # type: ignore[union-attr]
    walked = Conversation()  # counted and answered message by message, as a resume does
    walked.restore([dict(m) for m in HISTORY], first_input="add")
    expected = _restored_records(tmp_path / "whole.jsonl")
    assert _restored_records(tmp_path / "one.jsonl") == _restored_records(tmp_path / "two.jsonl") == expected
    assert [r.get("content") for r in expected[-2:]] == [UNFINISHED_TEXT] * 2  # c2 and c3
    for conversation in (*made, whole):
        assert conversation.history == walked.history
        assert (
            (conversation.chars, conversation.names, conversation.turn)
            == (
                walked.chars,
                walked.names,
                walked.turn,
            )
            == (walked.chars, {"c1": "add", "c2": "mul", "c3": "add"}, 2)
        )
    made[0].history[1]["content"] = "changed by the session"
    assert part.messages[1]["content"] == "add" and made[1].history[1]["content"] == "add"


UNFINISHED_TEXT = "Not executed: the runner stopped before this call finished."


def test_a_shared_part_is_encoded_once_where_the_request_has_it() -> None:
    from runner.session.conversation import Conversation, restored_part, shared

    lead = restored_part([{"role": "system", "content": "instructions"}], {})
    turns = [{"role": "user", "content": f"turn {n}"} for n in range(16)]
    base = shared(restored_part([*HISTORY[1:4], *turns], {"c1": "add"}))
    rest = restored_part([{"role": "user", "content": "more"}], {})
    conversation = Conversation()
    conversation.restore_parts([lead, base, rest], first_input="add")
    run = conversation.encoded_run()
    assert run is not None and run.start == 1 and run.holds(conversation.messages())
    assert json.loads(f"[{run.text}]") == conversation.messages()[1:20] == [*HISTORY[1:4], *turns]
    conversation.set_system({"role": "system", "content": "the agent's prompt"})
    run = conversation.encoded_run()
    assert run is not None and run.start == 2 and run.holds(conversation.messages({"role": "user"}))
    conversation.history[2] = {**conversation.history[2], "content": "compressed"}  # as compress does
    assert not run.holds(conversation.messages())
    plain = Conversation()
    plain.restore_parts([restored_part([*HISTORY[1:4], *turns], {})])
    assert plain.encoded_run() is None  # a part made for one request is not encoded ahead
    short = Conversation()
    short.restore_parts([shared(restored_part(HISTORY[1:4], {}))])
    assert short.encoded_run() is None  # a few messages: encoded with the rest


def test_a_joined_part_is_encoded_from_its_parts() -> None:
    from runner.session.conversation import joined, restored_part

    older, newer = restored_part(HISTORY[:4], {}), restored_part(HISTORY[4:], {})
    older_wire = older.wire  # encoded by the request that restored it
    both = joined([older, restored_part([], {}), newer])
    assert both.wire == json.dumps(HISTORY, ensure_ascii=False, separators=(",", ":"))[1:-1]
    assert older_wire in both.wire and "_wire_from" not in both.__dict__  # the parts let go
