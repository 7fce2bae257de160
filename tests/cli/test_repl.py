"""The REPL changes its session only from the session's own thread (the one running its turns)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runner.agentfile import load_agent
from runner.cli.interactive import Repl
from runner.cli.output import JsonOutput
from runner.cli.run import RunRequest, SessionThread, run_inputs
from runner.runtime import RuntimeSettings
from runner.session import RunOptions, Session
from runner.testing import ScriptedServer


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer([{"content": "one"}, {"content": "two"}, {"content": "three"}]) as srv:
        yield srv


def lines(*items: Any) -> Any:
    feed = iter(items)

    def read(prompt: str) -> str:
        item = next(feed, EOFError)
        if isinstance(item, type) and issubclass(item, BaseException):
            raise item
        return str(item)

    return read


def test_repl_commands_run_on_the_session_thread(
    server: ScriptedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "agent.yaml").write_text(
        f"version: 1\nname: chat\nmodel:\n  id: openai/scripted\n  api_base: {server.base_url}\n"
        "prompts:\n  system: 'Mood: {{ mood }}.'\nvars:\n  mood: calm\n"
    )
    threads: dict[str, str] = {}
    for name in ("undo", "set_variables", "clear_queue", "run", "switch_model"):
        real = getattr(Session, name)

        def spy(self: Any, *args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
            threads[_name] = threading.current_thread().name
            return _real(self, *args, **kwargs)

        monkeypatch.setattr(Session, name, spy)
    request = RunRequest(
        config=load_agent(tmp_path / "agent.yaml"),
        interactive=True,
        options=RunOptions(),
        settings=RuntimeSettings(home=tmp_path / "home"),
    )
    output = JsonOutput(stdout=open(tmp_path / "out.jsonl", "w"))  # noqa: SIM115
    worker = SessionThread()
    lifetime = worker.start(request, output)
    written: list[str] = []
    try:
        run_inputs(worker, [])
        repl = Repl(
            worker,
            output,
            read=lines("hi", "/undo", "/vars mood=tense", KeyboardInterrupt, "/model openai/other", "again"),
            write=written.append,
        )
        repl.loop()
    finally:
        worker.stop(lifetime)
        output.out.close()
    assert threads == dict.fromkeys(
        ("undo", "set_variables", "clear_queue", "run", "switch_model"), "runner-session"
    )
    # issue 23 item 21: the chat began without a word
    assert (
        written[0] == "chatting with chat (openai/scripted): /help lists the commands, /exit or Ctrl+D leaves"
    )
    assert "dropped 2 messages" in written
    assert any(line.startswith("^C (cleared 0 queued messages") for line in written)
    _, second = server.requests
    assert second["model"] == "other"
    assert second["messages"][0] == {"role": "system", "content": "Mood: tense."}
    assert [m["content"] for m in second["messages"][1:]] == ["again"]
