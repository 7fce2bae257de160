"""The context budget (SPEC section 7): estimate prompt size, compress old tool outputs.

When the estimated prompt tokens exceed ``limits.context_tokens``, the oldest tool outputs are
replaced by a one-line placeholder (tool name, size, first line). Never touched: the system
message, user messages, assistant decisions, tool errors, and the last two steps.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CHARS_PER_TOKEN",
    "Compressed",
    "compress",
    "estimate_tokens",
    "message_chars",
    "placeholder",
    "step_starts",
]

#: A rough, provider-independent estimate: about four characters per token.
CHARS_PER_TOKEN = 4


def message_chars(message: dict[str, Any]) -> int:
    """Characters a message contributes to the prompt (content plus tool-call arguments)."""
    size = (
        len(message.get("content") or "")
        if isinstance(message.get("content"), str | None)
        else len(json.dumps(message.get("content"), ensure_ascii=False))
    )
    for call in message.get("tool_calls") or ():
        size += len(call["function"]["name"]) + len(call["function"].get("arguments") or "")
    return size + 8


def estimate_tokens(chars: int) -> int:
    """Tokens for a number of characters."""
    return chars // CHARS_PER_TOKEN + 1


@dataclass(frozen=True)
class Compressed:
    """One tool output that was replaced."""

    index: int
    name: str
    original_chars: int


def placeholder(name: str, content: str) -> str:
    """The text that stands in for a compressed tool output."""
    first = content.strip().splitlines()[0] if content.strip() else ""
    if len(first) > 120:
        first = first[:117] + "..."
    return f"[output of {name} compressed: {len(content)} chars; first line: {first}]"


def compress(
    history: list[dict[str, Any]],
    *,
    over_chars: int,
    protected_from: int,
    errors: set[str],
    names: dict[str, str],
) -> list[Compressed]:
    """Replace the oldest tool outputs before ``protected_from`` until ``over_chars`` are saved.

    ``errors`` holds the call ids of error results (kept), ``names`` maps call ids to tool names.
    The history is changed in place; the replaced entries are returned.
    """
    done: list[Compressed] = []
    saved = 0
    for index in range(min(protected_from, len(history))):
        if saved >= over_chars:
            break
        message = history[index]
        call_id = message.get("tool_call_id")
        content = message.get("content")
        if message.get("role") != "tool" or call_id in errors or not isinstance(content, str):
            continue
        if content.startswith("[output of ") and content.endswith("]"):
            continue  # already compressed
        name = names.get(str(call_id), "tool")
        short = placeholder(name, content)
        if len(short) >= len(content):
            continue
        history[index] = {**message, "content": short}
        saved += len(content) - len(short)
        done.append(Compressed(index, name, len(content)))
    return done


def step_starts(history: Sequence[dict[str, Any]]) -> list[int]:
    """Indexes of the assistant messages (each begins a step's output)."""
    return [i for i, m in enumerate(history) if m.get("role") == "assistant"]
