"""A stored response's record is written after its answer goes out (``responses/writes.py``):
found meanwhile (retrieve, input items, continuation), a delete meanwhile leaves nothing, a stop
right after an answer writes it, and a write that fails is logged and the id then unknown."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from runner.errors import StorageError
from runner.serve.conversations import owner_tag
from runner.serve.responses import writes
from runner.serve.responses.store import ResponseNotFound, ResponseStore, StoredResponse
from tests.serve_responses.conftest import written


def echo(body: dict[str, Any]) -> dict[str, Any]:
    users = [m["content"] for m in body["messages"] if m["role"] == "user"]
    return {"content": " | ".join(users)}


class Gate:
    """Holds every record write (``ResponseStore.save``) until opened; counts the writes ended."""

    def __init__(self) -> None:
        self.open = threading.Event()
        self.ended = 0
        self._lock = threading.Lock()

    def wait_ended(self, count: int, timeout_s: float = 10.0) -> None:
        deadline = time.monotonic() + timeout_s
        while self.ended < count:
            assert time.monotonic() < deadline, f"{self.ended} of {count} writes ended"
            time.sleep(0.005)


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[Gate]:
    held = Gate()
    real = ResponseStore.save

    def save(self: ResponseStore, stored: StoredResponse) -> None:
        assert held.open.wait(15), "the gate was never opened"
        try:
            real(self, stored)
        finally:
            with held._lock:
                held.ended += 1

    monkeypatch.setattr(ResponseStore, "save", save)
    yield held
    held.open.set()  # whatever is still held is let through before the server stops


@pytest.fixture
def echo_agent(scripted: Callable[..., Any], agent_files: Any) -> Path:
    agent_files.write("echo", scripted(echo, repeat=True))
    return Path(agent_files.root)


def _record(home: Path, response_id: str) -> Path:
    return home / "serve" / "responses" / f"{response_id}.json"


def test_the_answer_goes_out_before_its_record_is_written_and_is_found_meanwhile(
    gate: Gate, echo_agent: Path, serve_app: Callable[..., Any], home: Path
) -> None:
    client = serve_app([echo_agent]).openai().with_options(timeout=5)  # the write is held for 15 s
    first = client.responses.create(model="echo", input=[{"role": "user", "content": "one"}])
    assert not _record(home, first.id).exists(), "answered while its record is not on disk"
    assert client.responses.retrieve(first.id).output_text == "one"
    assert [i.content[0].text for i in client.responses.input_items.list(first.id)] == ["one"]
    second = client.responses.create(model="echo", input="two", previous_response_id=first.id)
    assert second.output_text == "one | two"
    with client.responses.stream(model="echo", input="three", previous_response_id=second.id) as stream:
        streamed = stream.get_final_response()  # response.completed came while its write is held
    assert streamed.output_text == "one | two | three"
    assert client.responses.retrieve(streamed.id).output_text == "one | two | three"
    assert not any(_record(home, r.id).exists() for r in (first, second, streamed))
    gate.open.set()
    for path in written(home, first.id, second.id, streamed.id):
        assert json.loads(path.read_text())["response"]["status"] == "completed"
    follow = client.responses.create(model="echo", input="four", previous_response_id=streamed.id)
    assert follow.output_text == "one | two | three | four"


def test_a_delete_while_the_record_is_written_leaves_nothing(
    gate: Gate, echo_agent: Path, serve_app: Callable[..., Any], home: Path
) -> None:
    served = serve_app([echo_agent])
    client = served.openai().with_options(timeout=5)
    doomed = client.responses.create(model="echo", input="doomed")
    with served.http() as http:
        deleted = http.delete(f"/v1/responses/{doomed.id}", timeout=5)
    assert deleted.status_code == 200 and deleted.json() == {
        "id": doomed.id,
        "object": "response.deleted",
        "deleted": True,
    }
    for attempt in (
        lambda: client.responses.retrieve(doomed.id),
        lambda: client.responses.input_items.list(doomed.id),
        lambda: client.responses.delete(doomed.id),
        lambda: client.responses.create(model="echo", input="x", previous_response_id=doomed.id),
    ):
        with pytest.raises(openai.NotFoundError):
            attempt()
    gate.open.set()
    gate.wait_ended(1)
    assert not _record(home, doomed.id).exists(), "its file was removed once written"
    assert not list(_record(home, doomed.id).parent.glob("*.tmp"))
    served.stop()
    again = serve_app([echo_agent]).openai()
    with pytest.raises(openai.NotFoundError):
        again.responses.retrieve(doomed.id)


def test_a_stop_right_after_an_answer_writes_its_record_and_a_restart_continues_it(
    gate: Gate, echo_agent: Path, serve_app: Callable[..., Any], home: Path
) -> None:
    before = serve_app([echo_agent])
    first = before.openai().responses.create(model="echo", input=[{"role": "user", "content": "before"}])
    streamed = before.openai().responses.create(model="echo", input="also", stream=True)
    final = next(event for event in streamed if event.type == "response.completed").response
    assert not _record(home, first.id).exists() and not _record(home, final.id).exists()
    threading.Timer(0.3, gate.open.set).start()  # the writes end while the server is stopping
    before.stop()
    assert _record(home, first.id).exists() and _record(home, final.id).exists(), "stop waited"
    after = serve_app([echo_agent]).openai()
    follow = after.responses.create(model="echo", input="after", previous_response_id=first.id)
    assert follow.output_text == "before | after"
    assert after.responses.retrieve(final.id).output_text == "also"


def test_a_failed_write_is_logged_and_the_response_is_then_unknown(
    gate: Gate,
    echo_agent: Path,
    serve_app: Callable[..., Any],
    home: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    lines: list[str] = []
    client = serve_app([echo_agent], report=lines.append).openai().with_options(timeout=5)
    gate.open.set()
    kept = client.responses.create(model="echo", input="kept")
    (folder,) = [path.parent for path in written(home, kept.id)]
    gate.open.clear()
    lost = client.responses.create(model="echo", input="lost")
    assert client.responses.retrieve(lost.id).output_text == "lost", "in memory while it is written"
    folder.rename(folder.with_name("moved"))
    folder.write_text("a file where the folder was")
    with caplog.at_level(logging.ERROR, logger="runner.serve"):
        gate.open.set()
        gate.wait_ended(2)
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    errors = [message for message in messages if lost.id in message]
    assert len(errors) == 1 and "not a folder" in errors[0] and "dropped" in errors[0], errors
    assert [line for line in lines if lost.id in line] == [f"error: {errors[0]}"]
    unknown = "resp_" + "0" * 32
    answers = []
    for response_id in (lost.id, unknown):
        with pytest.raises(openai.NotFoundError) as caught:
            client.responses.retrieve(response_id)
        answers.append(caught.value.body["message"].replace(response_id, "ID"))
    assert answers[0] == answers[1], "the same 404 as an unknown id"
    with pytest.raises(openai.NotFoundError) as continued:
        client.responses.create(model="echo", input="x", previous_response_id=lost.id)
    assert continued.value.body["param"] == "previous_response_id"


def test_a_staged_record_dropped_by_a_failed_write_and_marked_by_a_delete(tmp_path: Path) -> None:
    store = ResponseStore(tmp_path)
    response = {"id": "resp_" + "a" * 32, "object": "response", "status": "completed"}
    stored = StoredResponse(response, [], [{"role": "user", "content": "hi"}], None, owner_tag(None))
    store.stage(stored)
    assert store.recall(response["id"], None) is stored and store.load(response["id"], None) is stored
    with pytest.raises(ResponseNotFound):
        store.load(response["id"], "another key")
    (tmp_path / "serve").mkdir()
    (tmp_path / "serve" / "responses").write_text("in the way")
    with pytest.raises(StorageError):
        store.save(stored)
    assert store.staged() == [] and store.recall(response["id"], None) is None
    with pytest.raises(ResponseNotFound):
        store.load(response["id"], None)
    (tmp_path / "serve" / "responses").unlink()
    store.stage(stored)
    store.delete(response["id"], None)
    with pytest.raises(ResponseNotFound):
        store.recall(response["id"], None)
    store.save(stored)  # the folder is made again; the file lands and is removed
    assert not (tmp_path / "serve" / "responses" / f"{response['id']}.json").exists()
    assert store.staged() == []
    with pytest.raises(ResponseNotFound):
        store.load(response["id"], None)


def test_with_too_many_writes_in_flight_an_answer_waits_for_its_own(
    gate: Gate, echo_agent: Path, serve_app: Callable[..., Any], home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(writes, "MAX_IN_FLIGHT", 0)  # every write counts as one too many
    client = serve_app([echo_agent]).openai()
    threading.Timer(0.2, gate.open.set).start()
    first = client.responses.create(model="echo", input="one")
    assert _record(home, first.id).exists(), "written before the answer went out"
    with client.responses.stream(model="echo", input="two", previous_response_id=first.id) as stream:
        streamed = stream.get_final_response()
    assert _record(home, streamed.id).exists() and streamed.output_text == "one | two"
