"""A served workflow's life: a client that goes away stops it, its requests share one pool of agent
runtimes (and run at once on it), and the pool closes when the server stops (issue 17)."""

from __future__ import annotations

import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from runner.store.transcript import read_transcript
from runner.testing import ScriptedServer
from tests.workflow.helpers import Models, events, user_text

FAKE_MCP = Path(__file__).resolve().parent.parent / "tools_mcp" / "fake_mcp_server.py"

SLOW_TOOLS = '''
import asyncio
import pathlib
import uuid

MARKS = pathlib.Path(r"{marks}")


async def slow() -> str:
    """Wait for a long time."""
    mark = uuid.uuid4().hex
    (MARKS / f"started-{{mark}}").write_text("1")
    try:
        await asyncio.sleep(30)
    except asyncio.CancelledError:
        (MARKS / f"cancelled-{{mark}}").write_text("1")
        raise
    return "finished"
'''

END_HOOK = """
import pathlib

MARKS = pathlib.Path(r"{marks}")


def ended(event):
    (MARKS / f"ended-{{event.session_id}}").write_text("1")
"""

SLOW_TEAM = """version: 1
agents:
  sleeper:
    model: {{id: openai/sleeper, api_base: '{base}', retries: 0}}
    tools:
      - python: {tools}
    hooks:
      session_end:
        - python: {hooks}:ended
  never:
    model: {{id: openai/never, api_base: '{base}', retries: 0}}
workflow:
  name: waiting
  steps:
    - id: both
      parallel:
        - {{id: left, agent: sleeper}}
        - {{id: right, agent: sleeper}}
    - {{id: after, agent: never}}
"""


def wait_for(condition: Callable[[], bool], *, timeout: float = 15.0, what: str = "") -> None:
    """Poll ``condition`` until it holds (bounded)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def marks_of(marks: Path, kind: str) -> list[Path]:
    return sorted(marks.glob(f"{kind}-*"))


@pytest.fixture
def waiting(
    tmp_path: Path, scripted: Callable[..., ScriptedServer], agent_files: Any, serve_app: Callable[..., Any]
) -> tuple[Any, Path, ScriptedServer]:
    marks = tmp_path / "marks"
    marks.mkdir()
    tools, hooks = f"wf_tools_{uuid.uuid4().hex[:10]}", f"wf_hooks_{uuid.uuid4().hex[:10]}"
    (agent_files.root / f"{tools}.py").write_text(SLOW_TOOLS.format(marks=marks), encoding="utf-8")
    (agent_files.root / f"{hooks}.py").write_text(END_HOOK.format(marks=marks), encoding="utf-8")
    server = scripted(
        Models({"sleeper": lambda body: {"tool_calls": [{"name": "slow", "arguments": {}}]}, "never": str})
    )
    text = SLOW_TEAM.format(base=server.base_url, tools=tools, hooks=hooks)
    (agent_files.root / "team.yaml").write_text(text, encoding="utf-8")
    return serve_app([agent_files.root]), marks, server


def _assert_every_child_ended(served: Any, marks: Path, home: Path, server: ScriptedServer) -> None:
    wait_for(lambda: len(marks_of(marks, "cancelled")) == 2, what="both tools to see their cancellation")
    wait_for(lambda: len(marks_of(marks, "ended")) == 2, what="both child sessions to close")
    wait_for(lambda: served.runs() == 0, what="the run to end")
    sessions = list((home / "sessions").glob("*.jsonl"))
    (record,) = [p for p in sessions if '"workflow"' in p.read_text().split("\n")[0]]
    (end,) = events(record, "workflow_end")
    assert end["exit_code"] == 130 and end["status"] == "interrupted"
    ended = {p.name.removeprefix("ended-") for p in marks_of(marks, "ended")}
    children = {e["session_id"] for e in events(record, "step_end") if e.get("session_id")}
    assert children == ended  # the two sessions of the parallel steps, each closed
    for child in children:
        messages = read_transcript(home / "sessions" / f"{child}.jsonl").messages()
        results = [m for m in messages if m["role"] == "tool"]
        assert len(results) == 1 and results[0]["content"] == "Interrupted by the user."
    assert [r["model"] for r in server.requests] == ["sleeper", "sleeper"]  # 'after' never started
    assert not marks_of(marks, "finished")


def test_a_client_leaving_mid_stream_interrupts_every_step_and_closes_every_child_session(
    waiting: tuple[Any, Path, ScriptedServer], home: Path, recorder: Any
) -> None:
    served, marks, server = waiting
    recorder.allow_partial = True
    with served.http() as http:
        body = {"model": "waiting", "messages": [{"role": "user", "content": "wait"}], "stream": True}
        with http.stream("POST", "/v1/chat/completions", json=body) as response:
            assert response.status_code == 200
            chunks = response.iter_raw()  # kept: dropping it would close the connection now
            assert b'"role":"assistant"' in next(chunks)
            wait_for(lambda: len(marks_of(marks, "started")) == 2, what="both tools to start")
            assert served.runs() == 1
    _assert_every_child_ended(served, marks, home, server)


def test_a_client_giving_up_on_a_whole_answer_stops_the_workflow(
    waiting: tuple[Any, Path, ScriptedServer], home: Path
) -> None:
    served, marks, server = waiting
    with served.http() as http:
        body = {"model": "waiting", "messages": [{"role": "user", "content": "wait"}]}
        with pytest.raises(httpx.ReadTimeout):
            http.post("/v1/chat/completions", json=body, timeout=httpx.Timeout(30, read=1.5))
    _assert_every_child_ended(served, marks, home, server)


def test_stopping_the_server_interrupts_a_running_workflow(
    waiting: tuple[Any, Path, ScriptedServer], home: Path
) -> None:
    served, marks, server = waiting
    answers: list[Any] = []

    def ask() -> None:  # not through the recorder: a stopping server answers what it can
        with httpx.Client(base_url=served.url, timeout=30) as http:
            body = {"model": "waiting", "messages": [{"role": "user", "content": "wait"}]}
            try:
                answers.append(http.post("/v1/chat/completions", json=body))
            except httpx.HTTPError as exc:
                answers.append(exc)

    asking = threading.Thread(target=ask)
    asking.start()
    wait_for(lambda: len(marks_of(marks, "started")) == 2, what="both tools to start")
    served.stop()
    asking.join(timeout=20)
    _assert_every_child_ended(served, marks, home, server)
    assert not asking.is_alive() and len(answers) == 1
    assert isinstance(answers[0], httpx.HTTPError) or answers[0].status_code >= 400, answers


def _mcp_processes(marker: str) -> int:
    """How many fake MCP servers with ``marker`` on their command line are running (the reaper that
    starts each one is not counted)."""
    count = 0
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
            if marker.encode() in argv and not any(part.endswith(b"reaper.py") for part in argv):
                count += 1
        except OSError:
            continue
    return count


ECHO_TEAM = """version: 1
agents:
  echoer:
    model: {{id: openai/echoer, api_base: '{base}', retries: 0}}
    tools:
      - mcp: {{command: {python}, args: [{fake}, {marker}], env: {{FAKE_MCP_LOG: {log}}}}}
        id: fake
        include: [echo]
