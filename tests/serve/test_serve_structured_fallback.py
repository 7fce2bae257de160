"""Structured output through ``runner serve`` when the provider refuses ``response_format``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from runner.integrations.openwebui import Pipe
from runner.store.transcript import sessions_dir
from tests.serve.structured_common import ADD_TOOLS, QUESTION, SUM, SUM_OUTPUT


def no_response_format(body: dict[str, Any]) -> dict[str, Any]:
    """A provider that cannot combine tools and a schema: it wants the final-answer tool."""
    if "response_format" in body:
        return {"status": 400, "error": "response_format is not supported with tools"}
    if body["messages"][-1]["role"] == "user":
        return {"tool_calls": [{"id": "call_add", "name": "add", "arguments": {"a": 2, "b": 3}}]}
    return {"tool_calls": [{"id": "call_final", "name": "final_answer", "arguments": SUM}]}


@pytest.mark.parametrize("stream", [False, True])
def test_a_provider_that_refuses_response_format_gets_the_final_answer_tool(
    scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any], stream: bool
) -> None:
    server = scripted(no_response_format)
    agent_files.write("summer", server, SUM_OUTPUT, tools=ADD_TOOLS)
    served = serve_app([agent_files.root])
    client = served.openai()
    if stream:
        chunks = list(client.chat.completions.create(model="summer", messages=QUESTION, stream=True))
        content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    else:
        content = client.chat.completions.create(model="summer", messages=QUESTION).choices[0].message.content
    assert json.loads(content or "") == SUM


async def test_the_final_answer_call_is_not_run_as_a_tool(
    scripted: Callable[..., Any], agent_files: Any, home: Path, check_stream: Any
) -> None:
    """Streamed, a call is started as soon as its arguments are complete; the final-answer call is
    the answer, not a tool: no status line in Open WebUI, no tool_start in the transcript."""
    server = scripted(no_response_format)
    agent_files.write("summer", server, SUM_OUTPUT, tools=ADD_TOOLS)
    pipe = Pipe()
    pipe.valves = Pipe.Valves(AGENT_PATHS=str(agent_files.root), RUNNER_HOME=str(home))
    statuses: list[str] = []

    async def emit(event: dict[str, Any]) -> None:
        statuses.append(event["data"]["description"])

    result = await pipe.pipe(
        {"model": "summer", "messages": QUESTION, "stream": True}, __event_emitter__=emit
    )
    raw = b"".join([p if isinstance(p, bytes) else p.encode() async for p in result.body_iterator])
    assert json.loads(check_stream(raw).content) == SUM
    assert [s for s in statuses if s] == ["Running add…"]
    (path,) = sessions_dir(home).glob("*.jsonl")
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    started = [r["data"]["call"]["function"]["name"] for r in records if r.get("event") == "tool_start"]
    assert started == ["add"]
    assert [r["data"] for r in records if r.get("event") == "output"] == [{"value": SUM}]


MARKING_TOOLS = '''
import pathlib


def add(a: int, b: int) -> int:
    """Add two integers."""
    pathlib.Path(r"{mark}").write_text("ran")
    return a + b
'''


def add_and_answer(body: dict[str, Any]) -> dict[str, Any]:
    if "response_format" in body:
        return {"status": 400, "error": "response_format is not supported with tools"}
    return {
        "tool_calls": [
            {"id": "call_add", "name": "add", "arguments": {"a": 2, "b": 3}},
            {"id": "call_final", "name": "final_answer", "arguments": SUM},
        ]
    }


def test_a_tool_called_beside_the_final_answer_keeps_its_real_result(
    scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any], home: Path, tmp_path: Path
) -> None:
    """Streamed, ``add`` starts before the reply is complete: it ran, so the history must say so."""
    mark = tmp_path / "mark"
    server = scripted(add_and_answer)
    agent_files.write("summer", server, SUM_OUTPUT, tools=MARKING_TOOLS.format(mark=mark))
    served = serve_app([agent_files.root])
    chunks = list(served.openai().chat.completions.create(model="summer", messages=QUESTION, stream=True))
    assert json.loads("".join(c.choices[0].delta.content or "" for c in chunks if c.choices)) == SUM
    assert mark.exists()
    (path,) = sessions_dir(home).glob("*.jsonl")
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    results = {r["tool_call_id"]: r["content"] for r in records if r.get("role") == "tool"}
    assert results == {"call_final": "Accepted: this is the final answer.", "call_add": "5"}
