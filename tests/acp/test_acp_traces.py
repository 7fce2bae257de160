"""``runner acp --otel``: a W3C ``traceparent`` in a ``session/prompt``'s ``_meta`` parents the turn's
spans (a real OTLP receiver on 127.0.0.1); without one, the turn is a trace of its own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from acp import text_block

from runner.testing import ScriptedServer
from tests.acp.editor import editor, scripted_server, write_agent
from tests.telemetry.receiver import Receiver, otlp_receiver

TRACE = "0af7651916cd43dd8448eb211c80319c"
PARENT = "b7ad6b7169203331"


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[Receiver]:
    with otlp_receiver() as received:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", received.url)  # the editor's environment
        yield received


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with scripted_server() as srv:
        yield srv


async def test_a_traceparent_in_a_prompts_meta_parents_the_turn(
    tmp_path: Path, server: ScriptedServer, receiver: Receiver
) -> None:
    path = write_agent(tmp_path / "agents", server.base_url)
    async with editor(tmp_path, path, args=("--otel",)) as agent:
        session = await agent.new_session()
        traced = await agent.conn.prompt(
            session_id=session, prompt=[text_block("hello there")], traceparent=f"00-{TRACE}-{PARENT}-01"
        )
        plain = await agent.conn.prompt(session_id=session, prompt=[text_block("hello again")])
        assert (traced.stop_reason, plain.stop_reason) == ("end_turn", "end_turn")
    assert receiver.got.wait(15), "no spans reached the receiver"
    turns = [s for s in receiver.spans if s.name.startswith("invoke_agent ")]
    assert len(turns) == 2, receiver.names()
    (continued,) = [s for s in turns if s.trace_id == TRACE]
    assert continued.parent_span_id == PARENT
    (own,) = [s for s in turns if s.trace_id != TRACE]
    assert own.parent_span_id == ""  # a root: the second prompt named no trace
    chats = [s for s in receiver.spans if s.name.startswith("chat ") and s.trace_id == TRACE]
    assert chats and {s.parent_span_id for s in chats} == {continued.span_id}
