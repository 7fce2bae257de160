"""Test helpers for agents built on the runner: a scripted model and a scripted OpenAI-compatible server.

``ScriptedModel`` answers in process, step by step, and records every ``Request``::

    from runner.testing import ScriptedModel, text, tool_call

    model = ScriptedModel([tool_call("weather", city="Paris"), text("Sunny in Paris.")])
    ...  # run the agent with it
    assert model.requests[1].messages[-1]["role"] == "tool"
    model.assert_complete()

``ScriptedServer`` speaks the chat-completions wire format (streamed as real SSE chunks, with
tool-call arguments split over several chunks) from a background thread, so the real litellm and
httpx paths run against it. As a pytest fixture::

    @pytest.fixture
    def server():
        with ScriptedServer([{"content": "Hello!"}]) as srv:
            yield srv                         # srv.base_url == "http://127.0.0.1:<port>/v1"

By hand: ``python -m runner.testing serve script.yaml [--port 8000]`` prints the base URL and serves
until Ctrl+C. Only the standard library is used, so this module imports with the core dependencies.
"""

from __future__ import annotations

from runner.testing.model import ScriptedModel, text, tool_call, tool_calls
from runner.testing.server import ScriptedServer, main

__all__ = ["ScriptedModel", "ScriptedServer", "main", "text", "tool_call", "tool_calls"]
