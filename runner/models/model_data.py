"""litellm's model data (prices, capabilities), read as data files: litellm itself is not imported.

Importing litellm takes seconds; ``runner render`` and the fast path must not pay that to learn a
model's price or whether it takes native tool calls. litellm keeps both in
``model_prices_and_context_window_backup.json`` inside its package (what it reads itself with
``LITELLM_LOCAL_MODEL_COST_MAP=True``, the runner's default), and its provider names in two more
JSON files there. ``importlib.util.find_spec`` finds the package folder without running
``litellm/__init__``; each file is parsed once, when first needed (~30 ms for the map).

``model_info`` resolves a model id the way ``litellm.get_model_info`` does for the static map:
the provider is the id's first segment when litellm knows it as one; the id, the name after the
provider and the name without a dated or version suffix are tried in that order (case-insensitive),
each only when the entry's provider matches; a mapped entry gets the keys the map's
``fill_missing_for_providers`` rules add, and an id that no entry names at all gets the map's
capability rules (``fallback_generalizations``). ``tests/runtime/test_capabilities.py`` holds
the answers to litellm's own for real model ids. Not reproduced: litellm asking a provider's own
server (Hugging Face, Lemonade, a running Ollama): a render connects to nothing; those ids are
unknown here (Hugging Face, Lemonade) or answered from the map (Ollama).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "MODEL_MAP_FILE",
    "model_entry",
    "model_info",
    "model_map",
    "output_strategy",
    "providers",
    "supports_function_calling",
]

#: litellm's bundled price and capability map (what ``LITELLM_LOCAL_MODEL_COST_MAP=True`` reads).
MODEL_MAP_FILE = "model_prices_and_context_window_backup.json"
#: litellm's providers by name (its ``provider_list``) and the ones its JSON registry adds.
_PROVIDER_FILES = ("provider_endpoints_support_backup.json", "llms/openai_like/providers.json")
_RULES_KEY = "fallback_generalizations"
#: litellm fills missing keys from flagged rules only for entries of these modes.
_FILL_MODES = frozenset({"chat", "responses"})
#: Providers whose model information litellm asks the provider's server for, not the map.
_ASKS_THE_PROVIDER = frozenset({"huggingface", "lemonade"})
_BEDROCK = ("bedrock", "bedrock_converse")
_BEDROCK_ROUTES = (
    *("bedrock/", "chat_completions/", "converse/", "invoke/"),
    *("openai/", "mantle/", "nova-2/", "nova/"),
)
_BEDROCK_CROSS_REGION = frozenset({"global", "us", "eu", "apac", "jp", "au", "us-gov"})
_DATED_SUFFIX = re.compile(r"-\d{4}-\d{2}-\d{2}$")
_VERSION_SUFFIX = re.compile(r"-\d+$")
_FINETUNE_SUFFIX = re.compile(r"(:[^:]*){3}$")


@functools.cache
def _litellm_file(relative: str) -> Any:
    """A JSON file of litellm's package, parsed; None when litellm or the file cannot be found."""
    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        try:
            return json.loads((Path(folder) / relative).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
    return None


@functools.cache
def model_map() -> dict[str, dict[str, Any]]:
    """litellm's bundled model map (model entries only), or an empty one when it cannot be found."""
    data = _litellm_file(MODEL_MAP_FILE)
    if not isinstance(data, dict):
        return {}
    rows = {key: entry for key, entry in data.items() if key != _RULES_KEY and isinstance(entry, dict)}
    return {**rows, **_aliases(rows)}


def _aliases(rows: Mapping[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The names the map serves as other rows: ``aliases`` lists first, then ``alias_of`` pointers."""
    pointers = {name: row["alias_of"] for name, row in rows.items() if isinstance(row.get("alias_of"), str)}
    served: dict[str, dict[str, Any]] = {}
    for name, row in rows.items():
        listed = row.get("aliases")
        if name in pointers or not isinstance(listed, list):
            continue
        for alias in listed:
            if isinstance(alias, str) and (alias not in rows or alias in pointers) and alias not in served:
                served[alias] = row
    for alias, target in pointers.items():
        if target in rows and target not in pointers and alias not in served:
            served[alias] = rows[target]
    return served


@functools.cache
def _lowercase_keys() -> dict[str, str]:
    keys: dict[str, str] = {}
    for key in model_map():
        keys.setdefault(key.lower(), key)
    return keys


def _key(name: str) -> str | None:
    """The map's key for ``name``: exact, else case-insensitive (as litellm looks names up)."""
    return name if name in model_map() else _lowercase_keys().get(name.lower())


@functools.cache
def providers() -> frozenset[str]:
    """The provider names litellm recognises as an id's first segment."""
    names: set[str] = set()
    for relative in _PROVIDER_FILES:
        data = _litellm_file(relative)
        if isinstance(data, dict):
            listed = data.get("providers", data)
            names.update(str(name) for name in listed if isinstance(listed, dict) and "/" not in str(name))
    if not names:  # an older litellm without these files: the providers its map names
        names = {str(entry.get("litellm_provider")) for entry in model_map().values()}
    return frozenset(name for name in names if name and not name.startswith("_"))


@functools.cache
def _rules() -> tuple[tuple[re.Pattern[str], dict[str, Any], frozenset[str]], ...]:
    """The map's capability rules: (pattern, model information, providers it fills missing keys for)."""
    data = _litellm_file(MODEL_MAP_FILE)
    block = data.get(_RULES_KEY) if isinstance(data, dict) else None
    rules = block.get("rules") if isinstance(block, dict) else None
    compiled = []
    for rule in rules if isinstance(rules, list) else ():
        if not isinstance(rule, dict) or "extends" in rule:
            continue
        pattern, info = rule.get("pattern"), rule.get("model_info")
        fills = rule.get("fill_missing_for_providers", [])
        if not isinstance(pattern, str) or not isinstance(info, dict) or "litellm_provider" in info:
            continue  # a routing rule (it names a provider) or a malformed one: litellm skips it here too
        if not isinstance(fills, list) or not all(isinstance(name, str) for name in fills):
            continue
        try:
            compiled.append((re.compile(pattern, re.IGNORECASE), info, frozenset(fills)))
        except re.error:
            continue
    return tuple(compiled)


def _rule_info(name: str, provider: str | None = None) -> dict[str, Any] | None:
    """The union of the rules matching ``name`` (all of them, or those filling for ``provider``)."""
    matched = [
        info
        for pattern, info, fills in _rules()
        if (provider is None or provider in fills) and pattern.search(name) is not None
    ]
    return {key: value for info in matched for key, value in info.items()} or None


def _split(model_id: str) -> tuple[str | None, str]:
    """``(provider, name)``: the provider is the id's first segment when litellm knows it as one."""
    first, slash, rest = model_id.partition("/")
    if slash and rest and first in providers():
        return first, rest
    return None, model_id


def _bedrock_name(name: str) -> str:
    for prefix in _BEDROCK_ROUTES:
        if name.startswith(prefix):
            name = name.split("/", 1)[1]
    if "arn" in name.lower():
        name = name.split("/")[-1]
    name = re.sub(r"(:\d+):\d+k$", r"\1", name)
    region, dot, rest = name.partition(".")
    return rest if dot and region in _BEDROCK_CROSS_REGION else name


def _stripped(model_id: str, provider: str | None) -> str:
    """``model_id`` without what litellm strips to find a base entry (date, version, fine-tune tail)."""
    if provider in _BEDROCK:
        return _bedrock_name(model_id.partition("/")[2] if model_id.startswith(f"{provider}/") else model_id)
    if provider in ("vertex_ai", "gemini", "databricks"):
        return _VERSION_SUFFIX.sub("", model_id)
    if "ft:" in model_id:
        return _FINETUNE_SUFFIX.sub("", model_id)
    return _DATED_SUFFIX.sub("", model_id)


def _candidates(model_id: str, provider: str | None, name: str) -> Iterator[str]:
    if provider in _BEDROCK:
        name = _bedrock_name(name)
    seen = set()
    for candidate in (model_id, name, _stripped(model_id, provider)):
        if candidate not in seen:
            seen.add(candidate)
            yield candidate


def _provider_matches(entry: Mapping[str, Any], provider: str | None) -> bool:
    """litellm's ``_check_provider_match``: may ``provider``'s id use ``entry``?"""
    listed = entry.get("litellm_provider")
    if not provider or listed is None or listed == provider:
        return True
    listed = str(listed)
    if provider in ("vertex_ai", "fireworks_ai") and listed.startswith(provider):
        return True
    if provider.startswith("bedrock") and listed.startswith("bedrock"):
        return True
    if provider == "azure_ai" and listed in ("azure", "openai"):
        return True
    return provider in ("litellm_proxy", "github", "nadir")


def model_info(model_id: str) -> dict[str, Any] | None:
    """litellm's model information for ``model_id`` from its map, or None when litellm has none."""
    provider, name = _split(model_id)
    if provider in _ASKS_THE_PROVIDER or not model_map():
        return None
    candidates = list(_candidates(model_id, provider, name))
    for candidate in candidates:
        key = _key(candidate)
        if key is None or not _provider_matches(model_map()[key], provider):
            continue
        entry = model_map()[key]
        listed = entry.get("litellm_provider", "")
        if entry.get("mode", "chat") in _FILL_MODES and isinstance(listed, str):
            filled = _rule_info(key, listed) or {}
            entry = {**filled, **entry}
        return {"key": key, **entry}
    if any(_key(candidate) is not None for candidate in candidates):
        return None  # named, but for another provider: a known model, not one the rules describe
    for candidate in candidates:
        info = _rule_info(candidate)
        if info is not None:
            return {"key": candidate, **info, "litellm_provider": provider or info.get("litellm_provider")}
    return None


def supports_function_calling(model_id: str) -> bool | None:
    """Whether litellm lists ``model_id`` as taking native tool calls; None when it does not say."""
    info = model_info(model_id)
    value = None if info is None else info.get("supports_function_calling")
    return None if value is None else bool(value)


#: Providers whose chat API takes ``tools`` and a ``response_format`` json_schema in one request
#: (litellm passes both through unchanged; others turn the schema into a forced tool, or refuse).
SCHEMA_WITH_TOOLS = frozenset({"openai", "azure", "azure_ai", "text-completion-openai"})


def output_strategy(model_id: str, api_base: str | None = None) -> str:
    """How a native-mode agent with ``output:`` asks this model for its answer (``runner.modes.structured``):
    ``response_format`` where the provider combines it with tools, else a final-answer ``tool``.

    Combined: OpenAI and Azure, any OpenAI-compatible server (tried; a refusal falls back), and the
    models litellm lists with ``supports_native_structured_output`` (Anthropic's newer models, sent
    as ``output_format`` beside the tools). Elsewhere litellm turns ``response_format`` into a tool
    it forces the model to call at once, which switches the agent's tools off
    (``tests/models/test_output_providers.py`` measures both on llmock's Anthropic endpoint)."""
    if api_base and model_id.startswith("openai/"):
        return "response_format"
    provider, _ = _split(model_id)
    info = model_info(model_id) or {}
    provider = provider or info.get("litellm_provider")
    if provider in SCHEMA_WITH_TOOLS or info.get("supports_native_structured_output") is True:
        return "response_format"
    return "tool"


def model_entry(model_id: str) -> dict[str, Any] | None:
    """The map's own entry for ``model_id`` (``provider/name`` or a bare name), for pricing."""
    prices = model_map()
    entry = prices.get(model_id)
    if entry is not None:
        return entry
    provider, _, name = model_id.partition("/")
    if not name:
        return None
    entry = prices.get(name)
    if entry is not None and entry.get("litellm_provider") in (provider, None):
        return entry
    return None
