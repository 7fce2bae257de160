"""Choosing the implementation for a ``model:`` section, and building requests."""

from __future__ import annotations

import subprocess
import sys

from runner.agentfile.config import ModelConfig
from runner.models.factory import build_request, make_model
from runner.models.litellm_model import LiteLLMModel
from runner.models.openai_compat import OpenAICompatModel


def test_openai_model_with_api_base_takes_the_httpx_fast_path() -> None:
    model = make_model(ModelConfig(id="openai/qwen3", api_base="http://127.0.0.1:1/v1", retries=4))
    assert isinstance(model.primary, OpenAICompatModel)
    assert model.retries == 4
    assert model.name == "openai/qwen3"


def test_other_models_and_disabled_fast_path_go_through_litellm() -> None:
    assert isinstance(make_model(ModelConfig(id="anthropic/claude-3-5-haiku-latest")).primary, LiteLLMModel)
    assert isinstance(make_model(ModelConfig(id="openai/gpt-4o-mini")).primary, LiteLLMModel)
    spec = ModelConfig(id="openai/qwen3", api_base="http://127.0.0.1:1/v1")
    assert isinstance(make_model(spec, fast_path=False).primary, LiteLLMModel)


def test_fallbacks_take_only_their_id() -> None:
    spec = ModelConfig(
        id="openai/local", api_base="http://127.0.0.1:1/v1", fallbacks=("openai/gpt-4o-mini", "ollama/llama3")
    )
    model = make_model(spec)
    assert [type(m).__name__ for m in model.fallbacks] == ["LiteLLMModel", "LiteLLMModel"]
    assert [m.name for m in model.fallbacks] == ["openai/gpt-4o-mini", "ollama/llama3"]
    assert all(getattr(m, "api_base", None) is None for m in model.fallbacks)


def test_build_request_carries_spec_parameters_and_params_win() -> None:
    spec = ModelConfig(
        id="m", temperature=0.3, max_tokens=100, timeout_s=9, params={"max_tokens": 50, "seed": 1}
    )
    messages = [{"role": "user", "content": "hi"}]
    request = build_request(spec, messages, [])
    assert request.params == {"timeout": 9, "temperature": 0.3, "max_tokens": 50, "seed": 1}
    assert request.messages is messages  # passed through, never copied
    assert request.tools is None
    assert request.stream is True
    assert build_request(ModelConfig(id="m", stream=False), messages).stream is False
    assert build_request(spec, messages, stream=False).stream is False


def test_fast_path_never_imports_litellm() -> None:
    code = (
        "import sys\n"
        "from runner.models.factory import make_model\n"
        "from runner.agentfile.config import ModelConfig\n"
        "make_model(ModelConfig(id='openai/x', api_base='http://127.0.0.1:1/v1'))\n"
        "import runner.testing\n"
        "assert 'litellm' not in sys.modules, 'litellm was imported'\n"
        "assert 'openai' not in sys.modules, 'openai was imported'\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def test_importing_the_models_package_imports_neither_httpx_nor_litellm() -> None:
    code = "import sys, runner.models, runner.testing\nassert not {'httpx', 'litellm'} & set(sys.modules)\n"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
