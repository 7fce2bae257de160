"""runner's own span events on the ``invoke_agent`` span: a limit reached in a turn, and a reload
between two runs of a session (it lands on the next run's span, the turn it applies to: nothing is
current between runs)."""

from __future__ import annotations

from pathlib import Path

from runner.testing import run_agent, tool_call
from tests.cli_run.test_sessions_provenance import two_turns_with_a_reload_between, write
from tests.telemetry.helpers import Traces, write_agent

TOOLS = """
def ping() -> str:
    return "pong"
"""

BODY = """
tools:
  - python: $TOOLS
limits:
  max_steps: 2
"""


async def test_a_limit_reached_is_an_event_on_the_agents_span(tmp_path: Path, traces: Traces) -> None:
    path = write_agent(tmp_path, BODY, TOOLS, name="looper")
    run = await run_agent(path, "go", script=[tool_call("ping")] * 5)
    assert run.result is not None and run.result.turns[-1].reason == "max_steps"
    span = traces.one("invoke_agent looper")
    (limit,) = [e for e in span.events if e.name == "runner.limit"]
    assert limit.attributes is not None and limit.attributes["runner.reason"] == "max_steps"
    assert "max_steps" in str(limit.attributes["runner.note"])


async def test_a_reload_between_runs_is_an_event_on_the_next_runs_span(
    tmp_path: Path, traces: Traces
) -> None:
    await two_turns_with_a_reload_between(write(tmp_path / "a"), tmp_path / "home")
    first, second = sorted(traces.named("invoke_agent calc"), key=lambda s: s.start_time or 0)
    assert not [e for e in first.events if e.name == "runner.reload"]
    (reload,) = [e for e in second.events if e.name == "runner.reload"]
    assert reload.attributes is not None and reload.attributes["runner.applies"] == "next turn"
    changes = reload.attributes["runner.changes"]
    assert isinstance(changes, str) and "prompt" in changes, changes  # the system prompt changed
