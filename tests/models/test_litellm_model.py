"""What only the litellm path does (the shared behaviour is in test_wire_paths.py)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from runner.errors import ModelError
from runner.models import litellm_model
from runner.models.base import Request, StreamingUnsupported
from runner.models.litellm_model import LiteLLMModel, map_litellm_error, supports_function_calling
from runner.testing import ScriptedServer

REQUEST = Request(model="m", messages=[{"role": "user", "content": "hi"}], stream=False)


def _error(kind: str, *args: str) -> Exception:
    """litellm's exception ``kind`` made from ``args`` (litellm imported by the test that needs it,
    not when the suite is collected: it takes seconds)."""
    from litellm import exceptions

    made: Exception = getattr(exceptions, kind)(*args)
    return made


@pytest.mark.parametrize(
    ("error", "status", "retryable"),
    [
        (("RateLimitError", "slow down", "openai", "m"), 429, True),
        (("InternalServerError", "boom", "openai", "m"), 500, True),
        (("ServiceUnavailableError", "later", "openai", "m"), 503, True),
        (("BadRequestError", "bad", "m", "openai"), 400, False),
        (("NotFoundError", "no model", "m", "openai"), 404, False),
        (("AuthenticationError", "no key", "openai", "m"), 401, False),
    ],
)
def test_litellm_errors_map_to_model_errors(error: tuple[str, ...], status: int, retryable: bool) -> None:
    mapped = map_litellm_error(_error(*error), "openai/m")
    assert (mapped.status, mapped.retryable) == (status, retryable)
    assert mapped.message.startswith("openai/m: ")


def test_connection_and_timeout_errors_are_retryable_without_a_status() -> None:
    for error in (
        _error("APIConnectionError", "refused", "openai", "m"),
        _error("Timeout", "slow", "m", "openai"),
    ):
        mapped = map_litellm_error(error, "openai/m")
        assert mapped.retryable and mapped.status is None and mapped.hint


def test_stream_refusal_maps_to_streaming_unsupported_only_when_streaming() -> None:
    error = _error("BadRequestError", "stream is not supported for this model", "m", "openai")
    assert isinstance(map_litellm_error(error, "m", streaming=True), StreamingUnsupported)
    assert not isinstance(map_litellm_error(error, "m"), StreamingUnsupported)


def test_unknown_errors_become_non_retryable_model_errors() -> None:
    mapped = map_litellm_error(ValueError("odd"), "m")
    assert isinstance(mapped, ModelError) and not mapped.retryable and "odd" in mapped.message


def test_function_calling_support_comes_from_litellm_model_info() -> None:
    assert supports_function_calling("gpt-4o-mini") is True
    assert supports_function_calling("openai/not-a-real-model") is None
    assert LiteLLMModel("openai/local", api_base="http://127.0.0.1:1/v1").supports_tools is True
    assert LiteLLMModel("openai/not-a-real-model").supports_tools is None


async def test_cost_is_computed_when_litellm_knows_the_price(serve: Callable[..., ScriptedServer]) -> None:
    usage = {"prompt_tokens": 1000, "completion_tokens": 100}
    server = serve([{"content": "a", "usage": usage}, {"content": "b", "usage": usage}])
    model = LiteLLMModel("openai/gpt-4o-mini", api_base=server.base_url, api_key="sk-test")
    reply = await model.complete(REQUEST)
    assert reply.usage.cost_usd is not None and reply.usage.cost_usd > 0
    streamed = [event async for event in model.stream(Request("m", REQUEST.messages))]
    assert streamed[-1].reply.usage.cost_usd == reply.usage.cost_usd  # type: ignore[union-attr]


async def test_a_model_litellm_cannot_price_is_unpriced(serve: Callable[..., ScriptedServer]) -> None:
    # what makes `runner run` say "unpriced: cost limit cannot be enforced" on this path (the CLI
    # case runs on the fast path only: tests/models/test_faults_cli.py)
    server = serve([{"content": "a", "usage": {"prompt_tokens": 1000, "completion_tokens": 100}}])
    model = LiteLLMModel("openai/my-local-llama", api_base=server.base_url, api_key="sk-test")
    reply = await model.complete(REQUEST)
    assert reply.usage.total_tokens == 1100 and reply.usage.cost_usd is None


def test_import_uses_the_local_cost_map_unless_told_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LITELLM_LOCAL_MODEL_COST_MAP", raising=False)
    monkeypatch.setattr(litellm_model, "_litellm", None)
    litellm_model._import_litellm(local_cost_map=False)
    assert "LITELLM_LOCAL_MODEL_COST_MAP" not in os.environ
    monkeypatch.setattr(litellm_model, "_litellm", None)
    litellm_model._import_litellm()
    assert os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"


def test_import_turns_off_litellms_log_copy_unless_the_user_set_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MAX_BASE64_LENGTH_FOR_LOGGING", raising=False)
    monkeypatch.setattr(litellm_model, "_litellm", None)
    litellm_model._import_litellm()
    assert os.environ["MAX_BASE64_LENGTH_FOR_LOGGING"] == "0"
    monkeypatch.setenv("MAX_BASE64_LENGTH_FOR_LOGGING", "64")
    monkeypatch.setattr(litellm_model, "_litellm", None)
    litellm_model._import_litellm()
    assert os.environ["MAX_BASE64_LENGTH_FOR_LOGGING"] == "64"


def test_litellm_reads_the_setting_the_runner_made_before_importing_it(tmp_path: Path) -> None:
    """In a fresh process: litellm's constant is 0, so its per-call copy of the history is skipped."""
    code = (
        "from runner.models.litellm_model import _import_litellm\n"
        "_import_litellm()\n"
        "from litellm.litellm_core_utils import logging_utils\n"
        "messages = [{'role': 'user', 'content': 'hi'}]\n"
        "print(logging_utils.MAX_BASE64_LENGTH_FOR_LOGGING, "
        "logging_utils.truncate_base64_in_messages(messages) is messages)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "MAX_BASE64_LENGTH_FOR_LOGGING"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["0", "True"]


async def test_a_non_streaming_call_runs_off_the_loop_and_cancels_at_once() -> None:
    """litellm's blocking call runs on a model worker thread; cancelling does not wait for the answer."""
    import asyncio
    import threading

    seen: list[str] = []
    original = litellm_model._import_litellm()

    class Spy:
        def __getattr__(self, name: str) -> object:
            return getattr(original, name)

        @staticmethod
        def completion(**kwargs: object) -> object:
            seen.append(threading.current_thread().name)
            return original.completion(**kwargs)

    with ScriptedServer([{"content": "quick"}, {"content": "slow", "delay_s": 2.0}]) as server:
        model = LiteLLMModel("openai/scripted", api_base=server.base_url, api_key="sk-test")
        litellm_model._litellm, saved = Spy(), litellm_model._litellm
        try:
            reply = await model.complete(REQUEST)
            assert reply.content == "quick"
            assert seen and seen[0].startswith("runner-model-")
            task = asyncio.create_task(model.complete(REQUEST))
            await asyncio.sleep(0.2)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        finally:
            litellm_model._litellm = saved


@pytest.mark.parametrize("stream", [False, True])
async def test_litellm_success_logging_runs_only_when_a_callback_listens(
    serve: Callable[..., ScriptedServer], monkeypatch: pytest.MonkeyPatch, stream: bool
) -> None:
    """Nobody listening: no logging payload is built; a user's callback still sees every call."""
    import litellm as litellm_module
    from litellm.litellm_core_utils.litellm_logging import Logging

    built: list[int] = []
    real = Logging.success_handler

    def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
        built.append(1)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Logging, "success_handler", counting)
    server = serve([{"content": "one"}, {"content": "two"}])
    model = LiteLLMModel("openai/scripted", api_base=server.base_url, api_key="sk-test")
    request = Request(model="m", messages=[{"role": "user", "content": "hi"}], stream=stream)

    async def ask() -> None:
        if stream:
            async for _ in model.stream(request):
                pass
        else:
            await model.complete(request)

    await ask()
    await asyncio.sleep(0.2)  # litellm logs on threads of its own
    assert built == []
    seen: list[Any] = []
    monkeypatch.setattr(
        litellm_module, "success_callback", [lambda kwargs, response, start, end: seen.append(1)]
    )
    assert isinstance(litellm_model._quiet(), contextlib.nullcontext)  # someone listens: log as litellm does
    if stream:
        return  # litellm calls plain success callbacks for whole answers only
    await ask()
    for _ in range(100):
        if seen:
            break
        await asyncio.sleep(0.02)
    assert seen, "a registered litellm callback must still be called"
