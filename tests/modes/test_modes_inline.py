"""Tool blocks written in the reply (SPEC section 8, ``function_calling: inline``)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runner.modes.inline import (
    InlineBlock,
    InlineCall,
    InlineError,
    InlineParser,
    ToolFormat,
    parse_blocks,
    strip_for_history,
    tool_instructions,
    tool_responses,
)

NAMES = ("get_weather", "now", "write_file")
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather of a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                "required": ["city"],
            },
        },
    },
    {"type": "function", "function": {"name": "now", "description": "The local time.", "parameters": {}}},
]


def calls(blocks: list[InlineBlock]) -> list[tuple[str, dict[str, Any]]]:
    assert all(isinstance(block, InlineCall) for block in blocks), blocks
    return [(b.call.name, json.loads(b.call.arguments)) for b in blocks if isinstance(b, InlineCall)]


def only_error(blocks: list[InlineBlock]) -> InlineError:
    assert len(blocks) == 1 and isinstance(blocks[0], InlineError), blocks
    return blocks[0]


def feed_chars(parser: InlineParser, text: str) -> list[tuple[int, InlineBlock]]:
    """Feed one character at a time; each block with the index of the character that reported it."""
    found = [(index, block) for index, char in enumerate(text) for block in parser.feed(char)]
    return found + [(len(text), block) for block in parser.finish()]


# --- xml ------------------------------------------------------------------------------------------


def test_xml_block_becomes_a_call_with_fresh_id_and_json_arguments() -> None:
    blocks = parse_blocks(
        'Let me look.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
        "xml",
        NAMES,
    )
    assert calls(blocks) == [("get_weather", {"city": "Paris"})]
    call = blocks[0]
    assert isinstance(call, InlineCall)
    assert (
        call.call.id.startswith("call_")
        and call.raw.startswith("<tool_call>")
        and call.raw.endswith("</tool_call>")
    )


def test_several_xml_blocks_in_one_reply_keep_their_order_and_ids_differ() -> None:
    text = (
        '<tool_call>{"name": "now"}</tool_call> and <tool_call>{"name": '
        '"get_weather", "arguments": {"city": "Oslo"}}</tool_call>'
    )
    blocks = parse_blocks(text, "xml", NAMES)
    assert calls(blocks) == [("now", {}), ("get_weather", {"city": "Oslo"})]
    assert len({b.call.id for b in blocks if isinstance(b, InlineCall)}) == 2


def test_xml_json_with_trailing_commas_is_repaired() -> None:
    text = '<tool_call>{"name": "get_weather", "arguments": {"city": "Rome",},}</tool_call>'
    assert calls(parse_blocks(text, "xml", NAMES)) == [("get_weather", {"city": "Rome"})]


def test_xml_json_with_single_quotes_is_repaired() -> None:
    text = "<tool_call>{'name': 'get_weather', 'arguments': {'city': \"it's Rome\"}}</tool_call>"
    assert calls(parse_blocks(text, "xml", NAMES)) == [("get_weather", {"city": "it's Rome"})]


def test_xml_accepts_parameters_string_arguments_and_a_fence_around_the_json() -> None:
    text = (
        '<tool_call>{"name": "now", "parameters": {}}</tool_call>'
        '<tool_call>{"name": "get_weather", "arguments": "{\\"city\\": \\"Lima\\"}"}</tool_call>'
        '<tool_call>\n```json\n{"name": "get_weather", "arguments": {"city": "Kyiv"}}\n```\n</tool_call>'
    )
    assert calls(parse_blocks(text, "xml", NAMES)) == [
        ("now", {}),
        ("get_weather", {"city": "Lima"}),
        ("get_weather", {"city": "Kyiv"}),
    ]


def test_xml_block_without_name_is_an_error_the_model_can_read() -> None:
    error = only_error(parse_blocks('<tool_call>{"arguments": {"city": "Paris"}}</tool_call>', "xml", NAMES))
    assert '"name"' in error.error and error.name == ""
    assert '{"arguments": {"city": "Paris"}}' in error.message()
    name, content, is_error = error.result()
    assert (name, is_error) == ("tool_call", True) and "<tool_call>" in content


def test_xml_block_with_invalid_json_is_an_error_with_the_raw_block() -> None:
    error = only_error(parse_blocks("<tool_call>get_weather(city=Paris)</tool_call>", "xml", NAMES))
    assert "JSON" in error.error and "get_weather(city=Paris)" in error.raw


def test_xml_arguments_that_are_not_an_object_are_an_error_naming_the_tool() -> None:
    error = only_error(
        parse_blocks('<tool_call>{"name": "now", "arguments": [1, 2]}</tool_call>', "xml", NAMES)
    )
    assert error.name == "now" and "not a JSON object" in error.error


def test_xml_unknown_tool_name_is_still_a_call_for_the_executor_to_answer() -> None:
    assert calls(parse_blocks('<tool_call>{"name": "fly", "arguments": {}}</tool_call>', "xml", NAMES)) == [
        ("fly", {})
    ]


def test_unclosed_xml_block_becomes_an_error_at_the_end() -> None:
    parser = InlineParser("xml", NAMES)
    assert parser.feed('Sure. <tool_call>{"name": "get_weather", "arguments": {"city": "Par') == []
    error = only_error(parser.finish())
    assert "not closed" in error.error and error.raw.startswith('<tool_call>{"name": "get_weather"')


def test_xml_block_not_closed_before_the_next_one_is_an_error_and_the_next_still_counts() -> None:
    text = (
        '<tool_call>{"name": "now"}\n<tool_call>{"name": "get_weather", '
        '"arguments": {"city": "Oslo"}}</tool_call>'
    )
    blocks = parse_blocks(text, "xml", NAMES)
    assert isinstance(blocks[0], InlineError) and "before the next" in blocks[0].error
    assert calls(blocks[1:]) == [("get_weather", {"city": "Oslo"})]


def test_xml_block_inside_think_is_ignored() -> None:
    text = (
        '<think>I could <tool_call>{"name": "now"}</tool_call> maybe</think>Checking.<tool_call>'
        '{"name": "get_weather", "arguments": {"city": "Bern"}}</tool_call>'
    )
    assert calls(parse_blocks(text, "xml", NAMES)) == [("get_weather", {"city": "Bern"})]


def test_xml_block_fed_character_by_character_is_reported_on_its_closing_character() -> None:
    first = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
    text = "<think>hmm</think>Ok " + first + "\nand then <tool_call>{'name': 'now'}</tool_call> done."
    found = feed_chars(InlineParser("xml", NAMES), text)
    assert [index for index, _ in found] == [
        text.index(first) + len(first) - 1,
        text.rindex("</tool_call>") + 11,
    ]
    assert calls([block for _, block in found]) == [("get_weather", {"city": "Paris"}), ("now", {})]


def test_made_up_tool_response_stops_parsing() -> None:
    parser = InlineParser("xml", NAMES)
    text = (
        '<tool_call>{"name": "now"}</tool_call>\n<tool_response name="now">'
        '12:00</tool_response>\n<tool_call>{"name": "now"}</tool_call>'
    )
    found = feed_chars(parser, text)
    assert len(found) == 1 and parser.stopped


# --- markdown -------------------------------------------------------------------------------------


def test_markdown_fence_named_after_a_tool_is_a_call() -> None:
    text = 'Let me check.\n```get_weather\n{"city": "Paris", "days": 2}\n```\n'
    assert calls(parse_blocks(text, "markdown", NAMES)) == [("get_weather", {"city": "Paris", "days": 2})]


def test_markdown_fence_for_a_non_tool_language_is_ordinary_text() -> None:
    text = 'Here is code:\n```python\nprint({"city": "Paris"})\n```\n```json\n{"name": "now"}\n```\n'
    assert parse_blocks(text, "markdown", NAMES) == []


def test_tool_fence_inside_an_ordinary_fence_is_an_example_not_a_call() -> None:
    text = "To call a tool write:\n````markdown\n```now\n{}\n```\n````\nthat's all."
    assert parse_blocks(text, "markdown", NAMES) == []


def test_several_markdown_blocks_and_an_empty_body_meaning_no_arguments() -> None:
    text = '```now\n```\nthen\n```get_weather\n{"city": "Oslo"}\n```'
    assert calls(parse_blocks(text, "markdown", NAMES)) == [("now", {}), ("get_weather", {"city": "Oslo"})]


def test_markdown_nested_json_fence_inside_a_tool_block_is_unwrapped() -> None:
    text = '```get_weather\n```json\n{"city": "Paris"}\n```\n```\nAfter the block.\n```now\n```\n'
    assert calls(parse_blocks(text, "markdown", NAMES)) == [("get_weather", {"city": "Paris"}), ("now", {})]


def test_markdown_fences_inside_a_json_string_do_not_close_the_block() -> None:
    content = "# Demo\n```\nplain fence\n```\n```python\nx = 1\n```\n"
    raw_newlines = '{"path": "a.md", "content": "' + content + '"}'  # a string with raw newlines
    text = f"```write_file\n{raw_newlines}\n```\nDone."
    assert calls(parse_blocks(text, "markdown", NAMES)) == [
        ("write_file", {"path": "a.md", "content": content})
    ]
    escaped = json.dumps({"path": "a.md", "content": content})
    assert calls(parse_blocks(f"```write_file\n{escaped}\n```", "markdown", NAMES)) == [
        ("write_file", {"path": "a.md", "content": content})
    ]


def test_markdown_body_with_trailing_commas_or_single_quotes_is_repaired() -> None:
    text = "```get_weather\n{'city': 'Lima',}\n```\n```get_weather\n{\"city\": \"Quito\", }\n```"
    assert calls(parse_blocks(text, "markdown", NAMES)) == [
        ("get_weather", {"city": "Lima"}),
        ("get_weather", {"city": "Quito"}),
    ]


def test_markdown_body_that_is_a_whole_call_object_is_accepted() -> None:
    text = '```get_weather\n{"name": "get_weather", "arguments": {"city": "Nice"}}\n```'
    assert calls(parse_blocks(text, "markdown", NAMES)) == [("get_weather", {"city": "Nice"})]


def test_markdown_body_that_is_not_json_is_an_error_naming_the_tool() -> None:
    error = only_error(parse_blocks("```get_weather\ncity = Paris\n```", "markdown", NAMES))
    assert error.name == "get_weather" and "city = Paris" in error.message()


def test_unclosed_markdown_tool_block_becomes_an_error_at_the_end() -> None:
    error = only_error(parse_blocks('Calling:\n```get_weather\n{"city": "Pa', "markdown", NAMES))
    assert error.name == "get_weather" and "not closed" in error.error
    assert error.raw == '```get_weather\n{"city": "Pa'


def test_unclosed_ordinary_fence_is_just_text() -> None:
    assert parse_blocks("```python\nprint(1)\n", "markdown", NAMES) == []


def test_markdown_block_inside_think_is_ignored() -> None:
    text = '<think>\nmaybe:\n```now\n```\n</think>\n```get_weather\n{"city": "Bern"}\n```\n'
    assert calls(parse_blocks(text, "markdown", NAMES)) == [("get_weather", {"city": "Bern"})]


def test_markdown_block_fed_character_by_character_is_reported_at_its_closing_newline() -> None:
    block = '```get_weather\n{"city": "Paris"}\n```\n'
    text = "Sure.\n" + block + "Now the time:\n```now\n```"
    found = feed_chars(InlineParser("markdown", NAMES), text)
    # the first on the newline ending its closing fence; the last one, with no newline after it, at the end
    assert [index for index, _ in found] == [text.index(block) + len(block) - 1, len(text)]
    assert calls([block for _, block in found]) == [("get_weather", {"city": "Paris"}), ("now", {})]


# --- any chunking, results, history, instructions -------------------------------------------------

REPLIES: list[tuple[ToolFormat, str]] = [
    (
        "xml",
        '<think>x <tool_call>{"name": "now"}</tool_call></think>A<tool_call>'
        '{"name": "now"}</tool_call>B<tool_call>{"name"',
    ),
    (
        "markdown",
        '<think>```now\n```</think>\n```python\n```now\n```\n```\n```get_weather\n```json\n{"city": '
        '"X"}\n```\n```\n```now\n{',
    ),
]


@settings(max_examples=60, deadline=None)
@given(case=st.sampled_from(REPLIES), sizes=st.lists(st.integers(1, 9), min_size=1, max_size=6))
def test_chunking_never_changes_the_blocks(case: tuple[ToolFormat, str], sizes: list[int]) -> None:
    fmt, text = case
    parser = InlineParser(fmt, NAMES)
    found: list[InlineBlock] = []
    position = index = 0
    while position < len(text):
        size = sizes[index % len(sizes)]
        found += parser.feed(text[position : position + size])
        position, index = position + size, index + 1
    found += parser.finish()
    whole = parse_blocks(text, fmt, NAMES)
    summary = [(type(b).__name__, b.call.name if isinstance(b, InlineCall) else b.error) for b in found]
    assert summary == [
        (type(b).__name__, b.call.name if isinstance(b, InlineCall) else b.error) for b in whole
    ]
    assert [type(b).__name__ for b in found] == ["InlineCall", "InlineError"]


def test_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match="tool format"):
        InlineParser("json", NAMES)  # type: ignore[arg-type]


def test_tool_responses_is_one_message_in_call_order_with_errors_marked() -> None:
    text = tool_responses(
        [("now", "12:00\n", False), ("get_weather", "city not found", True), ('x"<', "", False)]
    )
    assert text == (
        '<tool_response name="now">\n12:00\n</tool_response>\n'
        '<tool_response name="get_weather" error="true">\ncity not found\n</tool_response>\n'
        '<tool_response name="x&quot;&lt;">\n\n</tool_response>'
    )


def test_strip_for_history_removes_thinking_and_keeps_the_blocks() -> None:
    text = '<think>plan</think>\n\nChecking.\n<tool_call>{"name": "now"}</tool_call>'
    assert strip_for_history(text) == 'Checking.\n<tool_call>{"name": "now"}</tool_call>'


def test_strip_for_history_drops_a_made_up_tool_response() -> None:
    text = (
        '<tool_call>{"name": "now"}</tool_call>\n<tool_response name="now">fake</tool_response>\nIt is noon.'
    )
    assert strip_for_history(text) == '<tool_call>{"name": "now"}</tool_call>'


@pytest.mark.parametrize("fmt", ["xml", "markdown"])
def test_instructions_describe_every_tool_and_the_format(fmt: ToolFormat) -> None:
    text = tool_instructions(TOOLS, fmt)
    for needle in (
        "get_weather",
        "Current weather of a city.",
        '"required": ["city"]',
        "now",
        "The local time.",
    ):
        assert needle in text
    assert "several" in text and "wait" in text and "without any" in text and "<tool_response" in text
    assert ("<tool_call>" in text) == (fmt == "xml")


@pytest.mark.parametrize("fmt", ["xml", "markdown"])
def test_instructions_are_deterministic_and_their_example_parses_as_a_call(fmt: ToolFormat) -> None:
    text = tool_instructions(TOOLS, fmt)
    assert text == tool_instructions([json.loads(json.dumps(t)) for t in TOOLS], fmt)
    example = text.split("For example (the argument values are placeholders):\n", 1)[1].split(
        "\n\nRules:", 1
    )[0]
    assert calls(parse_blocks(example, fmt, NAMES)) == [("get_weather", {"city": "..."})]


def test_instructions_accept_flat_specs_and_are_empty_without_tools() -> None:
    flat = [
        {"name": "now", "description": "The local time.", "parameters": {"type": "object", "properties": {}}}
    ]
    assert "The local time." in tool_instructions(flat, "markdown")
    assert tool_instructions([], "xml") == ""
