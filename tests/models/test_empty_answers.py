"""An answer with ``choices: []`` only is an error, streamed or not, on both paths (issue 23, item 25).

Before, a stream of chunks without a choice (and ``[DONE]``) was an empty success: ``run`` exited
0 printing nothing, a batch line was ``ok`` (so a rerun skipped it), serve answered 200 with empty
content; without streaming the same answer was rightly an error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from runner.errors import ModelError
from runner.models.base import Model, Request
from runner.testing import ScriptedServer

Serve = Callable[..., ScriptedServer]
Connect = Callable[..., Model]

USAGE = {"prompt_tokens": 5, "completion_tokens": 0, "total_tokens": 5}


def no_choices() -> dict[str, Any]:
    """A script entry: a stream of chunks with ``choices: []`` only, or a whole answer without any."""
    base = {"id": "chatcmpl-x", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    whole = {"id": "chatcmpl-x", "object": "chat.completion", "created": 0, "model": "m"}
    return {
        "frames": [{**base, "choices": []}, {**base, "choices": [], "usage": USAGE}],
        "body": {**whole, "choices": [], "usage": USAGE},
    }


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
async def test_an_answer_without_choices_is_a_model_error(
    serve: Serve, connect: Connect, stream: bool
) -> None:
    server = serve([no_choices()])
    model = connect(server.base_url)
    request = Request(
        model="openai/scripted-model", messages=[{"role": "user", "content": "Hi"}], stream=stream
    )
    with pytest.raises(ModelError) as caught:
        if stream:
            [event async for event in model.stream(request)]
        else:
            await model.complete(request)
    assert "no choice" in caught.value.message or "no choices" in caught.value.message
    server.assert_complete()


async def test_an_empty_answer_with_a_finish_is_still_an_answer(serve: Serve, connect: Connect) -> None:
    """A model may answer nothing: a choice with empty content and a finish reason is that answer."""
    server = serve([{"content": ""}])
    model = connect(server.base_url)
    request = Request(model="openai/scripted-model", messages=[{"role": "user", "content": "Hi"}])
    events = [event async for event in model.stream(request)]
    reply = events[-1].reply  # type: ignore[union-attr]
    assert reply.content is None and reply.finish_reason == "stop"
