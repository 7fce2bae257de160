"""Model prices from the data file litellm ships, read as data: litellm itself is not imported.

The fast path (``openai_compat``) must never import litellm (seconds of import), yet its usage has
to be priced for ``limits.max_cost_usd``. litellm keeps its price and capability map in
``model_prices_and_context_window_backup.json`` inside its package; ``importlib.util.find_spec``
finds the package folder without running ``litellm/__init__``. The file is parsed once, on the
first price asked for (~30 ms).
"""

from __future__ import annotations

import functools
import importlib.util
import json
from pathlib import Path
from typing import Any

__all__ = ["PRICE_FILE", "cost_usd", "model_entry"]

#: The name of litellm's bundled price map (what ``LITELLM_LOCAL_MODEL_COST_MAP=True`` reads).
PRICE_FILE = "model_prices_and_context_window_backup.json"


@functools.cache
def _price_map() -> dict[str, Any]:
    """litellm's bundled price map, or an empty one when litellm or its file cannot be found."""
    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        return {}
    if spec is None or not spec.submodule_search_locations:
        return {}
    for folder in spec.submodule_search_locations:
        path = Path(folder) / PRICE_FILE
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            return data
    return {}


def model_entry(model_id: str) -> dict[str, Any] | None:
    """litellm's entry for ``model_id`` (``provider/name`` or a bare name), or None when it has none."""
    prices = _price_map()
    entry = prices.get(model_id)
    if isinstance(entry, dict):
        return entry
    provider, _, name = model_id.partition("/")
    if not name:
        return None
    entry = prices.get(name)
    if isinstance(entry, dict) and entry.get("litellm_provider") in (provider, None):
        return entry
    return None


def cost_usd(model_id: str, prompt_tokens: int, completion_tokens: int) -> float | None:
    """What ``prompt_tokens`` in and ``completion_tokens`` out cost in US dollars; None when unpriced."""
    entry = model_entry(model_id)
    if entry is None:
        return None
    prompt_price = entry.get("input_cost_per_token")
    completion_price = entry.get("output_cost_per_token")
    if not isinstance(prompt_price, (int, float)) or not isinstance(completion_price, (int, float)):
        return None
    return float(prompt_tokens * prompt_price + completion_tokens * completion_price)
