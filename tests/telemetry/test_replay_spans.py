"""A replayed run's ``chat`` spans carry what the recording's did: the response id, model, usage.

Recorded from the scripted OpenAI-compatible server on 127.0.0.1 (both model paths, streamed and
not), then replayed from the cassette with no network, as a tracing backend sees both runs (the
in-memory exporter). A cassette from before response ids were kept gives spans without one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runner.agentfile import load_agent
from runner.runtime import RuntimeSettings
from runner.session.options import RunOptions
from runner.testing import ScriptedServer
from runner.testing.run import _on_server, scripted_session
from tests.telemetry.helpers import Traces, write_agent

CACHED = {"prompt_tokens": 120, "completion_tokens": 7, "prompt_tokens_details": {"cached_tokens": 96}}
SCRIPT = [
    {
        "tool_calls": [{"name": "no_such_tool", "arguments": {}}],
        "usage": CACHED,
        "response_id": "chatcmpl-one",
    },
    {"content": "Hello there.", "response_id": "chatcmpl-two"},
]
PATHS = [pytest.param(True, id="fast-path"), pytest.param(False, id="litellm")]
STREAMS = [pytest.param(True, id="streamed"), pytest.param(False, id="whole")]
KEYS = (
    "gen_ai.response.id",
    "gen_ai.response.model",
    "gen_ai.request.model",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.cache_read.input_tokens",
    "gen_ai.response.finish_reasons",
)


async def _run(config: Any, settings: RuntimeSettings, *, stream: bool) -> str:
    async with scripted_session(config, settings=settings, options=RunOptions(stream=stream)) as session:
        result = await session.run(["Hello?"])
    return str(result.output)


def _chats(traces: Traces) -> list[dict[str, Any]]:
    """The chat spans' attributes, in the order the calls started; the exporter emptied."""
    spans = sorted((s for s in traces.spans if s.name.startswith("chat ")), key=lambda s: s.start_time or 0)
    traces.exporter.clear()
    return [{key: s.attributes.get(key) for key in KEYS} for s in spans]


@pytest.mark.parametrize("stream", STREAMS)
@pytest.mark.parametrize("fast_path", PATHS)
async def test_a_replayed_chat_span_has_the_recorded_response_id(
    tmp_path: Path, traces: Traces, fast_path: bool, stream: bool
) -> None:
    cassette = tmp_path / "tester.cassette.jsonl"
    with ScriptedServer(SCRIPT) as server:
        config = _on_server(load_agent(write_agent(tmp_path, "")), server)
        recording = RuntimeSettings(write_transcript=False, record=cassette, fast_path=fast_path)
        assert await _run(config, recording, stream=stream) == "Hello there."
        live = _chats(traces)
        replaying = RuntimeSettings(write_transcript=False, replay=cassette, fast_path=fast_path)
        assert await _run(config, replaying, stream=stream) == "Hello there."
        assert len(server.requests) == 2  # the replay asked no one
    replayed = _chats(traces)
    assert [chat["gen_ai.response.id"] for chat in live] == ["chatcmpl-one", "chatcmpl-two"]
    assert live[0]["gen_ai.usage.cache_read.input_tokens"] == 96
    assert replayed == live


async def test_a_cassette_without_response_ids_gives_spans_without_one(
    tmp_path: Path, traces: Traces
) -> None:
    cassette = tmp_path / "tester.cassette.jsonl"
    with ScriptedServer([{"content": "Hi."}]) as server:
        config = _on_server(load_agent(write_agent(tmp_path, "")), server)
        await _run(config, RuntimeSettings(write_transcript=False, record=cassette), stream=True)
    _chats(traces)
    header, line = cassette.read_text(encoding="utf-8").splitlines()
    old = line.replace('"response_id": "chatcmpl-scripted"', '"response_id": null')
    assert old != line  # the recording had the id; the cassette now reads as one from before ids
    cassette.write_text(header + "\n" + old + "\n", encoding="utf-8")
    assert await _run(config, RuntimeSettings(write_transcript=False, replay=cassette), stream=True) == "Hi."
    (replayed,) = _chats(traces)
    assert replayed["gen_ai.response.id"] is None  # none was recorded: none is made up
