"""How runs end on the Responses API: a client that disconnects mid-stream cancels the run and
stores nothing; a limit makes the response ``incomplete``; ``<think>`` text is a reasoning item; a
workflow model answers too."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.serve_responses.conftest import check_events, parse_events
from tests.workflow.helpers import team

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


def wait_for(condition: Callable[[], bool], *, timeout: float = 10.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def test_a_client_that_disconnects_mid_stream_cancels_and_stores_nothing(
    tmp_path: Path,
    scripted: Callable[..., Any],
    agent_files: Any,
    serve_app: Callable[..., Any],
    recorder: Any,
    home: Path,
) -> None:
    recorder.allow_partial = True
    marks = tmp_path / "marks"
    marks.mkdir()
    server = scripted([{"content": "Waiting.", "tool_calls": [{"name": "slow", "arguments": {}}]}])
    agent_files.write("sleeper", server, tools=SLOW_TOOLS.format(marks=marks))
    served = serve_app([agent_files.root])
    with (
        served.http() as http,
        http.stream(
            "POST", "/v1/responses", json={"model": "sleeper", "input": "go", "stream": True}
        ) as answer,
    ):
        assert answer.status_code == 200
        ids = []
        for line in answer.iter_lines():
            if line.startswith("data: ") and not ids:
                ids.append(json.loads(line[len("data: ") :])["response"]["id"])
            if "response.output_item.done" in line:
                break  # the text is out, the tool is running: hang up
        wait_for(lambda: (marks / "started").exists(), what="the tool to start")
    wait_for(lambda: (marks / "cancelled").exists(), what="the tool to see its cancellation")
    wait_for(lambda: served.runs() == 0, what="the run to end")
    assert not list((home / "serve" / "responses").glob("*.json")), "a cancelled run stores nothing"
    with served.http() as http:  # nor keeps it in memory to be written later
        assert http.get(f"/v1/responses/{ids[0]}").status_code == 404


def test_a_limit_makes_the_response_incomplete(
    scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any]
) -> None:
    loop = {"content": "again", "tool_calls": [{"name": "ping", "arguments": {}}]}
    server = scripted([loop], repeat=True)
    tools = 'def ping() -> str:\n    """Ping."""\n    return "pong"\n'
    agent_files.write("looper", server, "limits:\n  max_steps: 2", tools=tools)
    served = serve_app([agent_files.root])
    client = served.openai()
    response = client.responses.create(model="looper", input="go")
    assert response.status == "incomplete"
    assert (
        response.incomplete_details is not None and response.incomplete_details.reason == "max_output_tokens"
    )
    assert response.model_extra and response.model_extra["runner"]["status"] == "limit"
    events = [e.model_dump() for e in client.responses.create(model="looper", input="go", stream=True)]
    final = check_events(events)
    assert final is not None and events[-1]["type"] == "response.incomplete"
    follow = client.responses.create(model="looper", input="go on", previous_response_id=response.id)
    assert follow.previous_response_id == response.id, "an incomplete response is stored and continued"


def test_think_text_is_a_reasoning_item(
    scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any]
) -> None:
    server = scripted([{"content": "<think>Count the letters.</think>Five."}])
    agent_files.write("thinker", server)
    response = serve_app([agent_files.root]).openai().responses.create(model="thinker", input="How many?")
    kinds = [item.type for item in response.output]
    assert kinds == ["reasoning", "message"], kinds
    assert "Count the letters." in response.output[0].summary[0].text
    assert response.output_text == "Five."


WORKFLOW = """workflow:
  name: crew
  output: "{{ steps.draft.output }}"
  steps:
    - id: draft
      agent: writer
      input: "draft: {{ input }}"
"""


def test_a_workflow_model_answers_whole_and_streamed(
    scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any]
) -> None:
    server = scripted([{"content": "A draft."}], repeat=True)
    team(agent_files.root, server.base_url, {"writer": ""}, WORKFLOW)
    served = serve_app([agent_files.root])
    client = served.openai()
    response = client.responses.create(model="crew", input="Write.")
    assert response.output_text == "A draft."
    assert "reasoning" in [item.type for item in response.output], "its steps are reasoning"
    assert server.requests[-1]["messages"][-1]["content"].endswith("draft: Write.")
    with served.http() as http:
        raw = http.post("/v1/responses", json={"model": "crew", "input": "Write.", "stream": True}).content
    final = check_events(parse_events(raw))
    assert final is not None and final["output"][-1]["content"][0]["text"] == "A draft."
