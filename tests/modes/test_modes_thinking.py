"""``<think>`` blocks: kept out of the visible text, whole or streamed (SPEC section 8, ``inline``)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runner.modes.thinking import ThinkingFilter, split_thinking


def stream(text: str, sizes: list[int] | None = None) -> tuple[str, str, list[tuple[str, str]]]:
    """Feed ``text`` in pieces (one character each by default); the joined output and every step's."""
    sizes = sizes or [1]
    think = ThinkingFilter()
    steps: list[tuple[str, str]] = []
    position = index = 0
    while position < len(text):
        size = max(1, sizes[index % len(sizes)])
        steps.append(think.feed(text[position : position + size]))
        position += size
        index += 1
    steps.append(think.finish())
    return "".join(v for v, _ in steps), "".join(t for _, t in steps), steps


def test_split_removes_think_block_and_returns_its_text() -> None:
    assert split_thinking("<think>\nThe user wants the time.\n</think>\n\nIt is noon.") == (
        "It is noon.",
        "The user wants the time.",
    )


def test_split_without_think_block_leaves_text_unchanged() -> None:
    assert split_thinking("  plain answer\n") == ("  plain answer\n", "")


def test_unclosed_think_at_end_counts_as_thinking() -> None:
    assert split_thinking("Answer first. <think>still reasoning about") == (
        "Answer first. ",
        "still reasoning about",
    )


def test_close_tag_without_open_tag_means_the_template_opened_it() -> None:
    assert split_thinking("reasoning here\n</think>\n\nThe answer.") == ("The answer.", "reasoning here")


def test_several_think_blocks_are_joined_by_a_newline() -> None:
    visible, thinking = split_thinking("<think>one</think>A <think> two </think>B")
    assert (visible, thinking) == ("A B", "one\ntwo")


def test_empty_think_block_of_a_non_thinking_turn_leaves_no_trace() -> None:
    assert split_thinking("<think>\n\n</think>\n\nHi") == ("Hi", "")


def test_text_that_only_looks_like_the_start_of_a_tag_stays_visible() -> None:
    assert split_thinking("a <thin ice> and <th") == ("a <thin ice> and <th", "")
    visible, thinking, _ = stream("a <thin ice> and <th")
    assert (visible, thinking) == ("a <thin ice> and <th", "")


def test_tags_split_across_deltas_are_recognised() -> None:
    text = "<think>plan: call the clock</think>It is noon."
    visible, thinking, steps = stream(text)
    assert (visible, thinking) == ("It is noon.", "plan: call the clock")
    assert all("<" not in v and ">" not in v for v, _ in steps)  # no piece of a tag leaks out


def test_visible_text_arrives_as_soon_as_it_is_unambiguous() -> None:
    think = ThinkingFilter()
    assert think.feed("<think>x</think>Hel") == ("Hel", "x")
    assert think.feed("lo <") == ("lo ", "")  # "<" may begin a tag: held back
    assert think.feed("b>") == ("<b>", "")


def test_in_thinking_follows_the_tags() -> None:
    think = ThinkingFilter()
    think.feed("<thi")
    assert not think.in_thinking
    think.feed("nk>abc")
    assert think.in_thinking
    think.feed("</think>")
    assert not think.in_thinking


def test_filter_can_start_inside_a_block() -> None:
    think = ThinkingFilter(thinking=True)
    assert think.feed("reason</think>answer") == ("answer", "reason")


@pytest.mark.parametrize(
    "text",
    [
        "<think>\nA\n\nB\n</think>\n\nDone.",
        "Intro <think>x</think> outro <think>y",
        "\n\n<think>a</think>\n  b",
        "no tags at all",
        "<think></think><think>  </think>tail",
    ],
)
def test_streamed_result_equals_whole_split_for_any_chunking(text: str) -> None:
    expected = split_thinking(text)
    for sizes in ([1], [2], [3, 1], [5], [len(text) or 1]):
        visible, thinking, _ = stream(text, sizes)
        assert (visible, thinking) == expected, sizes


@settings(max_examples=150, deadline=None)
@given(
    parts=st.lists(
        st.sampled_from(["<think>", "</think>", "a", " ", "\n", "<", "th", "k>", "b c"]), max_size=14
    ),
    sizes=st.lists(st.integers(1, 6), min_size=1, max_size=5),
)
def test_chunking_never_changes_the_split(parts: list[str], sizes: list[int]) -> None:
    text = "".join(parts)
    if "</think>" in text and not (0 <= text.find("<think>") < text.find("</think>")):
        text = "<think>" + text  # a leading close tag is a one-shot-only rule
    assert stream(text, sizes)[:2] == split_thinking(text)
