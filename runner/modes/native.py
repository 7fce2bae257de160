"""``function_calling: native`` (SPEC section 8): the provider's own tool calls.

Tool definitions go in every request's ``tools``; the model answers with ``tool_calls``; each
result goes back as a ``role: tool`` message. Everything else is ``ReplyReader``'s default.
"""

from __future__ import annotations

from typing import Any, ClassVar

from runner.modes.base import Mode

__all__ = ["NativeMode"]


class NativeMode(Mode):
    """Native tool calls: ``tools`` in the request, ``role: tool`` results."""

    kind: ClassVar[str] = "native"

    def request_tools(self, tools: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
        """The agent's tool definitions, unchanged (the same list every step: a stable prefix)."""
        return tools
