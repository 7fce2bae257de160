"""The fast path of a plain blocking JSON-RPC ``SendMessage`` (``runner.serve.a2a.fast``): the same
requests sent through it and through the SDK's dispatcher give the same JSON (ids and timestamps
aside), its tasks are the SDK's to read, list and cancel, and what it does not take goes to the SDK."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from a2a.types import a2a_pb2 as pb
from google.protobuf.json_format import ParseDict

from runner.serve.a2a import fast

pytestmark = pytest.mark.anyio

V1 = {"A2A-Version": "1.0"}
IDS = {"id", "contextId", "taskId", "messageId", "artifactId"}


class Paths:
    """Which path answers: ``sdk`` sends every request to the SDK; ``taken`` counts the fast ones."""

    def __init__(self) -> None:
        self.sdk = False
        self.taken = 0

    def plain_send(self, body: bytes, version: str | None) -> Any:
        plain = None if self.sdk else ORIGINAL(body, version)
        self.taken += plain is not None
        return plain


ORIGINAL = fast.plain_send


@pytest.fixture
def paths(monkeypatch: pytest.MonkeyPatch) -> Iterator[Paths]:
    chosen = Paths()
    monkeypatch.setattr(fast, "plain_send", chosen.plain_send)
    yield chosen


def _same_ids(value: Any, seen: dict[str, str] | None = None) -> Any:
    """``value`` with each id replaced by the order it first appears in, timestamps by ``T``."""
    seen = {} if seen is None else seen
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key in IDS and isinstance(item, str) and not item.startswith("m-"):
                out[key] = seen.setdefault(item, f"id{len(seen)}")
            elif key == "timestamp":
                out[key] = "T"
            else:
                out[key] = _same_ids(item, seen)
        return out
    if isinstance(value, list):
        return [_same_ids(item, seen) for item in value]
    return value


def _rpc(message: dict[str, Any], rpc_id: Any = 1, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rpc_id, "method": "SendMessage", "params": {"message": message, **params}}


def _text(text: str = "hi", **more: Any) -> dict[str, Any]:
    return {"messageId": f"m-{uuid.uuid4().hex[:8]}", "role": "ROLE_USER", "parts": [{"text": text}], **more}


async def _both(http: httpx.AsyncClient, paths: Paths, body: Any, headers: dict[str, str] = V1) -> list[Any]:
    """``body`` sent on the fast path, then to the SDK: each answer's status, type and JSON."""
    answers = []
    for sdk in (False, True):
        paths.sdk = sdk
        sent = body if isinstance(body, bytes) else json.dumps(body).encode()
        answer = await http.post("", content=sent, headers={"content-type": "application/json", **headers})
        answers.append((answer.status_code, answer.headers["content-type"], _same_ids(answer.json())))
    paths.sdk = False
    return answers


def _client(served: Any, name: str, key: str | None = None) -> httpx.AsyncClient:
    headers = {"authorization": f"Bearer {key}"} if key else {}
    return httpx.AsyncClient(base_url=served.agent_url(name), headers=headers, timeout=30)


PLAIN = [
    _rpc(_text()),
    _rpc(_text(), rpc_id="call-7"),
    _rpc({**_text(), "parts": [{"text": "two"}, {"text": "parts", "mediaType": "text/plain"}]}),
    _rpc(_text(), configuration={"acceptedOutputModes": ["text/plain"], "historyLength": 1}),
    _rpc(_text(), configuration={"historyLength": 0, "returnImmediately": False}),
    _rpc({**_text(), "role": "ROLE_AGENT"}),
]


@pytest.mark.parametrize(
    "body", PLAIN, ids=["plain", "string id", "parts", "history 1", "history 0", "agent"]
)
async def test_a_plain_send_answers_what_the_sdk_answers(agents, scripted, serve, paths, body) -> None:
    served = serve([agents.write("helper", scripted(lambda _: {"content": "Hello there."}))])
    async with _client(served, "helper") as http:
        fast_answer, sdk_answer = await _both(http, paths, body)
    assert paths.taken == 1
    assert fast_answer == sdk_answer
    assert fast_answer[2]["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert fast_answer[2]["result"]["task"]["artifacts"][0]["parts"] == [
        {"text": "Hello there.", "mediaType": "text/plain"}
    ]


