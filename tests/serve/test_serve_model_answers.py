"""`runner serve` with a model answer that has no choices, or that never ends (issue 23, items 24, 25).

Before, a stream of `choices: []` chunks was answered 200 with empty content, and a dripping
stream kept the request going forever.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from runner.testing import ScriptedServer


def no_choices() -> dict[str, Any]:
    base = {"id": "chatcmpl-x", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    return {"frames": [{**base, "choices": []}]}


def test_an_answer_without_choices_is_a_502_not_an_empty_200(
    scripted: Callable[..., ScriptedServer], agent_files: Any, serve_app: Callable[..., Any]
) -> None:
    server = scripted([no_choices()])
    agent_files.write("empty", server)
    served = serve_app([agent_files.root])
    with served.http() as http:
        body = {"model": "empty", "messages": [{"role": "user", "content": "Hi"}]}
        response = http.post("/v1/chat/completions", json=body)
    assert response.status_code == 502, response.text
    assert "has no choices" in response.json()["error"]["message"]


def test_a_stream_that_never_ends_ends_at_model_total_timeout_s(
    scripted: Callable[..., ScriptedServer],
    agent_files: Any,
    serve_app: Callable[..., Any],
    check_stream: Callable[..., Any],
) -> None:
    server = scripted([{"content": "x " * 1000, "chunk_delay_s": 0.2}], chunks=1000)
    agent_files.write("dripper", server, model="total_timeout_s: 1")
    served = serve_app([agent_files.root])
    with served.http() as http:
        body = {"model": "dripper", "messages": [{"role": "user", "content": "Hi"}], "stream": True}
        with http.stream("POST", "/v1/chat/completions", json=body) as response:
            assert response.status_code == 200
            raw = response.read()
    result = check_stream(raw)
    assert result.finish_reason == "stop"
    assert "did not end within 1 s (model.total_timeout_s)" in result.content
