"""The ``<details type="tool_calls">`` blocks of seed 002: an executed tool, shown in the message content.

A client such as Open WebUI renders each block as a "Tool Executed" entry that opens onto the
arguments and the result. Arguments and result are HTML-escaped JSON, so a block never holds a raw
``<`` or ``"`` of its own, and ``split_content`` can find the blocks again in a later request's
history (the API is stateless: the conversation comes back as text).

``split_content`` reads a block as ``<details type="tool_calls" ATTRS>``, whitespace,
``<summary>...</summary>``, the body up to the first ``</details>``, and the spaces and newline
after it. It runs in time linear in the text, whatever the text holds (a client writes it): each
search for a delimiter starts where the last one ended or reuses its answer, so no character is
scanned twice for the same delimiter (``ScanStats`` counts them).
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass

__all__ = ["ScanStats", "ToolBlock", "render_details", "split_content"]

_OPEN = "<details"
_TYPE = re.compile(r'\s+type="tool_calls"')
_SUMMARY = re.compile(r"\s*<summary>")
_TRAIL = re.compile(r"[ \t]*\n?")
_NAME = re.compile(r"[\w-]+")


@dataclass(frozen=True, slots=True)
class ToolBlock:
    """One executed tool: the call id, the tool, its arguments (JSON text) and its result text."""

    call_id: str
    name: str
    arguments: str
    result: str


@dataclass(slots=True)
class ScanStats:
    """How many characters ``split_content``'s delimiter searches went over (linear: a few per char)."""

    scanned: int = 0


def render_details(block: ToolBlock) -> str:
    """The block as seed 002 writes it: ``done="true"``, escaped JSON arguments and result."""
    return (
        f'<details type="tool_calls" done="true" id="{html.escape(block.call_id)}" '
        f'name="{html.escape(block.name)}" arguments="{html.escape(block.arguments)}">\n'
        f"<summary>Tool Executed</summary>\n"
        f"{html.escape(json.dumps(block.result, ensure_ascii=False))}\n"
        f"</details>\n"
    )


class _Finder:
    """``text.find(needle, pos)`` that reuses its last answer when it still holds."""

    def __init__(self, text: str, stats: ScanStats) -> None:
        self.text = text
        self.stats = stats
        self._last: dict[str, tuple[int, int]] = {}  # needle -> (searched from, found at or -1)

    def find(self, needle: str, pos: int) -> int:
        last = self._last.get(needle)
        if last is not None and last[0] <= pos and (last[1] == -1 or last[1] >= pos):
            return last[1]
        found = self.text.find(needle, pos)
        self.stats.scanned += (len(self.text) if found == -1 else found) - pos
        self._last[needle] = (pos, found)
        return found


def _attributes(attrs: str) -> dict[str, str]:
    """``name="value"`` pairs, as ``re.findall(r'([\\w-]+)="([^"]*)"')`` finds them, in linear time."""
    found: dict[str, str] = {}
    pos = 0
    while (name := _NAME.search(attrs, pos)) is not None:
        pos = name.end()
        if not attrs.startswith('="', pos):
            continue
        close = attrs.find('"', pos + 2)
        if close == -1:
            break  # no closing quote: nothing after this can be a pair either
        found[name.group()] = html.unescape(attrs[pos + 2 : close])
        pos = close + 1
    return found


def _block(attrs: dict[str, str], body: str) -> ToolBlock:
    body = body.strip() or html.escape(attrs.get("result", ""))
    return ToolBlock(
        call_id=attrs.get("id", ""),
        name=attrs.get("name", ""),
        arguments=attrs.get("arguments") or "{}",
        result=_result_text(html.unescape(body)),
    )


def split_content(
    text: str, *, max_blocks: int | None = None, stats: ScanStats | None = None
) -> list[str | ToolBlock]:
    """The text pieces and finished tool blocks of a message's content, in order.

    Blocks still running (``done="false"``) are dropped: a finished block for the same call follows.
    A result that is not a JSON string (written by another tool runner) is kept as its text.
    With ``max_blocks``, reading stops after ``max_blocks + 1`` blocks (the caller refuses the text).
    """
    finder = _Finder(text, stats if stats is not None else ScanStats())
    parts: list[str | ToolBlock] = []
    position = 0  # the end of the last block
    start = 0  # where to look for the next "<details"
    failed_at = -1  # a tag end ('>') after which no block can be read
    blocks = 0
    while (candidate := finder.find(_OPEN, start)) != -1:
        start = candidate + len(_OPEN)
        typed = _TYPE.match(text, start)
        if typed is None:
            continue
        tag_end = finder.find(">", typed.end())
        if tag_end == -1:
            break  # no '>' after here: no later candidate has one either
        if tag_end == failed_at:
            continue  # same tag end, same outcome as the candidate before
        summary = _SUMMARY.match(text, tag_end + 1)
        summary_end = -1 if summary is None else finder.find("</summary>", summary.end())
        body_end = -1 if summary_end == -1 else finder.find("</details>", summary_end + len("</summary>"))
        if body_end == -1:
            failed_at = tag_end
            continue
        if candidate > position:
            parts.append(text[position:candidate])
        trail = _TRAIL.match(text, body_end + len("</details>"))
        position = start = trail.end() if trail is not None else body_end + len("</details>")
        attrs = _attributes(text[typed.end() : tag_end])
        if attrs.get("done", "true") == "true":
            parts.append(_block(attrs, text[summary_end + len("</summary>") : body_end]))
            blocks += 1
            if max_blocks is not None and blocks > max_blocks:
                return parts
    if position < len(text):
        parts.append(text[position:])
    return parts


def _result_text(body: str) -> str:
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        return body
    return value if isinstance(value, str) else body
