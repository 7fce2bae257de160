"""A client that goes away cancels its run: the running tool is cancelled and the session is closed."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from runner.store.transcript import read_transcript, sessions_dir

SLOW_TOOLS = '''
import asyncio
import pathlib

MARKS = pathlib.Path(r"{marks}")


async def slow() -> str:
    """Wait for a long time."""
    (MARKS / "started").write_text("1")
    try:
        await asyncio.sleep(30)
    except asyncio.CancelledError:
        (MARKS / "cancelled").write_text("1")
        raise
    return "finished"
'''

END_HOOK = """
import pathlib

MARKS = pathlib.Path(r"{marks}")


def ended(event):
    (MARKS / "session_end").write_text(event.session_id)
"""


def wait_for(condition: Callable[[], bool], *, timeout: float = 10.0, what: str = "") -> None:
    """Poll ``condition`` until it holds (bounded)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


@pytest.fixture
def slow_agent(
    tmp_path: Path, scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any]
) -> tuple[Any, Path, Any]:
    marks = tmp_path / "marks"
    marks.mkdir()
    hooks = f"serve_hooks_{uuid.uuid4().hex[:10]}"
    (agent_files.root / f"{hooks}.py").write_text(END_HOOK.format(marks=marks), encoding="utf-8")
    server = scripted([{"content": "Waiting.", "tool_calls": [{"name": "slow", "arguments": {}}]}])
    agent_files.write(
        "sleeper",
        server,
        f"hooks:\n  session_end:\n    - python: {hooks}:ended",
        tools=SLOW_TOOLS.format(marks=marks),
    )
    return serve_app([agent_files.root]), marks, server


def _assert_cancelled(served: Any, marks: Path, home: Path) -> None:
    wait_for(lambda: (marks / "cancelled").exists(), what="the tool to see its cancellation")
    wait_for(lambda: (marks / "session_end").exists(), what="the session to close")
    wait_for(lambda: served.runs() == 0, what="the run to end")
    (path,) = sessions_dir(home).glob("*.jsonl")
    results = [m for m in read_transcript(path).messages() if m["role"] == "tool"]
    assert len(results) == 1 and "cancelled" in results[0]["content"]
    assert not (marks / "finished").exists()


def test_client_leaving_mid_stream_cancels_the_tool_and_closes_the_session(
    slow_agent: tuple[Any, Path, Any], home: Path, recorder: Any
) -> None:
    served, marks, server = slow_agent
    recorder.allow_partial = True
    with served.http() as http:
        body = {"model": "sleeper", "messages": [{"role": "user", "content": "wait"}], "stream": True}
        with http.stream("POST", "/v1/chat/completions", json=body) as response:
            assert response.status_code == 200
            chunks = response.iter_raw()  # kept: dropping it would close the connection now
            assert b'"role":"assistant"' in next(chunks)  # the role chunk: the stream is open
            wait_for(lambda: (marks / "started").exists(), what="the tool to start")
            assert served.runs() == 1
    _assert_cancelled(served, marks, home)
    server.assert_complete()


def test_client_giving_up_on_a_whole_answer_cancels_the_run(
    slow_agent: tuple[Any, Path, Any], home: Path
) -> None:
    served, marks, _ = slow_agent
    with served.http() as http:
        body = {"model": "sleeper", "messages": [{"role": "user", "content": "wait"}]}
        with pytest.raises(httpx.ReadTimeout):
            http.post("/v1/chat/completions", json=body, timeout=httpx.Timeout(30, read=1.0))
    _assert_cancelled(served, marks, home)
