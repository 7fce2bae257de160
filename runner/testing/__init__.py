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
until Ctrl+C (``runner.testing.server.main``, not a name of this package). The model and the server
use only the standard library.

``run_agent`` / ``run_agent_sync`` run an agent file against either in one call (``runner.testing.run``),
and ``scripted_session`` opens a runtime and a session for tests that drive it themselves. The pytest
plugin (``runner.testing.pytest_plugin``, registered as an entry point) gives the fixtures
``scripted_model``, ``scripted_server``, ``run_agent_sync``, ``run_agent`` (async) and
``no_network``, and the ``no_network`` marker; nothing runs in a test that does not ask for it.

Module map: ``model`` (ScriptedModel and the reply helpers), ``server`` (ScriptedServer and the
command line), ``run`` (one-call runs), ``pytest_plugin`` (fixtures).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from runner.testing.model import ScriptedModel, text, tool_call, tool_calls
from runner.testing.server import ScriptedServer

if TYPE_CHECKING:
    from runner.testing.run import ScriptedRun, run_agent, run_agent_sync, scripted_session

__all__ = [
    "ScriptedModel",
    "ScriptedRun",
    "ScriptedServer",
    "run_agent",
    "run_agent_sync",
    "scripted_session",
    "text",
    "tool_call",
    "tool_calls",
]

_RUN = frozenset({"ScriptedRun", "run_agent", "run_agent_sync", "scripted_session"})


def __getattr__(name: str) -> Any:
    if name in _RUN:  # imported on first use: the session layer is not needed to serve a script
        from runner.testing import run

        return getattr(run, name)
    raise AttributeError(f"module 'runner.testing' has no attribute {name!r}")
