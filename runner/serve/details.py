"""The ``<details type="tool_calls">`` blocks of seed 002: an executed tool, shown in the message content.

A client such as Open WebUI renders each block as a "Tool Executed" entry that opens onto the
arguments and the result. Arguments and result are HTML-escaped JSON, so a block never holds a raw
``<`` or ``"`` of its own, and ``split_content`` can find the blocks again in a later request's
history (the API is stateless: the conversation comes back as text).
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass

__all__ = ["ToolBlock", "render_details", "split_content"]

_BLOCK = re.compile(
    r'<details\s+type="tool_calls"(?P<attrs>[^>]*)>\s*<summary>.*?</summary>(?P<body>.*?)</details>[ \t]*\n?',
    re.DOTALL,
)
_ATTR = re.compile(r'([\w-]+)="([^"]*)"')


@dataclass(frozen=True, slots=True)
class ToolBlock:
    """One executed tool: the call id, the tool, its arguments (JSON text) and its result text."""

    call_id: str
    name: str
    arguments: str
    result: str


def render_details(block: ToolBlock) -> str:
    """The block as seed 002 writes it: ``done="true"``, escaped JSON arguments and result."""
    return (
        f'<details type="tool_calls" done="true" id="{html.escape(block.call_id)}" '
        f'name="{html.escape(block.name)}" arguments="{html.escape(block.arguments)}">\n'
        f"<summary>Tool Executed</summary>\n"
        f"{html.escape(json.dumps(block.result, ensure_ascii=False))}\n"
        f"</details>\n"
    )


def split_content(text: str) -> list[str | ToolBlock]:
    """The text pieces and finished tool blocks of a message's content, in order.

    Blocks still running (``done="false"``) are dropped: a finished block for the same call follows.
    A result that is not a JSON string (written by another tool runner) is kept as its text.
    """
    parts: list[str | ToolBlock] = []
    position = 0
    for match in _BLOCK.finditer(text):
        if match.start() > position:
            parts.append(text[position : match.start()])
        position = match.end()
        attrs = {key: html.unescape(value) for key, value in _ATTR.findall(match.group("attrs"))}
        if attrs.get("done", "true") != "true":
            continue
        body = match.group("body").strip() or html.escape(attrs.get("result", ""))
        parts.append(
            ToolBlock(
                call_id=attrs.get("id", ""),
                name=attrs.get("name", ""),
                arguments=attrs.get("arguments") or "{}",
                result=_result_text(html.unescape(body)),
            )
        )
    if position < len(text):
        parts.append(text[position:])
    return parts


def _result_text(body: str) -> str:
    try:
        value = json.loads(body)
    except ValueError:
        return body
    return value if isinstance(value, str) else body
