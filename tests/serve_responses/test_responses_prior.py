"""A stored conversation converted once (``responses.prior``) and the records kept in memory
(``store.RecentResponses``): the same history as converting the whole conversation, and never a
stale record — a file edited, replaced, damaged or deleted on disk is what the next request sees."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import openai
import pytest

from runner.serve.details import ToolBlock, render_details
from runner.serve.history import ChatHistory, parse_conversation
from runner.serve.protocol import ApiError
from runner.serve.responses.prior import EMPTY, continue_conversation, prepared
from runner.serve.responses.store import RecentResponses, StoredResponse
from runner.session.conversation import Conversation
from runner.store.transcript import find_transcript
from tests.serve_responses.conftest import written


def echo(body: dict[str, Any]) -> dict[str, Any]:
    users = [m["content"] for m in body["messages"] if m["role"] == "user"]
    return {"content": " | ".join(users)}


def _stored(messages: list[dict[str, Any]]) -> StoredResponse:
    return StoredResponse({"id": "resp_" + "a" * 32}, [], messages, None, "")


def _call(call_id: str, name: str = "add") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": '{"a": 1}'}}


STEPS = render_details(ToolBlock("call_step1", "clock", "{}", "12:00")) + "It is noon."

CONVERSATIONS: dict[str, list[dict[str, Any]]] = {
    "plain turns": [
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "a1"},
        {"role": "user", "content": "two"},
        {"role": "assistant", "content": "a2"},
    ],
    "the agent's own steps in an answer": [
        {"role": "user", "content": "time?"},
        {"role": "assistant", "content": STEPS},
        {"role": "user", "content": "again"},
        {"role": "assistant", "content": STEPS.replace("call_step1", "call_step2")},
    ],
    "a client tool answered, then a turn": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "add"},
        {"role": "assistant", "content": None, "tool_calls": [_call("call_c1")]},
        {"role": "tool", "tool_call_id": "call_c1", "content": "2"},
        {"role": "assistant", "content": "it is 2"},
        {"role": "user", "content": [{"type": "text", "text": "and "}, {"type": "text", "text": "more"}]},
        {"role": "assistant", "content": None, "tool_calls": [_call("call_c2"), _call("call_c3", "mul")]},
    ],
    "no user text at all": [{"role": "assistant", "content": "hello"}],
}

FOLLOW_UPS: dict[str, list[dict[str, Any]]] = {
    "a user text": [{"role": "user", "content": "next"}],
    "tool results": [
        {"role": "tool", "tool_call_id": "call_c2", "content": "4"},
        {"role": "tool", "tool_call_id": "call_c3", "content": "6"},
    ],
}


def _same(got: ChatHistory, want: ChatHistory) -> None:
    assert got.all_items() == want.all_items()
    assert (got.text, got.first_input, got.names) == (want.text, want.first_input, want.names)


PAIRS = [(c, "a user text") for c in sorted(CONVERSATIONS)] + [
    ("a client tool answered, then a turn", "tool results")  # the results answer its calls
]


@pytest.mark.parametrize(("conversation", "follow"), PAIRS)
@pytest.mark.parametrize("instructions", [None, "answer in French"])
def test_a_prepared_conversation_continues_as_the_whole_one_converted(
    conversation: str, follow: str, instructions: str | None
) -> None:
    stored, new = CONVERSATIONS[conversation], FOLLOW_UPS[follow]
    lead = [{"role": "system", "content": instructions}] if instructions else []
    want = parse_conversation([*lead, *stored, *new])
    going = continue_conversation(prepared(_stored(stored)), stored, new, instructions=instructions)
    _same(going.history, want)
    record = [*stored, *new, {"role": "assistant", "content": "answered"}]
    if going.next is None:  # it ended with tool results: its record is prepared on first need
        assert follow == "tool results"
        return
    again = [{"role": "user", "content": "after"}]
    chained = continue_conversation(going.next, record, again)
    _same(chained.history, parse_conversation([*record, *again]))
    assert going.next.split == prepared(_stored(record)).split
    assert going.next.items == prepared(_stored(record)).items


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": f"U: {text}"}


def test_the_prepared_history_is_made_once_and_never_handed_out() -> None:
    stored = _stored(CONVERSATIONS["a client tool answered, then a turn"])
    base = prepared(stored)
    assert prepared(stored) is base and stored.derived["prepared"] is base
    assert base.issued == {"call_c1", "call_c2", "call_c3"}
    going = continue_conversation(base, stored.messages, FOLLOW_UPS["a user text"])
    session = Conversation()
    session.restore_parts(going.history.parts(_user, key="v1"))
    for message in session.history:
        message["content"] = "changed by the session"
    fresh = continue_conversation(base, stored.messages, FOLLOW_UPS["a user text"])
    contents = [m.get("content") for m in fresh.history.history(_user, key="v1")]
    assert "changed by the session" not in contents and "U: add" in contents


def test_the_restored_form_is_kept_for_one_version_of_the_agent_file() -> None:
    stored = _stored(CONVERSATIONS["plain turns"])
    base, new = prepared(stored), FOLLOW_UPS["a user text"]
    wrapped: list[str] = []

    def wrap(mark: str) -> Callable[[str], dict[str, Any]]:
        def user(text: str) -> dict[str, Any]:
            wrapped.append(text)
            return {"role": "user", "content": f"{mark}: {text}"}

        return user

    def contents(key: str | None, mark: str) -> list[Any]:
        session = Conversation()
        going = continue_conversation(base, stored.messages, new)
        session.restore_parts(going.history.parts(wrap(mark), key=key), first_input="one")
        return [m["content"] for m in session.history]

    assert contents("v1", "U") == ["U: one", "a1", "U: two", "a2"]
    assert wrapped == ["one", "two"]  # the base ("one", "a1") then the rest ("two", "a2")
    assert contents("v1", "U") == ["U: one", "a1", "U: two", "a2"] and wrapped == ["one", "two"]
    assert contents("v2", "V") == ["V: one", "a1", "V: two", "a2"], "another version renders again"
    assert contents(None, "W") == ["W: one", "a1", "W: two", "a2"], "no version: nothing kept"
    assert contents("v1", "X") == ["X: one", "a1", "X: two", "a2"], "only the last version is kept"


def test_the_next_records_base_is_restored_with_the_request() -> None:
    stored = _stored(CONVERSATIONS["plain turns"])
    going = continue_conversation(prepared(stored), stored.messages, FOLLOW_UPS["a user text"])
    assert going.next is not None and going.next.shared.restored("v1") is None
    Conversation().restore_parts(going.history.parts(_user, key="v1"))
    kept = going.next.shared.restored("v1")
    assert kept is not None
    assert [m["content"] for m in kept[0].messages] == ["U: one", "a1", "U: two", "a2"]
    unkept = continue_conversation(prepared(stored), stored.messages, FOLLOW_UPS["a user text"], keep=False)
    assert unkept.next is None and unkept.history.then is None


def test_over_the_limit_names_the_whole_conversations_limit() -> None:
    stored = [
        m
        for n in range(6)
        for m in ({"role": "user", "content": f"u{n}"}, {"role": "assistant", "content": "a"})
    ]
    base = prepared(_stored(stored))
    new = [
        {"role": "user", "content": "u"},
        {"role": "assistant", "content": STEPS},
        {"role": "user", "content": "x"},
    ]
    with pytest.raises(ApiError) as whole:
        parse_conversation([*stored, *new], max_messages=13)
    with pytest.raises(ApiError) as split:
        continue_conversation(base, stored, new, max_messages=13)
    assert split.value.status == 413 and split.value.message == whole.value.message
    assert "more than 13 messages" in split.value.message


def test_a_stored_conversation_that_fails_the_checks_is_a_400() -> None:
    stored = _stored([{"role": "robot", "content": "hi"}])
    with pytest.raises(ApiError) as caught:
        prepared(stored)
    assert caught.value.status == 400 and "role" in caught.value.message
    assert EMPTY.items == () and "prepared" not in stored.derived


def test_the_recent_records_drop_the_least_used_past_their_limit() -> None:
    recent = RecentResponses(limit=100)
    records = {name: _stored([]) for name in "abc"}
    recent.put("a", (1, 40, 1), records["a"])
    recent.put("b", (2, 40, 1), records["b"])
    assert recent.get("a", (1, 40, 1)) is records["a"]  # a is the most recently used now
    recent.put("c", (3, 40, 1), records["c"])
    assert recent.get("b", (2, 40, 1)) is None and len(recent) == 2
    assert recent.get("a", (1, 40, 2)) is None, "a file changed since: not served from memory"
    recent.put("big", (4, 101, 1), records["a"])
    assert recent.get("big", (4, 101, 1)) is None, "a record over the whole limit is not kept"
    recent.forget("c")
    assert recent.get("c", (3, 40, 1)) is None and len(recent) == 1


@pytest.fixture
def client(scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any]) -> Any:
    agent_files.write("echo", scripted(echo, repeat=True))
    return serve_app([agent_files.root], api_keys=["key-one", "key-two"]).openai("key-one")


def _edit(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    record = json.loads(path.read_text())
    change(record)
    path.write_text(json.dumps(record))  # in place: the same file, another size


def test_a_record_edited_on_disk_is_read_again(client: Any, home: Path) -> None:
    first = client.responses.create(model="echo", input="one")
    second = client.responses.create(model="echo", input="two", previous_response_id=first.id)
    assert client.responses.create(model="echo", input="x", previous_response_id=second.id).output_text == (
        "one | two | x"
    )
    (path,) = written(home, second.id)

    def rewrite(record: dict[str, Any]) -> None:
        record["messages"][0]["content"] = "edited by hand"
        record.pop("rendered", None)

    _edit(path, rewrite)
    after = client.responses.create(model="echo", input="x", previous_response_id=second.id)
    assert after.output_text == "edited by hand | two | x"


def test_a_record_replaced_damaged_or_deleted_on_disk_is_not_served_from_memory(
    client: Any, home: Path
) -> None:
    first = client.responses.create(model="echo", input="one")
    other = client.responses.create(model="echo", input="other")
    written(home, first.id, other.id)
    folder = home / "serve" / "responses"
    path = folder / f"{first.id}.json"
    (folder / "swap.json").write_bytes((folder / f"{other.id}.json").read_bytes())
    (folder / "swap.json").replace(path)  # another file under its name (the other's record)
    assert client.responses.retrieve(first.id).output_text == "other"
    path.write_bytes(path.read_bytes()[:50])
    with pytest.raises(openai.InternalServerError) as caught:
        client.responses.create(model="echo", input="x", previous_response_id=first.id)
    assert first.id in caught.value.body["message"] and "damaged" in caught.value.body["message"]
    path.unlink()
    with pytest.raises(openai.NotFoundError) as missing:
        client.responses.create(model="echo", input="x", previous_response_id=first.id)
    assert missing.value.body["param"] == "previous_response_id"


def test_a_record_in_memory_is_still_only_its_keys(client: Any, home: Path) -> None:
    mine = client.responses.create(model="echo", input="mine")
    client.responses.create(model="echo", input="again", previous_response_id=mine.id)  # in memory
    theirs = client.with_options(api_key="key-two")
    for attempt in (
        lambda: theirs.responses.retrieve(mine.id),
        lambda: theirs.responses.create(model="echo", input="x", previous_response_id=mine.id),
    ):
        with pytest.raises(openai.NotFoundError):
            attempt()
    assert client.responses.retrieve(mine.id).output_text == "mine"


def test_a_continuation_reads_a_record_it_just_stored_from_memory(
    client: Any, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = client.responses.create(model="echo", input="one")
    read: list[str] = []
    real = Path.read_bytes

    def counted(path: Path) -> bytes:
        if path.parent.name == "responses":
            read.append(path.stem)
        return real(path)

    monkeypatch.setattr(Path, "read_bytes", counted)
    follow = client.responses.create(model="echo", input="two", previous_response_id=first.id)
    assert follow.output_text == "one | two" and read == []
    (path,) = written(home, first.id)
    path.write_bytes(real(path) + b" ")  # the same record, its file changed: read again
    again = client.responses.create(model="echo", input="three", previous_response_id=first.id)
    assert again.output_text == "one | three" and first.id in read


def _lookup_or_echo(body: dict[str, Any]) -> dict[str, Any]:
    last = body["messages"][-1]
    if last["role"] == "user" and last["content"] == "U: call":
        return {"tool_calls": [{"id": "call_look1", "name": "lookup", "arguments": '{"q": "x"}'}]}
    return echo(body)


LOOKUP = {"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {}}}


def test_a_continuation_restored_from_the_kept_form_is_what_a_fresh_one_restores(
    scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any], home: Path
) -> None:
    server = scripted(_lookup_or_echo, repeat=True)
    agent_files.write("wrap", server, 'prompts:\n  user: "U: {{ input }}"')
    before = serve_app([agent_files.root])
    client = before.openai()
    called = client.responses.create(model="wrap", input="call", tools=[LOOKUP])
    assert called.output[-1].type == "function_call"
    answer = [{"type": "function_call_output", "call_id": "call_look1", "output": "found"}]
    answered = client.responses.create(
        model="wrap", input=answer, previous_response_id=called.id, tools=[LOOKUP]
    )
    last = client.responses.create(model="wrap", input="two", previous_response_id=answered.id)
    assert last.output_text == "U: call | U: two"

    def transcript(response: Any) -> list[dict[str, Any]]:
        session_id = response.model_extra["runner"]["session_id"]
        lines = find_transcript(home, session_id).read_text(encoding="utf-8").splitlines()
        records = [json.loads(line) for line in lines[1:]]  # the header names the session
        timed = ("time", "duration_s", "first_token_s")  # the new answer's own timing
        return [{k: v for k, v in r.items() if k not in timed} for r in records]

    kept = [  # the first continuation of ``last`` restores what its own request kept, the second too
        client.responses.create(model="wrap", input="x", previous_response_id=last.id, store=False)
        for _ in range(2)
    ]
    sent = server.requests[-2:]
    before.stop()
    after = serve_app([agent_files.root]).openai()  # nothing in memory: made from the record
    fresh = after.responses.create(model="wrap", input="x", previous_response_id=last.id, store=False)
    assert [r.output_text for r in (*kept, fresh)] == ["U: call | U: two | U: x"] * 3
    assert sent[0]["messages"] == sent[1]["messages"] == server.requests[-1]["messages"]
    records = [transcript(response) for response in (*kept, fresh)]
    assert records[0] == records[1] == records[2]
    roles = [(r.get("role"), r.get("name")) for r in records[0] if r["type"] == "message"]
    assert ("tool", "lookup") in roles and roles.count(("user", None)) == 3
