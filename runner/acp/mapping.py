"""What the ACP door translates, as pure functions: a prompt's content blocks into the input text,
the loop's events into ``session/update``s, the ``todo`` toolset's list into a ``plan``, and a run's
end into a ``stopReason``.

``EventMapper`` is one prompt turn's translator: it remembers which tool calls the editor has been
told about, so each call gets exactly one ``tool_call`` and then ``tool_call_update``s.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any, Literal

from acp import helpers
from acp.schema import (
    AgentMessageChunk,
    AgentPlanUpdate,
    AgentThoughtChunk,
    EmbeddedResourceContentBlock,
    PlanEntry,
    ResourceContentBlock,
    TextContentBlock,
    TextResourceContents,
    ToolCallProgress,
    ToolCallStart,
    ToolCallStatus,
    ToolKind,
)

from runner.errors import LimitReached, RunnerError
from runner.session.conversation import NOTE_PREFIX
from runner.session.events import (
    AnswerDraft,
    AssistantMessage,
    LoopEvent,
    ReasoningChunk,
    TextChunk,
    ToolFinished,
    ToolStarted,
)
from runner.session.outcome import Outcome
from runner.tools.base import Tool

__all__ = [
    "EventMapper",
    "StopReason",
    "UnsupportedContent",
    "Update",
    "plan_of",
    "prompt_text",
    "replay_updates",
    "stop_reason",
    "tool_kind",
    "tool_title",
]

StopReason = Literal["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"]
Update = AgentMessageChunk | AgentThoughtChunk | ToolCallStart | ToolCallProgress | AgentPlanUpdate

#: The limits that are about tokens (``max_tokens``); every other limit is ``max_turn_requests``.
_TOKEN_LIMITS = frozenset({"max_tokens", "context_tokens"})
#: Longest title a tool call gets in the editor.
_TITLE_CHARS = 80


class UnsupportedContent(RunnerError):
    """A prompt carries a content block this agent cannot take (the editor gets it as invalid params)."""


def prompt_text(blocks: Sequence[Any]) -> str:
    """The input text of a prompt's content blocks: text as it is, a resource link as a mention
    (``[name](uri)``), an embedded text resource as a fenced block under its URI. Images, audio and
    binary resources are refused (``UnsupportedContent`` naming the block and its place)."""
    parts: list[str] = []
    for index, block in enumerate(blocks):
        if isinstance(block, TextContentBlock):
            parts.append(block.text)
        elif isinstance(block, ResourceContentBlock):
            parts.append(f"[{block.name or block.uri}]({block.uri})")
        elif isinstance(block, EmbeddedResourceContentBlock) and isinstance(
            block.resource, TextResourceContents
        ):
            parts.append(f"{block.resource.uri}:\n```\n{block.resource.text}\n```")
        else:
            kind = getattr(block, "type", type(block).__name__)
            what = "a binary resource" if kind == "resource" else f"{kind} content"
            raise UnsupportedContent(
                f"prompt[{index}]: this agent takes text, resource links and text resources, not {what}",
                hint="send the prompt as text (the agent's prompt capabilities say what it takes)",
            )
    text = "\n\n".join(part for part in parts if part)
    if not text.strip():
        raise UnsupportedContent("the prompt is empty: give it some text")
    return text


def stop_reason(
    outcome: Outcome, *, limit: LimitReached | None, finish_reason: str | None, cancelled: bool
) -> StopReason:
    """The ``stopReason`` of a prompt turn that ended in ``outcome`` (not an error: that is a
    JSON-RPC error), with the limit that ended it, the model's last ``finish_reason`` and whether
    the editor cancelled it."""
    if cancelled or outcome.status == "interrupted":
        return "cancelled"
    if outcome.status == "limit":
        return "max_tokens" if limit is not None and limit.limit in _TOKEN_LIMITS else "max_turn_requests"
    if finish_reason == "length":
        return "max_tokens"
    if finish_reason == "content_filter":
        return "refusal"
    return "end_turn"


def tool_kind(tool: Tool | None) -> ToolKind:
    """The ACP kind of a tool (how the editor draws it), from its toolset and name."""
    if tool is None or tool.source_kind != "builtin":
        return "other"
    if tool.source_id == "shell":
        return "execute"
    if tool.source_id == "fetch":
        return "fetch"
    if tool.source_id == "todo":
        return "think"
    if tool.source_id == "files":
        if tool.name.endswith(("_write", "_append", "_edit")):
            return "edit"
        if tool.name.endswith(("_search", "_list")):
            return "search"
        return "read"
    return "other"


def tool_title(name: str, arguments: dict[str, Any]) -> str:
    """A one-line title: the tool's name and its arguments, shortened."""
    shown = ", ".join(f"{key}={json.dumps(value, ensure_ascii=False)}" for key, value in arguments.items())
    title = f"{name}({shown})"
    return title if len(title) <= _TITLE_CHARS else title[: _TITLE_CHARS - 1] + "…"


