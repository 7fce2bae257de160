"""Web pages against ``runner serve``: simple cross-site POSTs, DNS rebinding and foreign origins are refused.

Any page the user opens can POST ``text/plain`` or a form to 127.0.0.1 without a CORS preflight,
and with DNS rebinding (its own name resolving to 127.0.0.1) it can read the answers too. Each test
performs the attack and checks the agent did not run (the scripted model got no request).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

CHAT = {"model": "hello", "messages": [{"role": "user", "content": "run your tools"}]}
BODY = json.dumps(CHAT).encode()


@pytest.fixture
def model(scripted: Callable[..., Any]) -> Any:
    return scripted([{"content": "hello"}], repeat=True)


@pytest.fixture
def served(model: Any, agent_files: Any, serve_app: Callable[..., Any]) -> Any:
    agent_files.write("hello", model)
    return serve_app([agent_files.root], allowed_origins=["http://localhost:3000"])


def error_of(response: httpx.Response) -> dict[str, Any]:
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    return dict(body["error"])


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "text/plain;charset=UTF-8",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        None,
    ],
)
def test_a_post_a_page_can_send_without_preflight_is_415(
    served: Any, model: Any, content_type: str | None
) -> None:
    headers = {"content-type": content_type} if content_type else {}
    with served.http() as http:
        response = http.post("/v1/chat/completions", content=BODY, headers=headers)
    assert response.status_code == 415, response.text
    assert error_of(response)["code"] == "unsupported_media_type"
    assert model.requests == []


def test_a_form_post_from_a_page_is_refused(served: Any, model: Any) -> None:
    with served.http() as http:
        response = http.post("/v1/chat/completions", data={json.dumps(CHAT): ""})  # form-encoded
    assert response.status_code == 415 and model.requests == []


@pytest.mark.parametrize(
    "host", ["evil.example", "evil.example:8000", "127.0.0.1.nip.io", "localhost.evil.example"]
)
def test_a_rebound_host_name_is_refused_without_keys(served: Any, model: Any, host: str) -> None:
    with served.http() as http:
        chat = http.post("/v1/chat/completions", json=CHAT, headers={"host": host})
        models = http.get("/v1/models", headers={"host": host})
    for response in (chat, models):
        assert response.status_code == 403, response.text
        assert error_of(response)["code"] == "host_not_allowed"
    assert "hello" not in models.text and model.requests == []


@pytest.mark.parametrize(
    "host", ["localhost", "LOCALHOST:8000", "127.0.0.1", "127.0.0.2:1", "[::1]:8000", "app.localhost"]
)
def test_loopback_host_names_are_answered(served: Any, host: str) -> None:
    with served.http() as http:
        response = http.get("/v1/models", headers={"host": host})
    assert response.status_code == 200, response.text


def test_allowed_hosts_are_answered_and_others_still_refused(
    model: Any, agent_files: Any, serve_app: Callable[..., Any]
) -> None:
    agent_files.write("hello", model)
    served = serve_app([agent_files.root], allowed_hosts=["mybox.lan"])
    with served.http() as http:
        assert http.get("/v1/models", headers={"host": "mybox.lan:8000"}).status_code == 200
        assert http.get("/v1/models", headers={"host": "evil.example"}).status_code == 403


def test_with_keys_any_host_is_answered_but_only_json(
    model: Any, agent_files: Any, serve_app: Callable[..., Any]
) -> None:
    agent_files.write("hello", model)
    served = serve_app([agent_files.root], api_keys=["k1"])
    auth = {"authorization": "Bearer k1", "host": "runner.example.org"}
    with served.http() as http:
        assert http.post("/v1/chat/completions", json=CHAT, headers=auth).status_code == 200
        plain = http.post(
            "/v1/chat/completions", content=BODY, headers={**auth, "content-type": "text/plain"}
        )
    assert plain.status_code == 415 and len(model.requests) == 1


@pytest.mark.parametrize(
    "origin", ["http://evil.example", "null", "http://localhost:3001", "http://localhost"]
)
def test_a_foreign_origin_is_refused(served: Any, model: Any, origin: str) -> None:
    with served.http() as http:
        chat = http.post("/v1/chat/completions", json=CHAT, headers={"origin": origin})
        models = http.get("/v1/models", headers={"origin": origin})
    for response in (chat, models):
        assert response.status_code == 403, response.text
        assert error_of(response)["code"] == "origin_not_allowed"
        assert "access-control-allow-origin" not in response.headers
    assert model.requests == []


def test_a_foreign_origin_gets_no_preflight(served: Any) -> None:
    with httpx.Client(base_url=served.url) as http:  # a preflight answer is not an API answer
        response = http.options(
            "/v1/chat/completions",
            headers={"origin": "http://evil.example", "access-control-request-method": "POST"},
        )
    assert response.status_code == 403
    assert "access-control-allow-origin" not in response.headers


def test_an_allowed_origin_gets_cors_with_its_preflight(served: Any, model: Any) -> None:
    origin = "http://localhost:3000"
    with httpx.Client(base_url=served.url) as http:
        preflight = http.options(
            "/v1/chat/completions",
            headers={
                "origin": origin,
                "access-control-request-method": "POST",
                "access-control-request-headers": "authorization, content-type, x-stainless-os",
                "access-control-request-private-network": "true",
            },
        )
    assert preflight.status_code == 200, preflight.text
    assert preflight.headers["access-control-allow-origin"] == origin
    assert "POST" in preflight.headers["access-control-allow-methods"]
    allowed = {h.strip().lower() for h in preflight.headers["access-control-allow-headers"].split(",")}
    assert {"authorization", "content-type", "x-stainless-os"} <= allowed
    assert "origin" in preflight.headers.get("vary", "").lower()
    assert preflight.headers["access-control-allow-private-network"] == "true"
    with served.http() as http:
        answer = http.post("/v1/chat/completions", json=CHAT, headers={"origin": origin})
        stream = http.post("/v1/chat/completions", json={**CHAT, "stream": True}, headers={"origin": origin})
    for response in (answer, stream):
        assert response.status_code == 200 and response.headers["access-control-allow-origin"] == origin
    assert answer.json()["choices"][0]["message"]["content"] == "hello"
    assert len(model.requests) == 2


def test_the_openai_sdk_still_works(served: Any) -> None:
    answer = served.openai().chat.completions.create(model="hello", messages=CHAT["messages"])
    assert answer.choices[0].message.content == "hello"
