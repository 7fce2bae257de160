"""The ACP door's translations, in process: content blocks → input, events → updates, the todo list
→ a plan, an outcome → a ``stopReason``, the editor's folder and MCP servers → a session's sources."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from acp import (
    audio_block,
    embedded_blob_resource,
    image_block,
    resource_block,
    resource_link_block,
    text_block,
)
from acp.schema import AcpMcpServer, HttpHeader, HttpMcpServer, McpServerStdio, TextResourceContents

from runner.acp.mapping import (
    EventMapper,
    UnsupportedContent,
    plan_of,
    prompt_text,
    replay_updates,
    stop_reason,
)
from runner.acp.sessions import session_config
from runner.agentfile.files import load_agent
from runner.errors import ConfigError, LimitReached
from runner.session.conversation import NOTE_PREFIX
from runner.session.events import AssistantMessage, TextChunk, ToolFinished, ToolStarted
from runner.session.outcome import Outcome
from runner.tools.base import RunContext, Tool, ToolResult
from runner.tools.toolset import ToolsetContext
from toolsets import todo


def test_text_links_and_text_resources_become_the_input() -> None:
    blocks = [
        text_block("Explain"),
        resource_link_block("main.py", "file:///p/main.py"),
        resource_block(TextResourceContents(uri="file:///p/a.txt", text="alpha")),
    ]
    assert (
        prompt_text(blocks) == "Explain\n\n[main.py](file:///p/main.py)\n\nfile:///p/a.txt:\n```\nalpha\n```"
    )


@pytest.mark.parametrize(
    ("block", "what"),
    [
        (image_block("AAAA", "image/png"), "image content"),
        (audio_block("AAAA", "audio/wav"), "audio content"),
        (resource_block(embedded_blob_resource("file:///p/x.bin", "AAAA")), "a binary resource"),
    ],
)
def test_content_the_agent_cannot_take_is_refused_naming_its_place(block: Any, what: str) -> None:
    with pytest.raises(UnsupportedContent) as caught:
        prompt_text([text_block("look"), block])
    assert caught.value.message.startswith("prompt[1]:") and caught.value.message.endswith(what)


def test_an_empty_prompt_is_refused() -> None:
    with pytest.raises(UnsupportedContent, match="empty"):
        prompt_text([text_block("  ")])


@pytest.mark.parametrize(
    ("outcome", "limit", "finish", "cancelled", "expected"),
    [
        (Outcome("ok"), None, "stop", False, "end_turn"),
        (Outcome("stopped", "declined"), None, "tool_calls", False, "end_turn"),
        (Outcome("ok"), None, "stop", True, "cancelled"),
        (Outcome("interrupted", "interrupted"), None, None, False, "cancelled"),
        (Outcome("limit", "limit"), LimitReached("x", limit="max_tokens"), None, False, "max_tokens"),
        (
            Outcome("limit", "max_steps"),
            LimitReached("x", limit="max_steps"),
            None,
            False,
            "max_turn_requests",
        ),
        (Outcome("limit", "limit"), LimitReached("x", limit="timeout_s"), None, False, "max_turn_requests"),
        (Outcome("limit", "repeat"), None, None, False, "max_turn_requests"),
        (Outcome("ok"), None, "length", False, "max_tokens"),
        (Outcome("ok"), None, "content_filter", False, "refusal"),
    ],
)
def test_stop_reasons(outcome: Outcome, limit: Any, finish: Any, cancelled: bool, expected: str) -> None:
    assert stop_reason(outcome, limit=limit, finish_reason=finish, cancelled=cancelled) == expected


async def test_the_todo_toolsets_own_answers_read_as_a_plan() -> None:
    tools = {t.name: t for t in todo.build({"max_items": 10}, ToolsetContext(base_dir=Path()))}
    run = RunContext(session_id="s", agent="a")
    await tools["todo_add"].call({"text": "write tests"}, run)
    await tools["todo_add"].call({"text": "ship"}, run)
    answer = await tools["todo_update"].call({"id": 1, "status": "done"}, run)
    assert [(e.content, e.status) for e in plan_of(answer) or []] == [
        ("write tests", "completed"),
        ("ship", "pending"),
    ]
    removed = await tools["todo_remove"].call({"id": 1}, run)
    removed = await tools["todo_remove"].call({"id": 2}, run)
    assert plan_of(removed) == []
    assert plan_of("something else") is None


def _tool(name: str, source: str = "files") -> Tool:
    async def call(arguments: dict[str, Any], run: RunContext) -> str:
        return ""

    return Tool(name=name, description="", parameters={}, source_kind="builtin", source_id=source, call=call)


def _kinds(updates: list[Any]) -> list[tuple[str, str | None]]:
    return [(u.session_update, getattr(u, "status", None)) for u in updates]


def test_a_call_is_announced_once_whichever_event_comes_first() -> None:
    tools = {"files_read": _tool("files_read"), "files_write": _tool("files_write")}
    mapper = EventMapper(tools.get)
    eager = mapper.updates(ToolStarted("c1", "files_read", {"path": "a"}))
    call = {"id": "c2", "function": {"name": "files_write", "arguments": '{"path": "b"}'}}
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    later = mapper.updates(AssistantMessage(message, "tool_calls"))
    started = mapper.updates(ToolStarted("c2", "files_write", {"path": "b"}))
    done = mapper.updates(ToolFinished(ToolResult("c2", "files_write", "oops", is_error=True)))
    assert _kinds(eager) == [("tool_call", "in_progress")] and eager[0].kind == "read"
    assert _kinds(later) == [("tool_call", "pending")] and later[0].kind == "edit"
    assert later[0].raw_input == {"path": "b"}
    assert _kinds(started) == [("tool_call_update", "in_progress")]
    assert _kinds(done) == [("tool_call_update", "failed")] and done[0].raw_output == "oops"
    assert mapper.finish_reason == "tool_calls"


def test_a_refused_call_that_never_started_is_announced_and_failed() -> None:
    mapper = EventMapper(lambda name: None)
    updates = mapper.updates(ToolFinished(ToolResult("c9", "shell", "Denied.", is_error=True, arguments={})))
    assert _kinds(updates) == [("tool_call", "pending"), ("tool_call_update", "failed")]
    assert updates[0].kind == "other"
    assert mapper.updates(TextChunk("")) == []


def test_a_saved_history_replays_without_the_runners_notes() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "files_read", "arguments": '{"path": "a"}'}}
    history = [
        {"role": "user", "content": "read a"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "alpha"},
        {"role": "assistant", "content": "It says alpha."},
        {"role": "user", "content": NOTE_PREFIX + "The turn was stopped: interrupted."},
    ]
    updates = replay_updates(history)
    assert _kinds(updates) == [
        ("user_message_chunk", None),
        ("tool_call", "pending"),
        ("tool_call_update", "completed"),
        ("agent_message_chunk", None),
    ]


AGENT = """\
version: 1
name: rooted
model: openai/gpt-4o-mini
tools:
  - builtin: files
    with: {root: work}
  - builtin: shell
    with: {cwd: /abs/elsewhere}
  - builtin: time
