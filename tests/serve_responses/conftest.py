"""Fixtures of the Responses door tests: agents on a scripted model served on uvicorn, and every
response checked against the openai SDK's own types (the event stream's order and numbering too)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from runner.testing import ScriptedServer
from tests.serve.conftest import AgentFiles, Recorder, Served, check_error, parse_sse, served_apps

EVENTS: TypeAdapter[Any] = TypeAdapter(ResponseStreamEvent)
FINAL = ("response.completed", "response.incomplete", "response.failed")


def check_response(body: dict[str, Any]) -> Response:
    """A whole response object: the SDK's strict validation, and usage that adds up."""
    response = Response.model_validate(body, strict=False)
    assert body["object"] == "response" and body["id"].startswith("resp_")
    usage = body["usage"]
    assert usage is not None
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    for field in ("cached_tokens", "cache_write_tokens"):
        assert isinstance(usage["input_tokens_details"][field], int)
    assert isinstance(usage["output_tokens_details"]["reasoning_tokens"], int)
    return response


def parse_events(raw: bytes) -> list[dict[str, Any]]:
    """The events of a Responses stream (each ``event:`` line names its data's type)."""
    text = raw.decode("utf-8").replace("\r\n", "\n")
    events = []
    for block in text.split("\n\n"):
        lines = [line for line in block.split("\n") if line and not line.startswith(":")]
        if not lines:
            continue
        name = [line[len("event: ") :] for line in lines if line.startswith("event: ")]
        data = "\n".join(line[len("data: ") :] for line in lines if line.startswith("data: "))
        event = json.loads(data)
        assert name == [event["type"]], f"event line {name} for {event['type']}"
        events.append(event)
    return events


def check_events(events: list[dict[str, Any]], *, complete: bool = True) -> dict[str, Any] | None:
    """The API's order: created, in_progress, each item's added → parts → done, one final event;
    sequence numbers 0, 1, 2, ...; every event valid for the SDK. The final response, if any."""
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    for event in events:
        EVENTS.validate_python(event)
    kinds = [e["type"] for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"], kinds[:3]
    finals = [k for k in kinds if k in FINAL]
    if complete:
        assert len(finals) == 1 and kinds[-1] in FINAL, kinds[-3:]
    open_items: dict[int, dict[str, Any]] = {}
    done: list[int] = []
    for event in events[2:]:
        kind = event["type"]
        if kind == "response.output_item.added":
            assert event["output_index"] == len(done) + len(open_items) and not open_items, kind
            open_items[event["output_index"]] = event["item"]
        elif kind == "response.output_item.done":
            assert event["output_index"] in open_items
            del open_items[event["output_index"]]
            done.append(event["output_index"])
        elif "output_index" in event:
            assert event["output_index"] in open_items, f"{kind} outside its item"
    if not complete or not finals:
        return None
    assert not open_items, "items left open"
    final = events[-1]["response"]
    check_response(final)
    items = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    assert final["output"] == items
    return final


class ResponsesRecorder(Recorder):
    """Checks Responses streams, response objects and errors (not chat chunks)."""

    def verify(self) -> int:
        checked = 0
        for record in list(self.responses):
            if record.content_type.startswith("text/event-stream"):
                if not record.finished:
                    assert self.allow_partial, f"a stream from {record.url} was cut short"
                check_events(parse_events(record.body), complete=record.finished)
                checked += 1
            elif record.status >= 400 and record.finished and record.body:
                check_error(record.status, json.loads(record.body))
            elif record.finished and record.status == 200 and "/responses" in record.url:
                body = json.loads(record.body)
                if body.get("object") == "response":
                    check_response(body)
        return checked


def written(home: Path, *ids: str, timeout_s: float = 10.0) -> list[Path]:
    """The record files of ``ids``, once each is on disk: a stored response's record is written
    just after its answer goes out (``responses/writes.py``)."""
    paths = [home / "serve" / "responses" / f"{response_id}.json" for response_id in ids]
    deadline = time.monotonic() + timeout_s
    while not all(path.exists() for path in paths):
        assert time.monotonic() < deadline, f"not written within {timeout_s} s: {ids}"
        time.sleep(0.005)
    return paths


@pytest.fixture
def scripted(scripted_server: Callable[..., ScriptedServer]) -> Callable[..., ScriptedServer]:
    return scripted_server


@pytest.fixture
def agent_files(tmp_path: Path) -> AgentFiles:
    root = tmp_path / "agents"
    root.mkdir()
    return AgentFiles(root)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def recorder() -> Iterator[ResponsesRecorder]:
    recorder = ResponsesRecorder()
    yield recorder
    recorder.verify()


@pytest.fixture
def serve_app(home: Path, recorder: ResponsesRecorder) -> Iterator[Callable[..., Served]]:
    """``serve_app(paths, **options)`` serves ``paths`` (RUNNER_HOME ``home``) until the test ends."""
    with served_apps(home, recorder) as start:
        yield start


__all__ = ["check_events", "check_response", "parse_events", "parse_sse", "written"]
