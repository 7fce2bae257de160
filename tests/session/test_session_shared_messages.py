"""A restored history's messages stay the very dicts they were restored from only when nothing can
change a message in place (``Runtime.shares_messages``); the conversation itself never does."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.agentfile import load_agent
from runner.models.factory import make_model
from runner.models.resilient import ResilientModel
from runner.runtime import RuntimeSettings
from runner.session import Session, runtime_host
from runner.session.context import message_chars
from runner.session.conversation import Conversation, Restored, restored_part, shared
from runner.testing import ScriptedModel

MESSAGES = [
    {"role": "user", "content": "one"},
    {"role": "assistant", "content": "a" * 50},
    {"role": "user", "content": "two"},
]


def _part() -> tuple[list[dict[str, str]], Restored]:
    messages = [dict(m) for m in MESSAGES]
    return messages, shared(restored_part(messages, {}))


def test_restored_messages_are_copied_unless_told_they_may_be_shared() -> None:
    messages, part = _part()
    copied, kept = Conversation(), Conversation()
    copied.restore_parts([part])
    kept.restore_parts([part], copy=False)
    assert copied.history == kept.history == MESSAGES
    assert all(a is not b for a, b in zip(copied.history, messages, strict=True))
    assert all(a is b for a, b in zip(kept.history, messages, strict=True))


def test_cutting_the_last_message_replaces_it_and_leaves_the_restored_one_as_it_was() -> None:
    messages, part = _part()
    conversation = Conversation()
    conversation.restore_parts([part], copy=False)
    conversation.history.append(conversation.history.pop(1))  # the long answer last
    assert conversation.cut_last(10, "cut") == 40
    assert conversation.history[-1]["content"].startswith("a" * 10 + "\n[cut: 40 more characters cut]")
    assert messages[1]["content"] == "a" * 50, "the restored dict is not changed"
    assert conversation.chars == sum(message_chars(m) for m in conversation.history)


def _agent(tmp_path: Path, model: str, hooks: str = "") -> Path:
    path = tmp_path / "agent.yaml"
    (tmp_path / "shared_hooks.py").write_text("def seen(event):\n    return None\n")
    path.write_text(f"version: 1\nname: shared\nmodel:\n{model}\n" + hooks)
    return path


FAST = "  id: openai/scripted\n  api_base: http://127.0.0.1:9/v1\n  api_key: ${NO_SUCH_KEY:-sk-x}"
LITELLM = "  id: anthropic/claude-3-5-haiku-latest\n  api_key: ${NO_SUCH_KEY:-sk-x}"


@pytest.mark.parametrize(
    ("model", "hooks", "shares"),
    [
        (FAST, "", True),
        (FAST, "hooks:\n  turn_pre:\n    - command: 'true'\n", True),
        (FAST, "hooks:\n  session_end:\n    - python: shared_hooks:seen\n", False),
        (LITELLM, "", False),
        (FAST + "\n  fallbacks: [anthropic/claude-3-5-haiku-latest]", "", False),
    ],
    ids=["httpx path", "a command hook", "a python hook", "litellm", "a litellm fallback"],
)
async def test_a_runtime_shares_messages_only_when_nothing_can_change_them(
    tmp_path: Path, model: str, hooks: str, shares: bool
) -> None:
    config = load_agent(_agent(tmp_path, model, hooks), env={})
    host = runtime_host(config, RuntimeSettings(home=tmp_path / "home"))
    session = await Session.open(host, follow=False)
    try:
        assert session.runtime.shares_messages is shares
    finally:
        await session.close()
        await host.aclose()


async def test_a_model_that_does_not_say_it_keeps_messages_is_taken_to_change_them(tmp_path: Path) -> None:
    config = load_agent(_agent(tmp_path, FAST), env={})
    host = runtime_host(config, RuntimeSettings(home=tmp_path / "home"), model=ScriptedModel([]))
    session = await Session.open(host, follow=False)
    try:
        assert session.runtime.shares_messages is False
    finally:
        await session.close()
        await host.aclose()
    assert config.model is not None
    fast = make_model(config.model)
    assert isinstance(fast, ResilientModel) and fast.keeps_messages is True
