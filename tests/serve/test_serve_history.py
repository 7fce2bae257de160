"""Details blocks (render and find again) and the request's messages as a real history."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from runner.agentfile.config import AgentConfig, LimitsConfig, ModelConfig
from runner.serve.details import ToolBlock, render_details, split_content
from runner.serve.history import UNANSWERED, parse_conversation
from runner.serve.protocol import ApiError, model_params, parse_chat_request, request_limits
from runner.session.options import lowered_limits

TRICKY = ToolBlock(
    "call_<1>", 'na"me', '{"q": "<b> & \\"x\\" \'y\'", "n": "é"}', "line one\n<tag a=\"1\"> & 'two' é"
)


def wrap(text: str) -> dict[str, Any]:
    return {"role": "user", "content": f"[{text}]"}


def test_a_rendered_block_is_found_again_with_the_same_values(check_pipe: Any) -> None:
    block = render_details(TRICKY)
    content, _, _ = check_pipe([block, {"choices": [{"delta": {}, "finish_reason": "stop"}]}])
    assert "\n<summary>Tool Executed</summary>\n" in content
    assert split_content(f"before {block}after") == ["before ", TRICKY, "after"]


def test_running_blocks_are_dropped_and_foreign_blocks_are_read() -> None:
    running = (
        '<details type="tool_calls" done="false" id="c1" name="x" arguments="{}">\n'
        "<summary>Executing...</summary>\n</details>\n"
    )
    webui = (
        '<details type="tool_calls" done="true" id="c2" name="y" arguments="{&quot;a&quot;: 1}" '
        'result="&quot;ok&quot;">\n<summary>Tool Executed</summary>\n</details>\n'
    )
    plain = (
        '<details type="tool_calls" done="true" id="c3" name="z" arguments="{}">\n'
        '<summary>Tool Executed</summary>\n{"k": [1, 2]}\n</details>'
    )
    assert split_content(running + webui + plain) == [
        ToolBlock("c2", "y", '{"a": 1}', "ok"),
        ToolBlock("c3", "z", "{}", '{"k": [1, 2]}'),
    ]


def test_an_answer_with_blocks_becomes_steps_with_calls_and_results() -> None:
    first = render_details(ToolBlock("c1", "add", '{"a": 1}', "2"))
    second = render_details(ToolBlock("c2", "mul", "{}", "6"))
    third = render_details(ToolBlock("c3", "sub", "{}", "0"))
    messages = [
        {"role": "system", "content": "Client rules."},
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": f"Step one.\n{first}{second}Step two.\n{third}Done."},
        {"role": "developer", "content": [{"type": "text", "text": "Be brief."}]},
        {"role": "user", "content": [{"type": "text", "text": "again"}]},
    ]
    conversation = parse_conversation(messages)
    assert conversation.text == "again"
    history = conversation.history(wrap)
    assert history == [
        {"role": "system", "content": "Client rules."},
        {"role": "user", "content": "[go]"},
        {
            "role": "assistant",
            "content": "Step one.",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}},
                {"id": "c2", "type": "function", "function": {"name": "mul", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "2"},
        {"role": "tool", "tool_call_id": "c2", "content": "6"},
        {
            "role": "assistant",
            "content": "Step two.",
            "tool_calls": [{"id": "c3", "type": "function", "function": {"name": "sub", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c3", "content": "0"},
        {"role": "assistant", "content": "Done."},
        {"role": "system", "content": "Be brief."},
    ]
    assert conversation.names == {"c1": "add", "c2": "mul", "c3": "sub"}


def test_client_calls_join_the_last_step_and_results_follow_in_call_order() -> None:
    own = render_details(ToolBlock("own", "add", "{}", "3"))
    messages = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": f"Working.\n{own}",
            "tool_calls": [
                {"id": "c_a", "type": "function", "function": {"name": "a", "arguments": "{}"}},
                {"id": "c_b", "type": "function", "function": {"name": "b", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "c_b", "content": "B"},
    ]
    conversation = parse_conversation(messages)
    assert conversation.text is None  # the run goes on from the tool results
    history = conversation.history(wrap)
    assert [c["id"] for c in history[1]["tool_calls"]] == ["own", "c_a", "c_b"]
    assert [(m["tool_call_id"], m["content"]) for m in history[2:]] == [
        ("own", "3"),
        ("c_a", UNANSWERED),
        ("c_b", "B"),
    ]


def test_a_last_user_message_with_an_image_stays_in_the_history() -> None:
    parts = [{"type": "text", "text": "what is this?"}, {"type": "image_url", "image_url": {"url": "data:,"}}]
    conversation = parse_conversation([{"role": "user", "content": parts}])
    assert conversation.text is None
    assert conversation.history(wrap) == [{"role": "user", "content": parts}]


@pytest.mark.parametrize(
    "messages",
    [
        [{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "x", "content": "?"}],
        [
            {"role": "assistant", "content": None, "tool_calls": [{"id": "a", "function": {"name": "f"}}]},
            {"role": "tool", "tool_call_id": "other", "content": "?"},
        ],
        [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "prefill"}],
        [{"role": "system", "content": "only rules"}],
    ],
    ids=["orphan-result", "result-for-another-call", "ends-with-assistant", "ends-with-system"],
)
def test_conversations_a_provider_would_reject_are_400(messages: list[dict[str, Any]]) -> None:
    with pytest.raises(ApiError) as caught:
        parse_conversation(messages)
    assert caught.value.status == 400


def test_request_values_only_lower_the_agents() -> None:
    spec = AgentConfig(
        name="a",
        path=Path("a.yaml"),
        model=ModelConfig(id="m", temperature=0.3, max_tokens=100),
        limits=LimitsConfig(max_steps=5, timeout_s=None),
    )
    body = {"model": "a", "messages": [{"role": "user", "content": "hi"}]}
    higher = parse_chat_request(
        {**body, "temperature": 1.0, "max_tokens": 900, "limits": {"max_steps": 50, "timeout_s": 9}}
    )
    assert model_params(spec, higher) == {"temperature": 0.3, "max_tokens": 100}
    assert dataclasses.astuple(lowered_limits(spec.limits, request_limits(higher)))[:1] == (5,)
    # the agent had none: any value lowers it
    assert lowered_limits(spec.limits, request_limits(higher)).timeout_s == 9
    lower = parse_chat_request(
        {**body, "temperature": 0.1, "max_completion_tokens": 10, "limits": {"max_steps": 2}}
    )
    assert model_params(spec, lower) == {"temperature": 0.1, "max_tokens": 10}
    assert lowered_limits(spec.limits, request_limits(lower)).max_steps == 2
    assert model_params(spec, parse_chat_request(body)) == {}
    assert lowered_limits(spec.limits, request_limits(parse_chat_request(body))) is spec.limits
