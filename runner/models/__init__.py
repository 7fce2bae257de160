"""Models: the ``Model`` protocol, its two implementations, retries and fallbacks.

Module map:

- ``base``: the protocol and the values that cross it (``Request``, ``Reply``, stream events).
- ``openai_compat``: the httpx fast path for OpenAI-compatible endpoints; ``litellm_model``: every
  other provider (the only module that imports litellm); both imported lazily by ``factory``.
- ``resilient``: retries with backoff, then fallbacks; ``accumulate``: tool-call deltas into calls.

Messages are OpenAI chat-format dicts throughout. How tools are put into requests and read out of
replies is the modes' business (``runner.modes``), not a model's.
"""

from __future__ import annotations

from runner.models.accumulate import ToolCallAccumulator
from runner.models.base import (
    Completed,
    Model,
    ReasoningDelta,
    Reply,
    Request,
    StreamEvent,
    StreamingUnsupported,
    TextDelta,
    ToolCall,
    ToolCallReady,
    Usage,
    events_of,
)
from runner.models.factory import make_model, model_for
from runner.models.resilient import ResilientModel

__all__ = [
    "Completed",
    "Model",
    "ReasoningDelta",
    "Reply",
    "Request",
    "ResilientModel",
    "StreamEvent",
    "StreamingUnsupported",
    "TextDelta",
    "ToolCall",
    "ToolCallAccumulator",
    "ToolCallReady",
    "Usage",
    "events_of",
    "make_model",
    "model_for",
]