"""


def test_the_editors_folder_roots_files_and_shell_and_its_servers_are_added(tmp_path: Path) -> None:
    (tmp_path / "agent.yaml").write_text(AGENT, encoding="utf-8")
    config = load_agent(tmp_path / "agent.yaml")
    assert session_config(config, cwd=config.directory) is config
    project = tmp_path / "project"
    stdio = McpServerStdio(name="local", command="/bin/tool", args=["--serve"], env=[])
    http = HttpMcpServer(
        type="http", name="web", url="http://127.0.0.1:9/mcp", headers=[HttpHeader(name="A", value="b")]
    )
    derived = session_config(config, cwd=project, servers=[stdio, http])
    files, shell, clock, local, web = derived.tools
    assert files.base_dir == shell.base_dir == project and clock.base_dir == config.directory
    assert (local.kind, local.id, local.mcp and local.mcp.command, local.mcp and local.mcp.args) == (
        "mcp",
        "local",
        "/bin/tool",
        ("--serve",),
    )
    assert local.mcp is not None and local.mcp.cwd == project
    assert web.mcp is not None and (web.mcp.url, web.headers) == ("http://127.0.0.1:9/mcp", {"A": "b"})


def test_an_mcp_server_kind_the_runner_cannot_reach_is_refused(tmp_path: Path) -> None:
    (tmp_path / "agent.yaml").write_text(AGENT, encoding="utf-8")
    config = load_agent(tmp_path / "agent.yaml")
    with pytest.raises(ConfigError, match=r"mcpServers\[0\]: acp MCP servers are not supported"):
        session_config(config, cwd=tmp_path, servers=[AcpMcpServer(type="acp", name="x", server_id="1")])
