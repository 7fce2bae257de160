"""Stored responses: retrieve, input_items (paginated), delete, ``store: false``, ownership by API
key, a damaged record, two branches from one response, a deep chain read from one file, a restart,
and ``runner sessions list`` seeing the sessions."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import openai
import pytest
from typer.testing import CliRunner

from runner.cli import main
from runner.serve.responses.store import ResponseStore, StoredResponse
from tests.serve_responses.conftest import written


def echo(body: dict[str, Any]) -> dict[str, Any]:
    """Answer with the user texts the model was sent, joined: the conversation is visible."""
    users = [m["content"] for m in body["messages"] if m["role"] == "user"]
    return {"content": " | ".join(users)}


@pytest.fixture
def served(scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any]) -> Any:
    server = scripted(echo)
    agent_files.write("echo", server, "limits:\n  max_turns: 5000")
    served = serve_app([agent_files.root])
    served.model_server = server
    return served


def _files(home: Path) -> list[Path]:
    return sorted((home / "serve" / "responses").glob("resp_*.json"))


def test_retrieve_input_items_and_delete(served: Any, home: Path) -> None:
    client = served.openai()
    first = client.responses.create(model="echo", input="one")
    items = [{"role": "user", "content": f"part {n}"} for n in range(5)]
    second = client.responses.create(model="echo", input=items, previous_response_id=first.id)
    assert second.output_text == "one | part 0 | part 1 | part 2 | part 3 | part 4"
    got = client.responses.retrieve(second.id)
    assert got.id == second.id and got.output_text == second.output_text
    page = client.responses.input_items.list(second.id, limit=2, order="asc")
    assert [i.content[0].text for i in page.data] == ["part 0", "part 1"] and page.has_more
    texts = [i.content[0].text for i in client.responses.input_items.list(second.id, order="asc")]
    assert texts == [f"part {n}" for n in range(5)]
    assert [i.content[0].text for i in client.responses.input_items.list(second.id)] == texts[::-1]
    every = [i.content[0].text for i in client.responses.input_items.list(second.id, limit=2, order="asc")]
    assert every == texts, "the SDK's auto-pagination walks every page"
    client.responses.delete(second.id)
    for call in (lambda: client.responses.retrieve(second.id), lambda: client.responses.delete(second.id)):
        with pytest.raises(openai.NotFoundError):
            call()
    with pytest.raises(openai.NotFoundError) as caught:
        client.responses.create(model="echo", input="x", previous_response_id=second.id)
    assert caught.value.body["param"] == "previous_response_id"
    assert client.responses.retrieve(first.id).output_text == "one", "the others stay"


def test_store_false_keeps_nothing(served: Any, home: Path) -> None:
    client = served.openai()
    response = client.responses.create(model="echo", input="secret", store=False)
    kept = client.responses.create(model="echo", input="kept")
    stored = written(home, kept.id)
    assert response.store is False and _files(home) == stored, "only the stored one"
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(response.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model="echo", input="x", previous_response_id=response.id)


def test_only_the_creating_key_reads_or_continues(
    scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any]
) -> None:
    agent_files.write("echo", scripted(echo))
    served = serve_app([agent_files.root], api_keys=["key-one", "key-two"])
    mine, theirs = served.openai("key-one"), served.openai("key-two")
    response = mine.responses.create(model="echo", input="mine")
    answers = []
    for attempt in (
        lambda: theirs.responses.retrieve(response.id),
        lambda: theirs.responses.input_items.list(response.id),
        lambda: theirs.responses.delete(response.id),
        lambda: theirs.responses.create(model="echo", input="x", previous_response_id=response.id),
        lambda: theirs.responses.retrieve("resp_" + "0" * 32),
    ):
        with pytest.raises(openai.NotFoundError) as caught:
            attempt()
        answers.append(
            caught.value.body["message"].replace(response.id, "ID").replace("resp_" + "0" * 32, "ID")
        )
    assert answers[0] == answers[4], "another key's response reads as an unknown one"
    assert mine.responses.retrieve(response.id).output_text == "mine"
    with pytest.raises(openai.AuthenticationError):
        served.openai("wrong").responses.retrieve(response.id)


def test_a_damaged_record_fails_alone(served: Any, home: Path) -> None:
    client = served.openai()
    good = client.responses.create(model="echo", input="good")
    bad = client.responses.create(model="echo", input="bad")
    _, path = written(home, good.id, bad.id)
    path.write_bytes(path.read_bytes()[:40])  # cut short, as a disk that lost the tail
    (path.parent / f"{good.id}.json.tmp").write_bytes(b"{half")  # a write a kill -9 interrupted
    for attempt in (
        lambda: client.responses.retrieve(bad.id),
        lambda: client.responses.create(model="echo", input="x", previous_response_id=bad.id),
    ):
        with pytest.raises(openai.InternalServerError) as caught:
            attempt()
        assert bad.id in caught.value.body["message"] and "damaged" in caught.value.body["message"]
    assert client.responses.retrieve(good.id).output_text == "good"
    follow = client.responses.create(model="echo", input="more", previous_response_id=good.id)
    assert follow.output_text == "good | more"


async def test_two_requests_continuing_one_response_branch(served: Any) -> None:
    client = served.async_openai()
    root = await client.responses.create(model="echo", input="root")
    left, right = await asyncio.gather(
        client.responses.create(model="echo", input="left", previous_response_id=root.id),
        client.responses.create(model="echo", input="right", previous_response_id=root.id),
    )
    assert (left.output_text, right.output_text) == ("root | left", "root | right")
    deeper = await client.responses.create(model="echo", input="down", previous_response_id=left.id)
    assert deeper.output_text == "root | left | down"
    assert (await client.responses.retrieve(root.id)).output_text == "root"
    await client.close()


def test_a_chain_continues_from_its_last_record_alone(served: Any, home: Path) -> None:
    client = served.openai()
    previous = None
    for n in range(6):
        previous = client.responses.create(model="echo", input=f"t{n}", previous_response_id=previous).id
        written(home, previous)
    for path in _files(home):
        if path.stem != previous:
            path.unlink()  # nothing of the chain but its last response is read
    answer = client.responses.create(model="echo", input="end", previous_response_id=previous)
    assert answer.output_text == " | ".join([f"t{n}" for n in range(6)] + ["end"])


def test_a_thousand_deep_chain_is_one_record(served: Any, home: Path) -> None:
    client = served.openai()
    first = client.responses.create(model="echo", input="t0")
    written(home, first.id)
    store = ResponseStore(home)
    record = store.load(first.id, None)
    messages = list(record.messages)
    for n in range(1, 1000):
        messages += [{"role": "user", "content": f"t{n}"}, {"role": "assistant", "content": f"a{n}"}]
    deep = {**record.response, "id": "resp_" + "d" * 32}
    store.save(StoredResponse(deep, [], messages, record.session_id, record.owner))
    answer = client.responses.create(model="echo", input="last", previous_response_id=deep["id"])
    sent = served.model_server.requests[-1]["messages"]
    assert len(sent) == 2 * 1000 + 1 and answer.output_text.endswith("t998 | t999 | last")


def test_a_restarted_server_continues_and_sessions_list_sees_it(
    scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any], home: Path
) -> None:
    agent_files.write("echo", scripted(echo, repeat=True))
    before = serve_app([agent_files.root])
    first = before.openai().responses.create(model="echo", input="before")
    before.stop()
    after = serve_app([agent_files.root])
    follow = after.openai().responses.create(model="echo", input="after", previous_response_id=first.id)
    assert follow.output_text == "before | after"
    session_id = follow.model_extra["runner"]["session_id"] if follow.model_extra else None
    assert session_id
    listed = CliRunner().invoke(
        main.app, ["sessions", "list"], env={"RUNNER_HOME": str(home), "NO_COLOR": "1"}
    )
    assert listed.exit_code == 0, listed.output
    assert session_id in listed.output
    shown = CliRunner().invoke(main.app, ["sessions", "show", session_id], env={"RUNNER_HOME": str(home)})
    assert shown.exit_code == 0 and "after" in shown.output


def test_a_continuation_reuses_the_stored_renders_of_its_user_texts(
    scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any], home: Path
) -> None:
    import json

    server = scripted(echo, repeat=True)
    agent_files.write("wrap", server, 'prompts:\n  user: "U: {{ input }}"')
    client = serve_app([agent_files.root]).openai()
    first = client.responses.create(model="wrap", input="a")
    second = client.responses.create(model="wrap", input="b", previous_response_id=first.id)
    assert second.output_text == "U: a | U: b"  # the earlier text rendered once, as it was sent
    (path,) = written(home, second.id)
    record = json.loads(path.read_text())
    assert record["rendered"]["texts"]["a"] == {"role": "user", "content": "U: a"}
    record["rendered"]["texts"]["a"]["content"] = "kept: a"  # what was sent is what is sent again
    path.write_text(json.dumps(record))
    third = client.responses.create(model="wrap", input="c", previous_response_id=second.id)
    assert third.output_text == "kept: a | U: b | U: c"
    record["rendered"]["key"] = "another version of the agent file"  # its renders are not used
    path.write_text(json.dumps(record))
    fourth = client.responses.create(model="wrap", input="d", previous_response_id=second.id)
    assert fourth.output_text == "U: a | U: b | U: d"


MARKING_HOOK = """\
def mark(event):
    for message in event.messages:
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            message["content"] += "!"
"""


def test_a_python_hook_changing_messages_in_place_leaves_the_stored_conversation_as_it_was(
    scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any]
) -> None:
    server = scripted(echo)
    (agent_files.root / "marking_hooks.py").write_text(MARKING_HOOK)
    agent_files.write("marked", server, "hooks:\n  turn_pre:\n    - python: marking_hooks:mark")
    client = serve_app([agent_files.root]).openai()
    first = client.responses.create(model="marked", input="one")
    assert first.output_text == "one!", "the hook changed what this turn sent"
    for text in ("two", "three"):  # two branches from one response, each from it as it was stored
        answer = client.responses.create(model="marked", input=text, previous_response_id=first.id)
        assert answer.output_text == f"one! | {text}!"
        deeper = client.responses.create(model="marked", input="more", previous_response_id=answer.id)
        assert deeper.output_text == f"one! | {text}! | more!"
