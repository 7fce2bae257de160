"""A chat span names the provider's answer (``gen_ai.response.id``) and its cached prompt tokens.

Both model paths (the httpx fast path and litellm), streamed and not, against the scripted
OpenAI-compatible server on 127.0.0.1, as a tracing backend sees the spans (the in-memory exporter).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from runner.agentfile import load_agent
from runner.runtime import RuntimeSettings
from runner.session.options import RunOptions
from runner.testing import ScriptedServer
from runner.testing.run import _on_server, scripted_session
from tests.telemetry.helpers import Traces, write_agent

USAGE = {
    "prompt_tokens": 120,
    "completion_tokens": 7,
    "total_tokens": 127,
    "prompt_tokens_details": {"cached_tokens": 96},
}
PATHS = [pytest.param(True, id="fast-path"), pytest.param(False, id="litellm")]
STREAMS = [pytest.param(True, id="streamed"), pytest.param(False, id="whole")]


async def _run(path: Path, server: ScriptedServer, *, fast_path: bool, stream: bool) -> str:
    config = _on_server(load_agent(path), server)
    settings = RuntimeSettings(write_transcript=False, fast_path=fast_path)
    async with scripted_session(config, settings=settings, options=RunOptions(stream=stream)) as session:
        result = await session.run(["Hello?"])
    return str(result.output)


@pytest.mark.parametrize("stream", STREAMS)
@pytest.mark.parametrize("fast_path", PATHS)
async def test_the_chat_span_has_the_response_id_and_the_cached_tokens(
    tmp_path: Path,
    traces: Traces,
    scripted_server: Callable[..., ScriptedServer],
    fast_path: bool,
    stream: bool,
) -> None:
    server = scripted_server([{"content": "Hi there.", "usage": USAGE, "response_id": "chatcmpl-abc123"}])
    path = write_agent(tmp_path, "")
    assert await _run(path, server, fast_path=fast_path, stream=stream) == "Hi there."
    server.assert_complete()
    (chat,) = [s for s in traces.spans if s.name.startswith("chat ")]
    a = chat.attributes
    assert a["gen_ai.response.id"] == "chatcmpl-abc123"
    assert a["gen_ai.usage.input_tokens"] == 120
    assert a["gen_ai.usage.output_tokens"] == 7
    assert a["gen_ai.usage.cache_read.input_tokens"] == 96
    assert a["gen_ai.request.stream"] is stream


@pytest.mark.parametrize("fast_path", PATHS)
async def test_without_cached_tokens_the_span_has_no_cache_read_attribute(
    tmp_path: Path, traces: Traces, scripted_server: Callable[..., ScriptedServer], fast_path: bool
) -> None:
    usage = {"prompt_tokens": 10, "completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": 0}}
    server = scripted_server([{"content": "Hi.", "usage": usage}])
    path = write_agent(tmp_path, "")
    await _run(path, server, fast_path=fast_path, stream=True)
    (chat,) = [s for s in traces.spans if s.name.startswith("chat ")]
    assert "gen_ai.usage.cache_read.input_tokens" not in chat.attributes
    assert chat.attributes["gen_ai.response.id"] == "chatcmpl-scripted"
