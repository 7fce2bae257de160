"""The values that cross the Model protocol."""

from __future__ import annotations

import pytest

from runner.models.base import (
    Completed,
    ReasoningDelta,
    Reply,
    TextDelta,
    ToolCall,
    ToolCallReady,
    Usage,
    events_of,
    says_streaming_unsupported,
)


def test_usage_adds_tokens_and_keeps_cost_unknown_until_one_is_known() -> None:
    assert Usage(1, 2, 3) + Usage(10, 20, 30) == Usage(11, 22, 33, None)
    assert (Usage(1, 1, 2, 0.5) + Usage(1, 1, 2)).cost_usd == 0.5
    assert (Usage(cost_usd=0.25) + Usage(cost_usd=0.5)).cost_usd == 0.75


def test_reply_message_without_tool_calls_has_text_content_only() -> None:
    reply = Reply(content="Hi", reasoning="secret thoughts")
    assert reply.message() == {"role": "assistant", "content": "Hi"}
    assert Reply(content=None).message() == {"role": "assistant", "content": ""}


def test_reply_message_with_tool_calls_is_in_openai_format() -> None:
    reply = Reply(
        content=None, tool_calls=(ToolCall("c1", "weather", '{"city": "Oslo"}'), ToolCall("c2", "now", ""))
    )
    assert reply.message() == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "weather", "arguments": '{"city": "Oslo"}'},
            },
            {"id": "c2", "type": "function", "function": {"name": "now", "arguments": "{}"}},
        ],
    }


def test_events_of_a_complete_reply_end_with_completed() -> None:
    call = ToolCall("c1", "f", "{}")
    reply = Reply(content="text", tool_calls=(call,), reasoning="why")
    assert events_of(reply) == [
        ReasoningDelta("why"),
        TextDelta("text"),
        ToolCallReady(0, call),
        Completed(reply),
    ]


@pytest.mark.parametrize(
    "message",
    [
        "Streaming is not supported for this model",
        "stream is not supported",
        "This model does not support streaming.",
        "Unsupported value: 'stream' does not support true with this model.",
        "streaming unsupported",
    ],
)
def test_stream_refusals_are_recognised(message: str) -> None:
    assert says_streaming_unsupported(message)


@pytest.mark.parametrize(
    "message", ["Error while streaming: connection reset", "invalid api key", "tools not supported"]
)
def test_other_errors_are_not_stream_refusals(message: str) -> None:
    assert not says_streaming_unsupported(message)
