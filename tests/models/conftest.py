"""Fixtures for the model tests: scripted servers on loopback and both real wire paths."""

from __future__ import annotations

import os
import socket
from collections.abc import AsyncIterator, Callable

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from runner.models.base import Model
from runner.testing import ScriptedServer

PATHS = ("litellm", "openai_compat")


@pytest.fixture
def serve(scripted_server: Callable[..., ScriptedServer]) -> Callable[..., ScriptedServer]:
    """Scripted servers on 127.0.0.1, closed after the test (the plugin's ``scripted_server``)."""
    return scripted_server


@pytest.fixture(params=PATHS)
async def connect(request: pytest.FixtureRequest) -> AsyncIterator[Callable[..., Model]]:
    """Build a real model (litellm or the httpx fast path) for a base URL; both run the same tests."""
    models: list[Model] = []

    def make(
        base_url: str,
        model_id: str = "openai/scripted-model",
        api_key: str | None = "sk-test",
        timeout_s: float = 120.0,
    ) -> Model:
        model: Model
        if request.param == "litellm":
            from runner.models.litellm_model import LiteLLMModel

            model = LiteLLMModel(model_id, api_base=base_url, api_key=api_key, timeout_s=timeout_s)
        else:
            from runner.models.openai_compat import OpenAICompatModel

            model = OpenAICompatModel(model_id, api_base=base_url, api_key=api_key, timeout_s=timeout_s)
        models.append(model)
        return model

    yield make
    for model in models:
        await model.aclose()


@pytest.fixture
def closed_port() -> int:
    """A loopback port with nothing listening on it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