async def test_the_bytes_are_the_sdks_and_the_task_is_the_sdks_to_read_list_and_cancel(
    agents, scripted, serve, paths
) -> None:
    served = serve([agents.write("helper", scripted(lambda _: {"content": "Hello there."}))])
    async with _client(served, "helper") as http:
        raw, body = [], _rpc(_text("same"), rpc_id=5)
        for sdk in (False, True):
            paths.sdk = sdk
            raw.append((await http.post("", json=body, headers=V1)).text)
        fast_task, sdk_task = (json.loads(text)["result"]["task"] for text in raw)
        # byte for byte, once the ids and the timestamp are the same
        swapped = raw[0]
        for key in ("id", "contextId"):
            swapped = swapped.replace(fast_task[key], sdk_task[key])
        swapped = swapped.replace(
            fast_task["artifacts"][0]["artifactId"], sdk_task["artifacts"][0]["artifactId"]
        )
        swapped = swapped.replace(fast_task["status"]["timestamp"], sdk_task["status"]["timestamp"])
        assert swapped == raw[1]
        assert paths.taken == 1
        for task in (fast_task, sdk_task):
            got = await http.post(
                "",
                json={"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task["id"]}},
                headers=V1,
            )
            assert _same_ids(got.json()["result"]) == _same_ids(task)
            cancel = {"jsonrpc": "2.0", "id": 3, "method": "CancelTask", "params": {"id": task["id"]}}
            refused = (await http.post("", json=cancel, headers=V1)).json()["error"]
            assert refused["code"] == -32002 and "cancel" in refused["message"].lower(), refused
        listed = await http.post(
            "", json={"jsonrpc": "2.0", "id": 4, "method": "ListTasks", "params": {}}, headers=V1
        )
        ids = {task["id"] for task in listed.json()["result"]["tasks"]}
        assert {fast_task["id"], sdk_task["id"]} <= ids


async def test_a_context_continued_on_either_path_is_the_same_conversation(
    agents, scripted, serve, paths
) -> None:
    model = scripted(lambda body: {"content": f"turn {len(body['messages'])}"})
    served = serve([agents.write("memo", model)])
    answers, one, two = [], _text("one"), _text("two")
    async with _client(served, "memo") as http:
        for sdk in (False, True):
            paths.sdk = sdk
            first = (await http.post("", json=_rpc(one), headers=V1)).json()["result"]["task"]
            again = _rpc({**two, "contextId": first["contextId"]})
            second = (await http.post("", json=again, headers=V1)).json()["result"]["task"]
            assert second["contextId"] == first["contextId"] and second["id"] != first["id"]
            answers.append(_same_ids([first, second]))
    assert paths.taken == 2
    assert answers[0] == answers[1]
    assert (
        answers[0][1]["artifacts"][0]["parts"][0]["text"] == "turn 3"
    )  # the model saw the first turn (user, assistant, user)


BAD = {
    "unknown context": (
        _rpc(_text(contextId="20250101-000000-0123456789ab")),
        -32602,
        "no conversation '20250101-000000-0123456789ab' (unknown, expired, or another key's)",
    ),
    "a context not of the store's shape": (
        _rpc(_text(contextId="../../etc/passwd")),
        -32602,
        "no conversation",
    ),
    "no text": (_rpc(_text("   ")), -32602, "the message has no text: send a text or data part"),
    "negative history": (_rpc(_text(), configuration={"historyLength": -1}), -32602, "history"),
}


@pytest.mark.parametrize("case", list(BAD))
async def test_bad_input_it_takes_is_refused_with_the_sdks_error(
    agents, scripted, serve, paths, case
) -> None:
    body, code, said = BAD[case]
    model = scripted([])
    served = serve([agents.write("memo", model)])
    async with _client(served, "memo") as http:
        fast_answer, sdk_answer = await _both(http, paths, body)
    assert paths.taken == 1
    assert fast_answer == sdk_answer
    error = fast_answer[2]["error"]
    assert error["code"] == code and said in error["message"], error
    assert model.requests == []  # nothing ran


async def test_another_keys_context_is_refused_on_both_paths(agents, scripted, serve, paths) -> None:
    served = serve(
        [agents.write("memo", scripted(lambda _: {"content": "Hi A."}))], api_keys=["key-a", "key-b"]
    )
    async with _client(served, "memo", "key-a") as mine, _client(served, "memo", "key-b") as theirs:
        task = (await mine.post("", json=_rpc(_text()), headers=V1)).json()["result"]["task"]
        fast_answer, sdk_answer = await _both(theirs, paths, _rpc(_text(contextId=task["contextId"])))
    assert paths.taken == 2
    assert fast_answer == sdk_answer
    assert "no conversation" in fast_answer[2]["error"]["message"]


async def test_a_model_that_fails_fails_the_task_alike(agents, scripted, serve, paths) -> None:
    broken = {"status": 400, "error": "the scripted model refuses"}
    served = serve([agents.write("broken", scripted([broken, broken]))])
    async with _client(served, "broken") as http:
        fast_answer, sdk_answer = await _both(http, paths, _rpc(_text()))
    assert paths.taken == 1
    assert fast_answer == sdk_answer
    status = fast_answer[2]["result"]["task"]["status"]
    assert status["state"] == "TASK_STATE_FAILED"
    assert "the scripted model refuses" in status["message"]["parts"][0]["text"]


NOT_TAKEN = {
    "another method": {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendStreamingMessage",
        "params": {"message": _text()},
    },
    "a 0.3 method": {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": _text()}},
    "a file part": _rpc({**_text(), "parts": [{"raw": "aGk=", "mediaType": "image/png"}]}),
    "no message id": _rpc({"role": "ROLE_USER", "parts": [{"text": "hi"}]}),
    "an empty message id": _rpc({**_text(), "messageId": ""}),
    "no role": _rpc({"messageId": "m-1", "parts": [{"text": "hi"}]}),
    "a role by number": _rpc({**_text(), "role": 1}),
    "a role as a list": _rpc({**_text(), "role": ["ROLE_USER"]}),
    "a part as text": _rpc({**_text(), "parts": ["hi"]}),
    "a configuration of null": _rpc(_text(), configuration=None),
    "no parts": _rpc({**_text(), "parts": []}),
    "a part's metadata": _rpc({**_text(), "parts": [{"text": "hi", "metadata": {"a": 1}}]}),
    "snake case": _rpc({"message_id": "m-1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}),
    "a task id": _rpc(_text(taskId="t-1")),
    "return immediately": _rpc(_text(), configuration={"returnImmediately": True}),
    "a push config": _rpc(_text(), configuration={"taskPushNotificationConfig": {"url": "http://x"}}),
    "a history length as text": _rpc(_text(), configuration={"historyLength": "1"}),
    "a history length past int32": _rpc(_text(), configuration={"historyLength": 2**31}),
    "metadata": _rpc(_text(), metadata={"a": 1}),
    "a tenant": _rpc(_text(), tenant="t"),
    "a boolean id": _rpc(_text(), rpc_id=True),
    "no id": {"jsonrpc": "2.0", "method": "SendMessage", "params": {"message": _text()}},
    "jsonrpc 1.0": {**_rpc(_text()), "jsonrpc": "1.0"},
    "an extra member": {**_rpc(_text()), "extra": 1},
    "params as a list": {**_rpc(_text()), "params": [1]},
    "a lone surrogate": json.dumps(_rpc(_text("\ud800"))).encode(),
    "not json": b"{not json",
    "a list": b"[]",
}


@pytest.mark.parametrize("case", list(NOT_TAKEN))
def test_what_it_does_not_take_is_left_to_the_sdk(case: str) -> None:
    body = NOT_TAKEN[case]
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    assert fast.plain_send(raw, "1.0") is None


@pytest.mark.parametrize("version", [None, "", "0.3", "1.1", "2.0"])
def test_another_protocol_version_is_left_to_the_sdk(version: str | None) -> None:
    assert fast.plain_send(json.dumps(PLAIN[0]).encode(), version) is None


@pytest.mark.parametrize("body", PLAIN)
def test_what_it_takes_parses_as_the_sdk_parses_it_with_every_required_field(body: dict[str, Any]) -> None:
    from a2a.utils.proto_utils import validate_proto_required_fields

    taken = fast.plain_send(json.dumps(body).encode(), "1.0")
    assert taken is not None
    rpc_id, params = taken
    assert rpc_id == body["id"]
    assert params == ParseDict(body["params"], pb.SendMessageRequest(), ignore_unknown_fields=True)
    validate_proto_required_fields(params)


@pytest.mark.parametrize(
    "case", ["a file part", "no message id", "a 0.3 method", "not json", "a lone surrogate"]
)
async def test_what_it_leaves_the_sdk_answers_as_before(agents, scripted, serve, paths, case) -> None:
    served = serve([agents.write("memo", scripted([]))])
    async with _client(served, "memo") as http:
        fast_answer, sdk_answer = await _both(http, paths, NOT_TAKEN[case])
    assert paths.taken == 0
    assert fast_answer == sdk_answer
    assert "error" in fast_answer[2], fast_answer


async def test_the_sdk_clients_blocking_send_takes_the_fast_path(agents, scripted, serve, paths) -> None:
    from tests.a2a.conftest import sdk_client
    from tests.a2a.test_a2a_serve import answer_of, collect, message

    served = serve([agents.write("helper", scripted([{"content": "Hello from helper."}]))])
    client = await sdk_client(served.agent_url("helper"), streaming=False)
    (event,) = await collect(client, message("hi"))
    assert event.task.status.state == pb.TaskState.TASK_STATE_COMPLETED
    assert answer_of(event.task) == "Hello from helper."
    assert paths.taken == 1
    got = await client.get_task(pb.GetTaskRequest(id=event.task.id))
    assert got.status.state == pb.TaskState.TASK_STATE_COMPLETED and answer_of(got) == "Hello from helper."
    await client.close()
