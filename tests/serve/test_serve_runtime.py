"""``runner serve`` keeps one runtime per agent and drives ``Session.run`` like every other front door."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.serve.watch_common import wait_until_watching

FAKE_MCP = Path(__file__).resolve().parent.parent / "tools_mcp" / "fake_mcp_server.py"


def test_an_mcp_stdio_server_starts_once_for_many_requests(
    scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any], tmp_path: Path
) -> None:
    log = tmp_path / "initialize.log"
    server = scripted(
        [
            {"tool_calls": [{"name": "echo", "arguments": {"text": "one"}}]},
            {"content": "first"},
            {"tool_calls": [{"name": "echo", "arguments": {"text": "two"}}]},
            {"content": "second"},
            {"content": "third"},
        ]
    )
    tools = (
        "tools:\n"
        f"  - mcp: {{command: {sys.executable}, args: [{FAKE_MCP}], env: {{FAKE_MCP_LOG: {log}}}}}\n"
        "    id: fake\n"
        "    include: [echo]\n"
    )
    agent_files.write("mcpuser", server, tools)
    client = serve_app([agent_files.root]).openai()
    answers = [
        client.chat.completions.create(model="mcpuser", messages=[{"role": "user", "content": text}])
        for text in ("a", "b", "c")
    ]
    assert [a.choices[0].message.content.rsplit("\n", 1)[-1] for a in answers] == ["first", "second", "third"]
    assert len(log.read_text().splitlines()) == 1  # one process, one initialize, for three requests


def test_an_inline_agent_sends_the_tool_instructions_on_every_request_of_a_conversation(
    scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any]
) -> None:
    server = scripted([{"content": "one"}, {"content": "two"}])
    tools = 'def add(a: int, b: int) -> int:\n    """Add two integers."""\n    return a + b\n'
    agent_files.write("blocks", server, "function_calling: inline\nprompts:\n  system: You add.", tools=tools)
    client = serve_app([agent_files.root]).openai()
    client.chat.completions.create(model="blocks", messages=[{"role": "user", "content": "hi"}])
    client.chat.completions.create(
        model="blocks",
        messages=[
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "one"},
            {"role": "user", "content": "again"},
        ],
    )
    first, second = (r["messages"][0] for r in server.requests)
    assert first == second
    assert first["content"].startswith("You add.") and "<tool_call>" in first["content"]
    assert "tools" not in server.requests[1]


def test_messages_a_hook_queues_run_within_the_same_request(
    scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any], tmp_path: Path
) -> None:
    server = scripted([{"content": "Draft answer."}, {"content": "Reviewed answer."}])
    agent_files.write(
        "reviewer",
        server,
        "limits:\n  max_turns: 2\nhooks:\n  turn_post:\n    - message: Review your answer.\n",
    )
    client = serve_app([agent_files.root]).openai()
    answer = client.chat.completions.create(model="reviewer", messages=[{"role": "user", "content": "go"}])
    content = answer.choices[0].message.content or ""
    assert content.startswith("Draft answer.\n\nReviewed answer.")
    assert len(server.requests) == 2
    assert server.requests[1]["messages"][-1] == {"role": "user", "content": "Review your answer."}
    assert "dropped a queued message from turn_post hook" in content  # the third, over max_turns, is said


def test_a_tool_source_that_fails_to_reopen_on_reload_keeps_the_old_runtime(
    scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any]
) -> None:
    import time

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        if body["messages"][-1]["role"] == "user":
            return {"tool_calls": [{"name": "version", "arguments": {}}]}
        return {"content": f"tool said {body['messages'][-1]['content']}"}

    server = scripted(reply)
    tools = 'def version() -> str:\n    """Which version runs."""\n    return "v1"\n'
    agent_files.write("sturdy", server, "prompts:\n  system: Steady.", tools=tools)
    lines: list[str] = []
    served = serve_app([agent_files.root], watch=True, report=lines.append)
    client = served.openai()
    first = client.chat.completions.create(model="sturdy", messages=[{"role": "user", "content": "v?"}])
    assert (first.choices[0].message.content or "").endswith("tool said v1")  # the runtime is built
    wait_until_watching(agent_files.root, lines)  # an edit before the watcher started would be missed
    module = next(agent_files.root.glob("serve_tools_*.py"))
    module.write_text("raise RuntimeError('half-saved file')\n", encoding="utf-8")
    deadline = time.monotonic() + 10
    while not any("half-saved file" in line for line in lines):
        assert time.monotonic() < deadline, f"no error line: {lines}"
        time.sleep(0.02)
    failures = [line for line in lines if "half-saved file" in line]
    assert len(failures) == 1 and "keeping the last good config" in failures[0]
    again = client.chat.completions.create(model="sturdy", messages=[{"role": "user", "content": "v?"}])
    assert (again.choices[0].message.content or "").endswith("tool said v1")  # the old runtime answers


def test_two_user_messages_in_a_row_are_one_turn(
    scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any]
) -> None:
    server = scripted([{"content": "both read"}])
    agent_files.write("reader", server, "prompts:\n  system: Read.")
    client = serve_app([agent_files.root]).openai()
    answer = client.chat.completions.create(
        model="reader",
        messages=[{"role": "user", "content": "first"}, {"role": "user", "content": "second"}],
    )
    assert answer.choices[0].message.content == "both read"
    [request] = server.requests
    assert [m["content"] for m in request["messages"]] == ["Read.", "first", "second"]
