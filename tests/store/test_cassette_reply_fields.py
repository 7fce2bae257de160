"""Cassettes keep each reply's response id and cached prompt tokens, and replay them into the transcript.

Recorded from the scripted OpenAI-compatible server on 127.0.0.1 on both model paths (the httpx fast
path and litellm), streamed and not; replayed with no network. A cassette written before these fields
were kept (a literal below, in the old shape) replays as it did.
"""

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
from runner.session.options import RunOptions
from runner.store.cassette import CassetteError, read_cassette, request_hash
from runner.store.transcript import list_transcripts, read_transcript
from runner.testing import ScriptedServer
from runner.testing.run import _on_server, scripted_session

AGENT = "version: 1\nname: greeter\nmodel: openai/scripted\nprompts:\n  system: You greet.\n"
CACHED = {"prompt_tokens": 120, "completion_tokens": 7, "prompt_tokens_details": {"cached_tokens": 96}}
PLAIN = {"prompt_tokens": 150, "completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": 0}}
SCRIPT = [
    {
        "tool_calls": [{"name": "no_such_tool", "arguments": {}}],
        "usage": CACHED,
        "response_id": "chatcmpl-one",
    },
    {"content": "Hello there.", "usage": PLAIN, "response_id": "chatcmpl-two"},
]
PATHS = [pytest.param(True, id="fast-path"), pytest.param(False, id="litellm")]
STREAMS = [pytest.param(True, id="streamed"), pytest.param(False, id="whole")]

#: A cassette as runner wrote it before it kept ``response_id`` and ``usage.cached_tokens``.
OLD_CASSETTE = (
    '{"type": "header", "format": 1, "recorded_at": "2026-11-20T09:00:00.000Z", "agent": "greeter", '
    '"agent_path": "greeter.yaml", "agent_sha256": "' + "0" * 64 + '", "git": null, '
    '"model": "openai/scripted", "clock": "2026-11-20T10:00:00+01:00", "runner_version": "0.1.0"}\n'
    '{"type": "interaction", "index": 0, "hash": "HASH", "stream": true, "request": REQUEST, '
    '"response": {"content": "Hi from the past.", "tool_calls": [], "reasoning": null, '
    '"usage": {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25, "cost_usd": null}, '
    '"finish_reason": "stop", "model": "scripted"}, '
    '"events": [{"t": 0.01, "kind": "text", "text": "Hi from "}, {"t": 0.02, "kind": "text", '
    '"text": "the past."}]}\n'
)
OLD_REQUEST = {
    "model": "openai/scripted",
    "messages": [{"role": "system", "content": "You greet."}, {"role": "user", "content": "Hello?"}],
    "tools": [],
    "params": {},
}


def _agent(folder: Path) -> Path:
    path = folder / "greeter.yaml"
    path.write_text(AGENT, encoding="utf-8")
    return path


async def _run(config: Any, settings: RuntimeSettings, *, stream: bool = True) -> str:
    async with scripted_session(config, settings=settings, options=RunOptions(stream=stream)) as session:
        result = await session.run(["Hello?"])
    return str(result.output)


def _assistant_records(home: Path) -> list[dict[str, Any]]:
    (path,) = list_transcripts(home)
    records = read_transcript(path).records
    return [r for r in records if r.get("type") == "message" and r.get("role") == "assistant"]


def _figures(records: list[dict[str, Any]]) -> list[tuple[Any, Any]]:
    return [(r.get("response_id"), (r.get("usage") or {}).get("cached_tokens")) for r in records]


