"""The details-block parser against hostile content: the same blocks as the reference regex, in linear time.

An assistant message of a request's history is the client's text. The first parser was a regex
with lazy ``.*?`` groups that went cubic on unclosed blocks (23 KB held the event loop 12 s).
"""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runner.serve.details import ScanStats, ToolBlock, split_content

# The first parser, the reference for what a block is (fine on small texts, cubic on large ones).
REFERENCE = re.compile(
    r'<details\s+type="tool_calls"(?P<attrs>[^>]*)>\s*<summary>.*?</summary>(?P<body>.*?)</details>[ \t]*\n?',
    re.DOTALL,
)
REFERENCE_ATTR = re.compile(r'([\w-]+)="([^"]*)"')

PIECES = [
    "<details", " ", "\n", '\ttype="tool_calls"', ' type="tool_calls"', ">", "<summary>", "</summary>",
    "</details>", "x", '"', "=", ' done="false"', ' id="a"', ' name="n&amp;"', '"r&quot;"', "a=\"",
    "<", "&quot;ok&quot;", ' result="&quot;z&quot;"', "[1]", "é",
]  # fmt: skip


def reference_split(text: str) -> list[Any]:
    """The first parser's ``split_content``, blocks as tuples."""
    import html
    import json

    parts: list[Any] = []
    position = 0
    for match in REFERENCE.finditer(text):
        if match.start() > position:
            parts.append(text[position : match.start()])
        position = match.end()
        attrs = {k: html.unescape(v) for k, v in REFERENCE_ATTR.findall(match.group("attrs"))}
        if attrs.get("done", "true") != "true":
            continue
        body = html.unescape(match.group("body").strip() or html.escape(attrs.get("result", "")))
        try:
            value = json.loads(body)
        except ValueError:
            value = body
        result = value if isinstance(value, str) else body
        parts.append((attrs.get("id", ""), attrs.get("name", ""), attrs.get("arguments") or "{}", result))
    if position < len(text):
        parts.append(text[position:])
    return parts


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=30))
def test_the_parser_reads_what_the_reference_regex_reads(pieces: list[str]) -> None:
    text = "".join(pieces)
    parts = [
        p if isinstance(p, str) else (p.call_id, p.name, p.arguments, p.result) for p in split_content(text)
    ]
    assert parts == reference_split(text)


MB4 = 4 * 1024 * 1024

ADVERSARIAL = {
    "unclosed blocks": '<details type="tool_calls"><summary></summary>',
    "unclosed tags": '<details type="tool_calls">',
    "no tag end": '<details type="tool_calls" ',
    "nested": '<details type="tool_calls"><summary>s</summary><details type="tool_calls"><summary>',
    "many attributes": '<details type="tool_calls" a="1" b="2" c=',
    "open quotes": '<details type="tool_calls" a="',
    "whitespace runs": '<details type="tool_calls">' + " " * 997,
    "valid blocks": (
        '<details type="tool_calls" done="true" id="c" name="n" arguments="{}">\n'
        "<summary>Tool Executed</summary>\n&quot;r&quot;\n</details>\n"
    ),
    "long words": "w" * 1000 + '<details type="tool_calls" ' + "v" * 1000,
}


@pytest.mark.parametrize("unit", ADVERSARIAL.values(), ids=ADVERSARIAL.keys())
def test_a_4_mb_adversarial_message_parses_in_linear_time(unit: str) -> None:
    text = unit * (MB4 // len(unit))
    stats = ScanStats()
    split_content(text, stats=stats)
    # each delimiter search covers new ground: a few characters scanned per character of text (the
    # count, not the clock: the cubic parser took minutes for 46 KB)
    assert stats.scanned <= 4 * len(text), (stats.scanned, len(text))


@pytest.mark.parametrize(
    "text",
    [
        '<details type="tool_calls" ' + 'a="b ' * (MB4 // 5) + "><summary></summary>x</details>",
        '<details type="tool_calls" ' + "a" * MB4 + "><summary></summary>x</details>",
        '<details type="tool_calls"><summary></summary>' + "[" * MB4 + "</details>",
    ],
    ids=["a million attributes", "one 4 MB attribute name", "a 4 MB deep JSON result"],
)
def test_one_huge_block_parses_quickly_and_keeps_what_it_cannot_decode(text: str) -> None:
    started = time.perf_counter()
    (block,) = split_content(text)
    # well under a second here; a parser worse than linear takes minutes: a bound no loaded machine reaches
    assert time.perf_counter() - started < 30
    assert isinstance(block, ToolBlock)
    assert block.result in ("x", "[" * MB4)


def test_the_operation_count_grows_linearly_with_the_text() -> None:
    unit = ADVERSARIAL["nested"]
    counts: list[Any] = []
    for repeat in (1_000, 10_000):
        stats = ScanStats()
        split_content(unit * repeat, stats=stats)
        counts.append(stats.scanned)
    assert counts[1] <= 11 * counts[0]  # ten times the text, about ten times the work (cubic: 1000)
