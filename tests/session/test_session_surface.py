"""A session's state is read through properties: doors read it, only the session changes it."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.agentfile import load_agent
from runner.runtime import RuntimeSettings
from runner.session import Session, open_runtime
from runner.testing import ScriptedModel, text

READ_ONLY = (
    "runtime",
    "host",
    "options",
    "session_id",
    "variables",
    "limits",
    "budget",
    "confirmation",
    "hooks",
    "calls",
    "ended",
    "conversation",
    "output_plan",
    "tool_context",
    "stream",
    "request_params",
    "client_tools",
    "client_names",
)


@pytest.mark.parametrize("name", READ_ONLY)
def test_a_sessions_state_cannot_be_replaced_from_outside(name: str) -> None:
    assert isinstance(getattr(Session, name), property), name
    assert getattr(Session, name).fset is None, name


async def test_the_properties_read_the_running_sessions_state(tmp_path: Path) -> None:
    (tmp_path / "solo.yaml").write_text(
        "version: 1\nname: solo\nmodel: openai/any\nprompts: {system: Answer.}\n", encoding="utf-8"
    )
    config = load_agent(tmp_path / "solo.yaml")
    runtime = await open_runtime(config, RuntimeSettings(home=tmp_path, write_transcript=False))
    try:
        async with Session(runtime, model=ScriptedModel([text("hi")]), session_id="s-1") as session:
            with pytest.raises(AttributeError):
                session.session_id = "other"  # type: ignore[misc]
            await session.run(["hello"])
            assert session.session_id == "s-1" and session.runtime is runtime
            assert session.calls == [] and session.limits is session.budget.limits
            assert [m["role"] for m in session.conversation.history] == ["user", "assistant"]
    finally:
        await runtime.aclose()