@pytest.mark.parametrize("stream", STREAMS)
@pytest.mark.parametrize("fast_path", PATHS)
async def test_a_replayed_transcript_has_the_recorded_response_ids_and_cached_tokens(
    tmp_path: Path, fast_path: bool, stream: bool
) -> None:
    cassette = tmp_path / "greeter.cassette.jsonl"
    with ScriptedServer(SCRIPT) as server:
        config = _on_server(load_agent(_agent(tmp_path)), server)
        recording = RuntimeSettings(home=tmp_path / "live", record=cassette, fast_path=fast_path)
        assert await _run(config, recording, stream=stream) == "Hello there."
        server.assert_complete()
        live = _assistant_records(tmp_path / "live")
        assert _figures(live) == [("chatcmpl-one", 96), ("chatcmpl-two", None)]

        replaying = RuntimeSettings(home=tmp_path / "replayed", replay=cassette, fast_path=fast_path)
        assert await _run(config, replaying, stream=stream) == "Hello there."
        assert len(server.requests) == 2  # the replay asked no one
    replayed = _assistant_records(tmp_path / "replayed")
    assert _figures(replayed) == _figures(live)
    assert [r["usage"] for r in replayed] == [r["usage"] for r in live]

    validator = Draft202012Validator(load_schema("cassette"))
    lines = cassette.read_text(encoding="utf-8").splitlines()
    for line in lines:
        assert list(validator.iter_errors(json.loads(line))) == []
    responses = [i.response for i in read_cassette(cassette).interactions]
    assert [(r["response_id"], r["usage"]["cached_tokens"]) for r in responses] == [
        ("chatcmpl-one", 96),
        ("chatcmpl-two", 0),
    ]


def _old_cassette(folder: Path) -> Path:
    text = OLD_CASSETTE.replace("REQUEST", json.dumps(OLD_REQUEST)).replace("HASH", request_hash(OLD_REQUEST))
    path = folder / "old.jsonl"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("stream", STREAMS)
async def test_a_cassette_in_the_old_shape_replays_unchanged(tmp_path: Path, stream: bool) -> None:
    cassette = _old_cassette(tmp_path)
    config = load_agent(_agent(tmp_path))
    settings = RuntimeSettings(home=tmp_path / "home", replay=cassette)
    assert await _run(config, settings, stream=stream) == "Hi from the past."
    (record,) = _assistant_records(tmp_path / "home")
    assert "response_id" not in record  # none was recorded: none is made up
    assert record["usage"] == {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25}


def test_runner_run_replays_an_old_cassette(tmp_path: Path) -> None:
    cassette = _old_cassette(tmp_path)
    agent = _agent(tmp_path)
    result = CliRunner().invoke(
        app,
        ["run", str(agent), "-p", "Hello?", "--replay", str(cassette)],
        env={"RUNNER_HOME": str(tmp_path / "h")},
    )
    assert result.exit_code == 0, result.output
    assert "Hi from the past." in result.output


def _spoil(cassette: Path, field: str, value: Any) -> None:
    header, line = cassette.read_text(encoding="utf-8").splitlines()
    interaction = json.loads(line)
    if field == "cached_tokens":
        interaction["response"]["usage"][field] = value
    else:
        interaction["response"][field] = value
    cassette.write_text(header + "\n" + json.dumps(interaction) + "\n", encoding="utf-8")


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("cached_tokens", "many", "usage.cached_tokens must be a whole number of at least 0, not 'many'"),
        ("cached_tokens", -3, "usage.cached_tokens must be a whole number of at least 0, not -3"),
        ("response_id", 42, "response_id must be a string or null, not 42"),
    ],
)
async def test_a_malformed_recorded_field_is_a_clear_cassette_error(
    tmp_path: Path, field: str, value: Any, message: str
) -> None:
    cassette = _old_cassette(tmp_path)
    _spoil(cassette, field, value)
    settings = RuntimeSettings(home=tmp_path / "home", replay=cassette)
    with pytest.raises(CassetteError) as caught:
        await _run(load_agent(_agent(tmp_path)), settings)
    assert f"the recorded response #1 is malformed ({message})" in caught.value.message


def test_runner_run_says_which_recorded_response_is_malformed(tmp_path: Path) -> None:
    cassette = _old_cassette(tmp_path)
    _spoil(cassette, "response_id", ["chatcmpl-x"])
    result = CliRunner().invoke(
        app,
        ["run", str(_agent(tmp_path)), "-p", "Hello?", "--replay", str(cassette)],
        env={"RUNNER_HOME": str(tmp_path / "h")},
    )
    assert result.exit_code == 1, result.output
    assert "the recorded response #1 is malformed (response_id must be a string or null" in result.output
    assert "record it again with --record" in result.output and "Traceback" not in result.output
