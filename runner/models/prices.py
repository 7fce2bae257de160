"""Model prices from the data file litellm ships, read as data: litellm itself is not imported.

The fast path (``openai_compat``) must never import litellm (seconds of import), yet its usage has
to be priced for ``limits.max_cost_usd``. The prices are litellm's bundled map, found and parsed by
``model_data`` (once, on the first price asked for, ~30 ms).
"""

from __future__ import annotations

from runner.models.model_data import MODEL_MAP_FILE, model_entry

__all__ = ["PRICE_FILE", "cost_usd", "model_entry"]

#: The name of litellm's bundled price map (what ``LITELLM_LOCAL_MODEL_COST_MAP=True`` reads).
PRICE_FILE = MODEL_MAP_FILE


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
