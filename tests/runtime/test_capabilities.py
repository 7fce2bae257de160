"""`auto` decided from litellm's model data, read as data: the answers litellm itself gives.

``runner render`` reads litellm's bundled map (``runner.models.model_data``) so that it never imports
litellm; ``runner run`` asks litellm (``get_model_info``), which it imports anyway. These tests hold
the two to the same answer for real model ids, and the mode of a run to the one render shows.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runner.agentfile import load_agent
from runner.models import model_data
from runner.runtime import RuntimeSettings, build_runtime
from runner.runtime.model_source import capabilities
from runner.session.opening import first_request

#: Real ids as users write them: provider-prefixed and bare, dated, upper-case, aliases, fine-tunes,
#: Bedrock regions and routes, providers litellm does not map, and models it lists without tools.
MODEL_IDS = (
    "openai/gpt-4o-mini",
    "gpt-4o-mini",
    "openai/GPT-4O-MINI",
    "openai/gpt-4o-mini-2024-07-18",
    "openai/gpt-4o",
    "gpt-4",
    "openai/gpt-3.5-turbo",
    "openai/gpt-3.5-turbo-instruct",
    "text-completion-openai/gpt-3.5-turbo-instruct",
    "openai/o1-mini",
    "openai/o3-mini",
    "openai/gpt-4.1",
    "openai/gpt-5",
    "gpt-5-chat",
    "openai/not-a-real-model",
    "ft:gpt-3.5-turbo:my-org:custom:id",
    "anthropic/claude-3-5-haiku-latest",
    "anthropic/claude-3-5-sonnet-20241022",
    "anthropic/claude-3-7-sonnet-latest",
    "anthropic/claude-sonnet-4-20250514",
    "anthropic/claude-sonnet-4-5-20250929",
    "anthropic/claude-opus-4-1",
    "claude-sonnet-4-5",
    "claude-opus-latest",
    "claude-3-haiku-20240307",
    "gemini/gemini-2.5-pro",
    "gemini/gemini-2.5-flash",
    "gemini/gemini-2.5-pro-preview-tts",
    "gemini/gemini-1.5-flash-001",
    "vertex_ai/gemini-2.5-pro",
    "vertex_ai/gemini-3.8-flash-cyber",
    "vertex_ai/claude-3-5-sonnet@20240620",
    "groq/llama-3.3-70b-versatile",
    "mistral/mistral-large-latest",
    "mistral/codestral-latest",
    "mistral-large-latest",
    "deepseek/deepseek-chat",
    "deepseek/deepseek-reasoner",
    "deepseek-reasoner",
    "ollama/llama3.1",
    "ollama/llama3",
    "ollama/codegeex4",
    "ollama_chat/llama3.1",
    "together_ai/meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo",
    "openrouter/anthropic/claude-3.5-sonnet",
    "openrouter/deepseek/deepseek-reasoner",  # the name is mapped, for another provider
    "groq/gpt-4o-mini",
    "litellm_proxy/gpt-4o-mini",  # a proxy may use any provider's entry
    "litellm_proxy/deepseek-reasoner",
    "azure_ai/gpt-4o",
    "github/gpt-4o-mini",
    "bedrock/anthropic.claude-3-5-sonnet-20240620-v1:0",
    "bedrock/us.anthropic.claude-3-5-sonnet-20240620-v1:0",
    "bedrock/converse/anthropic.claude-3-5-sonnet-20240620-v1:0",
    "bedrock/us.deepseek.r1-v1:0",
    "bedrock/meta.llama3-70b-instruct-v1:0",
    "azure/gpt-4o",
    "azure/my-deployment",
    "fireworks_ai/accounts/fireworks/models/llama-v3p1-8b-instruct",
    "cerebras/llama3.1-8b",
    "deepinfra/meta-llama/Meta-Llama-3.1-8B-Instruct",
    "xai/grok-2",
    "hosted_vllm/meta-llama/Llama-3-8b",
    "huggingface/meta-llama/Llama-3.1-8B-Instruct",
)


def _litellm() -> Any:
    from runner.models.litellm_model import _import_litellm

    return _import_litellm()  # with the bundled map, as the runner imports it


def test_model_data_answers_as_litellm_does_for_real_model_ids() -> None:
    # the one test that imports litellm: its own answers are the reference
    from runner.models.litellm_model import supports_function_calling as asked_of_litellm

    litellm = _litellm()
    wrong = {}
    for model_id in MODEL_IDS:
        ours = model_data.supports_function_calling(model_id)
        theirs = asked_of_litellm(model_id)  # get_model_info: what `runner run` decides on
        flat = litellm.supports_function_calling(model_id)  # False also for "not mapped"
        if ours != theirs or (ours is not None and ours is not flat):
            wrong[model_id] = {"ours": ours, "get_model_info": theirs, "supports_function_calling": flat}
    assert wrong == {}
    answers = [model_data.supports_function_calling(model_id) for model_id in MODEL_IDS]
    assert answers.count(True) >= 5 and answers.count(False) >= 3 and answers.count(None) >= 5


@pytest.fixture
def no_model_data(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """As if litellm's package (and its data files) could not be found."""
    cached = (model_data._litellm_file, model_data.model_map, model_data._lowercase_keys)
    cached += (model_data.providers, model_data._rules)
    for function in cached:
        function.cache_clear()
    monkeypatch.setattr(model_data.importlib.util, "find_spec", lambda name: None)
    yield
    monkeypatch.undo()
    for function in cached:
        function.cache_clear()