_TODO_LINE = re.compile(r"^#(?P<id>\d+) \[(?P<status>pending|in_progress|done)\] (?P<text>.+)$")
_PLAN_STATUS = {"pending": "pending", "in_progress": "in_progress", "done": "completed"}


def plan_of(result_text: str) -> list[PlanEntry] | None:
    """The plan a ``todo`` tool's answer shows (every todo tool answers with the whole list as
    ``#id [status] text`` lines); None when the answer is not a whole list."""
    if "The todo list is empty." in result_text:
        return []
    entries = []
    for line in result_text.splitlines():
        match = _TODO_LINE.match(line)
        if match:
            status = _PLAN_STATUS[match["status"]]
            entries.append(helpers.plan_entry(match["text"], status=status))  # type: ignore[arg-type]
    return entries or None


class EventMapper:
    """One prompt turn's events → ``session/update``s (``updates(event)``), calls announced once."""

    def __init__(self, lookup: Callable[[str], Tool | None]) -> None:
        self._lookup = lookup
        self._announced: set[str] = set()
        self._finished: set[str] = set()
        #: The last reply's ``finish_reason`` (what ``stop_reason`` reads).
        self.finish_reason: str | None = None

    def announce(
        self, call_id: str, name: str, arguments: dict[str, Any], status: ToolCallStatus
    ) -> ToolCallStart | None:
        """The ``tool_call`` of a call the editor does not know yet (None when it does)."""
        if call_id in self._announced:
            return None
        self._announced.add(call_id)
        return helpers.start_tool_call(
            call_id,
            tool_title(name, arguments),
            kind=tool_kind(self._lookup(name)),
            status=status,
            raw_input=arguments,
        )

    def updates(self, event: LoopEvent) -> list[Update]:
        """What the editor is told of ``event`` (nothing for most bookkeeping events)."""
        if isinstance(event, TextChunk | AnswerDraft):
            return [helpers.update_agent_message_text(event.text)] if event.text else []
        if isinstance(event, ReasoningChunk):
            return [helpers.update_agent_thought_text(event.text)] if event.text else []
        if isinstance(event, AssistantMessage):
            self.finish_reason = event.finish_reason
            found: list[Update] = []
            for call in event.message.get("tool_calls") or ():
                function = call.get("function", {})
                start = self.announce(call["id"], function.get("name", "?"), _arguments(function), "pending")
                if start is not None:
                    found.append(start)
            return found
        if isinstance(event, ToolStarted):
            start = self.announce(event.call_id, event.name, event.arguments, "in_progress")
            if start is not None:
                return [start]
            return [helpers.update_tool_call(event.call_id, status="in_progress", raw_input=event.arguments)]
        if isinstance(event, ToolFinished):
            return self._finished_call(event)
        return []

    def _finished_call(self, event: ToolFinished) -> list[Update]:
        result = event.result
        if result.call_id in self._finished:
            return []
        self._finished.add(result.call_id)
        found: list[Update] = []
        start = self.announce(result.call_id, result.name, result.arguments or {}, "pending")
        if start is not None:
            found.append(start)
        content = [helpers.tool_content(helpers.text_block(result.content))]
        status: ToolCallStatus = "failed" if result.is_error else "completed"
        found.append(
            helpers.update_tool_call(
                result.call_id, status=status, content=content, raw_output=result.content
            )
        )
        tool = self._lookup(result.name)
        if (
            tool is not None
            and tool.source_kind == "builtin"
            and tool.source_id == "todo"
            and not result.is_error
        ):
            entries = plan_of(result.content)
            filtered = tool.original_name == "todo_list" and (result.arguments or {}).get("status")
            if entries is not None and not filtered:  # a list filtered by status is not the whole plan
                found.append(helpers.update_plan(entries))
        return found


def _arguments(function: dict[str, Any]) -> dict[str, Any]:
    raw = function.get("arguments")
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw or "{}")
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def replay_updates(history: Sequence[dict[str, Any]]) -> list[Any]:
    """A saved conversation as the updates that show it again (``session/load``): the user's
    messages, the agent's, and each tool call with its result. The runner's own notes to the model
    are not shown."""
    found: list[Any] = []
    names: dict[str, str] = {}
    for message in history:
        role, content = message.get("role"), message.get("content")
        text = content if isinstance(content, str) else _joined(content)
        if role == "user" and text and not text.startswith(NOTE_PREFIX):
            found.append(helpers.update_user_message_text(text))
        elif role == "assistant":
            if text:
                found.append(helpers.update_agent_message_text(text))
            for call in message.get("tool_calls") or ():
                function = call.get("function", {})
                names[call["id"]] = name = function.get("name", "?")
                arguments = _arguments(function)
                found.append(
                    helpers.start_tool_call(
                        call["id"], tool_title(name, arguments), status="pending", raw_input=arguments
                    )
                )
        elif role == "tool" and message.get("tool_call_id") in names:
            result = [helpers.tool_content(helpers.text_block(text))]
            found.append(
                helpers.update_tool_call(str(message["tool_call_id"]), status="completed", content=result)
            )
    return found


def _joined(content: Any) -> str:
    if not isinstance(content, list):
        return ""
    return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