workflow:
  name: echoing
  steps:
    - {{id: one, agent: echoer}}
"""


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="counts processes through /proc")
def test_requests_share_one_pool_run_at_once_on_it_and_it_closes_when_the_server_stops(
    tmp_path: Path, scripted: Callable[..., ScriptedServer], agent_files: Any, serve_app: Callable[..., Any]
) -> None:
    log, marker = tmp_path / "initialize.log", f"--marker-{uuid.uuid4().hex}"

    def echo(body: dict[str, Any]) -> dict[str, Any]:
        if body["messages"][-1]["role"] == "user":
            return {"tool_calls": [{"name": "echo", "arguments": {"text": user_text(body)}}], "sleep_s": 1.0}
        return {"content": "echoed " + body["messages"][-1]["content"]}

    models = Models({"echoer": echo})
    server = scripted(models)
    text = ECHO_TEAM.format(
        base=server.base_url, python=sys.executable, fake=FAKE_MCP, marker=marker, log=log
    )
    (agent_files.root / "team.yaml").write_text(text, encoding="utf-8")
    served = serve_app([agent_files.root])
    client = served.openai()
    answers: list[str] = []

    def ask(text: str) -> None:
        answer = client.chat.completions.create(model="echoing", messages=[{"role": "user", "content": text}])
        answers.append(answer.choices[0].message.content or "")

    threads = [threading.Thread(target=ask, args=(text,)) for text in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    ask("c")
    assert sorted(answers) == ["echoed a", "echoed b", "echoed c"]
    assert models.most_in_flight == 2  # the two requests ran at once
    assert len(log.read_text().splitlines()) == 1  # one MCP server, one initialize, for three requests
    assert _mcp_processes(marker) == 1
    served.stop()
    wait_for(lambda: _mcp_processes(marker) == 0, what="the pool's MCP server to stop with the server")
