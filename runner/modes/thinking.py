"""Separate ``<think>...</think>`` reasoning from the visible text of a reply.

Small local models (Qwen3, DeepSeek-R1 distills, ...) write their reasoning inline, between
``<think>`` and ``</think>``. It is kept in the transcript and shown dimmed, but never sent back to
the model and never searched for tool blocks.

- ``split_thinking(text) -> (visible, thinking)`` for a whole reply. An unclosed ``<think>`` at the
  end counts as thinking; a ``</think>`` that comes before any ``<think>`` means the chat template
  opened the tag in the prompt, so everything before it is thinking.
- ``ThinkingFilter`` does the same incrementally: ``feed(delta) -> (visible_delta, thinking_delta)``
  and ``finish()``; tags may be split across deltas (a possible partial tag is held back until the
  next delta decides it).

Whitespace: the visible text never starts with the whitespace that surrounded a leading think
block; each think block is trimmed, and several blocks are joined by a newline. The concatenated
deltas of a ``ThinkingFilter`` equal ``split_thinking`` of the whole text, whatever the chunking.
"""

from __future__ import annotations

__all__ = ["CLOSE_TAG", "OPEN_TAG", "ThinkingFilter", "partial_suffix", "split_thinking"]

OPEN_TAG = "<think>"
CLOSE_TAG = "</think>"


def partial_suffix(text: str, tag: str) -> int:
    """Length of the longest end of ``text`` that is a proper beginning of ``tag``."""
    for size in range(min(len(text), len(tag) - 1), 0, -1):
        if text.endswith(tag[:size]):
            return size
    return 0


class ThinkingFilter:
    """Splits a streamed reply into visible and thinking deltas; ``thinking=True`` starts inside a block."""

    __slots__ = ("_block_started", "_in_think", "_lead", "_pending", "_seen_think", "_think_any", "_visible")

    def __init__(self, *, thinking: bool = False) -> None:
        self._in_think = thinking
        self._seen_think = thinking
        self._pending = ""  # not classified yet: a possible partial tag, or thinking's trailing spaces
        self._lead = ""  # leading whitespace of the visible text, held until something else comes
        self._visible = False  # non-whitespace visible text was emitted
        self._block_started = False  # the current think block emitted something
        self._think_any = False  # any think block emitted something

    @property
    def in_thinking(self) -> bool:
        """True while the text being received is inside a think block."""
        return self._in_think

    def feed(self, delta: str) -> tuple[str, str]:
        """Add a piece of the reply; return the visible and thinking text it completes."""
        visible: list[str] = []
        thinking: list[str] = []
        pending = self._pending + delta
        while pending:
            if not self._in_think:
                at = pending.find(OPEN_TAG)
                if at < 0:
                    keep = partial_suffix(pending, OPEN_TAG)
                    self._emit_visible(pending[: len(pending) - keep], visible)
                    pending = pending[len(pending) - keep :]
                    break
                self._emit_visible(pending[:at], visible)
                pending = pending[at + len(OPEN_TAG) :]
                self._in_think = self._seen_think = True
                self._block_started = False
                if not self._visible:
                    self._lead = ""
            else:
                at = pending.find(CLOSE_TAG)
                if at < 0:
                    keep = partial_suffix(pending, CLOSE_TAG)
                    body = pending[: len(pending) - keep]
                    kept = body.rstrip()  # trailing whitespace waits: it is dropped if the block ends
                    self._emit_thinking(kept, thinking)
                    pending = body[len(kept) :] + pending[len(pending) - keep :]
                    break
                self._emit_thinking(pending[:at].rstrip(), thinking)
                pending = pending[at + len(CLOSE_TAG) :]
                self._in_think = False
        self._pending = pending
        return "".join(visible), "".join(thinking)

    def finish(self) -> tuple[str, str]:
        """The reply ended: return what was held back (an unclosed think block is thinking)."""
        visible: list[str] = []
        thinking: list[str] = []
        pending, self._pending = self._pending, ""
        if self._in_think:
            self._emit_thinking(pending.rstrip(), thinking)
        else:
            self._emit_visible(pending, visible)
            if not self._visible and not self._seen_think:
                visible.append(self._lead)
            self._lead = ""
        return "".join(visible), "".join(thinking)

    def _emit_visible(self, text: str, out: list[str]) -> None:
        if not text:
            return
        if not self._visible:
            stripped = text.lstrip()
            if not stripped:
                self._lead += text
                return
            if not self._seen_think:
                out.append(self._lead + text[: len(text) - len(stripped)])
            self._lead = ""
            self._visible = True
            text = stripped
        out.append(text)

    def _emit_thinking(self, text: str, out: list[str]) -> None:
        if not self._block_started:
            text = text.lstrip()
            if not text:
                return
            if self._think_any:
                out.append("\n")
            self._block_started = self._think_any = True
        out.append(text)


def split_thinking(text: str) -> tuple[str, str]:
    """The reply's visible text without think blocks, and the thinking text."""
    close = text.find(CLOSE_TAG)
    opened = close >= 0 and not (0 <= text.find(OPEN_TAG) < close)
    stream = ThinkingFilter(thinking=opened)
    visible, thinking = stream.feed(text)
    more_visible, more_thinking = stream.finish()
    return visible + more_visible, thinking + more_thinking