@pytest.mark.usefixtures("no_model_data")
def test_without_litellms_data_every_model_is_unknown_and_the_endpoint_decides() -> None:
    assert model_data.model_map() == {}
    assert model_data.supports_function_calling("openai/gpt-4o-mini") is None
    assert model_data.supports_function_calling("deepseek/deepseek-reasoner") is None
    assert model_data.model_entry("openai/gpt-4o-mini") is None


def test_unknown_ids_and_rules() -> None:
    # not mapped at all: None (auto stays native, the endpoint decides), as litellm raises for it
    assert model_data.model_info("openai/my-local-llama") is None
    assert model_data.supports_function_calling("totally-unknown") is None
    # an alias row ({"alias_of": NAME}, e.g. claude-opus-latest) is served as the row it names
    raw = model_data._litellm_file(model_data.MODEL_MAP_FILE)
    pointers = {
        name: row["alias_of"]
        for name, row in raw.items()
        if "alias_of" in row and "alias_of" not in raw.get(row["alias_of"], {"alias_of": "dangling"})
    }
    assert pointers, "litellm's map has no alias rows any more: drop this check"
    for alias, target in pointers.items():
        assert model_data.model_map()[alias] is raw[target]


AGENT = "version: 1\nname: caps\nmodel: {model}\nprompts:\n  system: Be brief.\n"


@pytest.mark.parametrize(
    ("model_id", "kind"),
    [
        ("openai/gpt-4o-mini", "native"),
        ("anthropic/claude-3-5-haiku-latest", "native"),  # not in litellm's map: the endpoint decides
        ("deepseek/deepseek-reasoner", "inline"),  # listed without function calling
        ("openai/o1-mini", "native"),  # listed, but without the field
        ("gemini/gemini-2.5-flash", "native"),
        ("bedrock/us.deepseek.r1-v1:0", "inline"),
    ],
)
def test_run_chooses_the_mode_render_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model_id: str, kind: str
) -> None:
    for name in ("OPENAI_BASE_URL", "RUNNER_MODEL"):
        monkeypatch.delenv(name, raising=False)
    path = tmp_path / "agent.yaml"
    path.write_text(AGENT.format(model=model_id))
    config = load_agent(path, env={})
    settings = RuntimeSettings(home=tmp_path / ".runner", write_transcript=False)
    assert config.model is not None and config.model.api_base is None

    rendered = asyncio.run(first_request(config, input="hi", variables={}, settings=settings))

    async def run_mode() -> tuple[str, str, str]:
        runtime = await build_runtime(config, settings)  # the live model `runner run` builds
        try:
            model = getattr(runtime.model, "primary", runtime.model)  # inside its retries
            return type(model).__name__, runtime.mode.kind, runtime.mode.why
        finally:
            await runtime.aclose()

    model_class, run_kind, run_why = asyncio.run(run_mode())
    assert model_class == "LiteLLMModel"  # no api_base: litellm answers `supports_tools`
    assert (rendered["mode"], rendered["mode_why"]) == (run_kind, run_why)
    assert run_kind == kind
    assert capabilities(config, settings).supports_tools == model_data.supports_function_calling(model_id)
