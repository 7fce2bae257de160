"""Build the ``Model`` an agent's ``model:`` section asks for, and the ``Request`` of one step.

An ``openai/<name>`` model with an ``api_base`` (Ollama, vLLM, llama.cpp, LM Studio, any
OpenAI-compatible server) goes to ``OpenAICompatModel``, a thin httpx client, so that ``runner run``
never pays for importing litellm (SPEC section 14); every other id goes to ``LiteLLMModel``.
Both are imported only here, and only when needed.

Fallbacks take only their id from ``model.fallbacks``: they do not inherit ``api_base`` or
``api_key`` (a fallback is usually another provider, reached with its own usual key variable), so an
``openai/...`` fallback goes through litellm to OpenAI itself. They share ``timeout_s`` and
``total_timeout_s``.
"""

from __future__ import annotations

from typing import Any

from runner.agentfile.config import ModelConfig
from runner.models.base import Model, Request
from runner.models.resilient import ResilientModel

__all__ = ["build_request", "make_model", "model_for"]


def model_for(
    model_id: str,
    *,
    api_base: str | None = None,
    api_key: str | None = None,
    timeout_s: float = 120.0,
    fast_path: bool = True,
) -> Model:
    """One model, no retries: the httpx fast path for ``openai/`` ids with an ``api_base``, else litellm."""
    if fast_path and api_base and model_id.startswith("openai/"):
        from runner.models.openai_compat import OpenAICompatModel

        return OpenAICompatModel(model_id, api_base=api_base, api_key=api_key, timeout_s=timeout_s)
    from runner.models.litellm_model import LiteLLMModel

    return LiteLLMModel(model_id, api_base=api_base, api_key=api_key, timeout_s=timeout_s)


def make_model(spec: ModelConfig, *, fast_path: bool = True, backoff_s: float = 0.5) -> ResilientModel:
    """The agent's model with its retries and fallbacks (fallbacks take only the id; see the module doc)."""
    primary = model_for(
        spec.id, api_base=spec.api_base, api_key=spec.api_key, timeout_s=spec.timeout_s, fast_path=fast_path
    )
    fallbacks = [
        model_for(fallback, timeout_s=spec.timeout_s, fast_path=fast_path) for fallback in spec.fallbacks
    ]
    return ResilientModel(
        primary,
        fallbacks,
        retries=spec.retries,
        backoff_s=backoff_s,
        max_wait_s=spec.timeout_s,
        total_timeout_s=spec.total_bound_s,
    )


def model_params(spec: ModelConfig | None) -> dict[str, Any]:
    """The request parameters an agent's ``model:`` asks for: temperature, max_tokens, then ``params``."""
    params: dict[str, Any] = {}
    if spec is None:
        return params
    if spec.temperature is not None:
        params["temperature"] = spec.temperature
    if spec.max_tokens is not None:
        params["max_tokens"] = spec.max_tokens
    params.update(spec.params)
    return params


def build_request(
    spec: ModelConfig,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = None,
    *,
    stream: bool | None = None,
) -> Request:
    """A request with the spec's temperature, max_tokens, timeout and ``params`` (which win)."""
    params: dict[str, Any] = {"timeout": spec.timeout_s, **model_params(spec)}
    return Request(
        model=spec.id,
        messages=messages,
        tools=tools or None,
        params=params,
        stream=spec.stream if stream is None else stream,
    )
