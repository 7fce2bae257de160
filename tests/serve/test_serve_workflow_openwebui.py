"""The Open WebUI pipe lists a team file's workflow as a model and runs it, as ``runner serve`` does."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from runner.integrations.openwebui import Pipe
from runner.testing import ScriptedServer
from tests.serve.test_serve_openwebui import Emitter, open_webui_stream, sdk_stream
from tests.workflow.helpers import Models, events, team, user_text

WORKFLOW = """workflow:
  name: shout
  steps:
    - {id: first, agent: echo, input: "one {{ input }}"}
    - {id: second, agent: loud, input: "{{ steps.first.output }}"}
"""


@pytest.fixture
def pipe(scripted: Callable[..., ScriptedServer], agent_files: Any, home: Path) -> Pipe:
    models = Models(
        {"echo": lambda body: user_text(body), "loud": lambda body: user_text(body).upper() + "!"}
    )
    server = scripted(models)
    team(agent_files.root, server.base_url, {"echo": "", "loud": ""}, WORKFLOW)
    instance = Pipe()
    instance.valves = Pipe.Valves(AGENT_PATHS=str(agent_files.root), RUNNER_HOME=str(home))
    return instance


async def test_the_pipe_lists_the_workflow_and_streams_its_steps_then_its_output(
    pipe: Pipe, check_stream: Any, home: Path
) -> None:
    assert pipe.pipes() == [
        {"id": "echo", "name": "echo"},
        {"id": "loud", "name": "loud"},
        {"id": "shout", "name": "shout"},
    ]
    emitter = Emitter()
    body = {"model": "runner.shout", "messages": [{"role": "user", "content": "hey"}], "stream": True}
    result = await pipe.pipe(body, __user__={"id": "u1"}, __event_emitter__=emitter)
    raw = await open_webui_stream(result, "runner.shout")
    checked = check_stream(raw)
    assert (checked.content, checked.finish_reason) == ("ONE HEY!", "stop")
    reasoning = "".join(
        c.choices[0].delta.model_extra.get("reasoning_content") or "" for c in sdk_stream(raw) if c.choices
    )
    assert reasoning.startswith("[first] started (agent echo)\n[first] ok in ")
    assert "[second] started (agent loud)\n" in reasoning
    statuses = [e["data"] for e in emitter.events if e["type"] == "status"]
    assert statuses[0] == {"description": "Running step first…", "done": False}
    assert {"description": "Running step second…", "done": False} in statuses
    assert statuses[-1]["done"] is True
    (record,) = [
        p for p in (home / "sessions").glob("*.jsonl") if '"workflow"' in p.read_text().split("\n")[0]
    ]
    assert [e["key"] for e in events(record, "step_end")] == ["first", "second"]


async def test_the_pipe_answers_a_workflow_whole_and_raises_what_it_refuses(
    pipe: Pipe, check_whole: Any
) -> None:
    body = {"model": "shout", "messages": [{"role": "user", "content": "hey"}], "stream": False}
    result = await pipe.pipe(body)
    check_whole(result)
    assert result["choices"][0]["message"]["content"] == "ONE HEY!"
    assert "[second] ok in " in result["choices"][0]["message"]["reasoning_content"]
    search = {"type": "function", "function": {"name": "web_search", "parameters": {"type": "object"}}}
    with pytest.raises(
        RuntimeError, match=r"^runner: a workflow cannot call the client's tools \(web_search\)"
    ):
        await pipe.pipe({**body, "tools": [search]})


async def test_a_failing_step_in_the_pipe_is_an_error_open_webui_shows(
    scripted: Callable[..., ScriptedServer], agent_files: Any, home: Path
) -> None:
    server = scripted(Models({"echo": lambda body: {"status": 400, "error": "no such model"}, "loud": str}))
    team(agent_files.root, server.base_url, {"echo": "", "loud": ""}, WORKFLOW)
    pipe = Pipe()
    pipe.valves = Pipe.Valves(AGENT_PATHS=str(agent_files.root), RUNNER_HOME=str(home))
    body = {"model": "shout", "messages": [{"role": "user", "content": "hey"}]}
    with pytest.raises(
        RuntimeError, match=r"^runner: workflow shout failed: step first failed: .*no such model"
    ):
        await pipe.pipe(body)
    raw = await open_webui_stream(await pipe.pipe({**body, "stream": True}), "shout")
    datas = [line[len("data: ") :] for line in raw.decode().split("\n\n") if line.startswith("data: ")]
    assert datas[-1] == "[DONE]" and json.loads(datas[-2])["error"]["code"] == "workflow_failed"


async def test_open_webui_stopping_a_workflow_interrupts_its_step(
    scripted: Callable[..., ScriptedServer], agent_files: Any, home: Path
) -> None:
    server = scripted(Models({"echo": lambda body: {"content": "slow", "sleep_s": 20}, "loud": str}))
    team(agent_files.root, server.base_url, {"echo": "", "loud": ""}, WORKFLOW)
    pipe = Pipe()
    pipe.valves = Pipe.Valves(AGENT_PATHS=str(agent_files.root), RUNNER_HOME=str(home))
    emitter = Emitter()
    body = {"model": "shout", "messages": [{"role": "user", "content": "hey"}], "stream": True}
    result = await pipe.pipe(body, __event_emitter__=emitter)
    consumer = asyncio.create_task(open_webui_stream(result, "shout"))
    async with asyncio.timeout(10):
        while not server.requests:  # the first step is waiting for its model
            await asyncio.sleep(0.01)
    consumer.cancel()  # the user pressed Stop
    with pytest.raises(asyncio.CancelledError):
        await consumer
    (record,) = [
        p for p in (home / "sessions").glob("*.jsonl") if '"workflow"' in p.read_text().split("\n")[0]
    ]
    (end,) = events(record, "workflow_end")
    assert end["exit_code"] == 130
    assert len(server.requests) == 1  # the second step never started
