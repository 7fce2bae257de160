"""Models: the ``Model`` protocol, its two implementations, retries and fallbacks.

``base`` holds the protocol and its values; ``openai_compat`` (httpx) and ``litellm_model`` (the only
importer of litellm) implement it and are imported lazily by ``factory``; ``resilient`` adds retries
and fallbacks. Messages are OpenAI chat-format dicts throughout.
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
from runner.models.factory import build_request, make_model, model_for
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
    "build_request",
    "events_of",
    "make_model",
    "model_for",
]
