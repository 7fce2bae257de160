"""A refused connection names the endpoint on both paths (issue 23, item 21: litellm's omitted it)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from runner.errors import ModelError
from runner.models.base import Model, Request


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
async def test_a_refused_connection_names_the_api_base(
    connect: Callable[..., Model], closed_port: int, stream: bool
) -> None:
    api_base = f"http://127.0.0.1:{closed_port}/v1"
    model = connect(api_base)
    request = Request(
        model="openai/scripted-model", messages=[{"role": "user", "content": "Hi"}], stream=stream
    )
    with pytest.raises(ModelError) as caught:
        if stream:
            [event async for event in model.stream(request)]
        else:
            await model.complete(request)
    assert caught.value.message.startswith(f"openai/scripted-model: cannot connect to {api_base}")
    assert caught.value.hint == "is the server running?"
    assert caught.value.retryable
    # the address is said once, as the URL (serve replaces URLs before a client sees the error)
    assert caught.value.message.count(str(closed_port)) == 1
