"""A run's pieces as a Responses API response: its output items, and the events that stream them.

One ``ResponseBuilder`` serves both modes (a whole response is the streamed one without its
events), so the two cannot differ. Items, in the order the run produced them:

- the model's text between tool steps: a ``message`` item (one ``output_text`` part);
- the model's reasoning (``<think>``, ``reasoning_content``, a workflow's step lines): a
  ``reasoning`` item with one ``summary_text`` part;
- each tool **the agent** ran: an ``mcp_call`` item (``server_label`` the agent's name, ``name``,
  ``arguments``, ``output``, ``status: completed``) — a step that already happened, which no client
  runs again (openai-agents records it as a hosted call, Codex and the openai SDK show or skip it);
  resent as input, it becomes the call and its result again;
- each call of a **client** tool: a ``function_call`` item; the response then ends there.

Events: ``response.created``, ``response.in_progress``, per item ``response.output_item.added`` →
its part events and deltas → ``response.output_item.done``; then exactly one of
``response.completed`` / ``response.incomplete`` / ``response.failed`` (a failure is first an
``error`` event), each with an increasing ``sequence_number``.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence
from typing import Any

from runner.models.base import ToolCall, Usage
from runner.serve.engine import EndPiece, Piece, ReasoningPiece, TextPiece, ToolBlock, ToolRunning
from runner.serve.responses.steps import step_token
from runner.serve.sse import ContentBuilder
from runner.text import utf8

__all__ = ["ResponseBuilder", "encode_event", "encode_events", "new_id", "usage_object"]


def new_id(prefix: str) -> str:
    """An id of this API's shape (``resp_...``, ``msg_...``)."""
    return f"{prefix}_{uuid.uuid4().hex}"


#: ``json.dumps(..., ensure_ascii=False, separators=(",", ":"))`` without making an encoder for
#: each event (a stream has a dozen).
_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def encode_event(event: dict[str, Any]) -> bytes:
    """One server-sent event, named by its ``type`` as the API sends them."""
    return b"event: " + event["type"].encode() + b"\ndata: " + utf8(_JSON.encode(event)) + b"\n\n"


def encode_events(events: Sequence[dict[str, Any] | bytes]) -> bytes:
    """Events made together, as one write (fewer sends when a piece opens or closes an item); an
    event already encoded is written as it is."""
    return b"".join(event if isinstance(event, bytes) else encode_event(event) for event in events)


def usage_object(usage: Usage) -> dict[str, Any]:
    """Usage as the Responses API has it (every field the openai SDK requires)."""
    return {
        "input_tokens": usage.prompt_tokens,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": usage.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage.total_tokens or usage.prompt_tokens + usage.completion_tokens,
    }


class ResponseBuilder:
    """Builds one response from pieces; each method returns the events it adds."""

    def __init__(
        self,
        skeleton: dict[str, Any],
        *,
        label: str,
        namespaces: dict[str, str],
        carry_steps: bool = False,
    ) -> None:
        self.response = {**skeleton, "status": "in_progress", "output": []}
        self.label = label
        self.namespaces = namespaces
        #: Each step's ``mcp_call`` followed by a reasoning item carrying it (``steps.py``).
        self.carry_steps = carry_steps
        self.output: list[dict[str, Any]] = self.response["output"]
        self.content = ContentBuilder()
        #: The answer as the chat door's assistant message content (tool steps as details blocks).
        self.chat_content: list[str] = []
        self.end: EndPiece | None = None
        self._sequence = 0
        self._open: dict[str, Any] | None = None  # the message or reasoning item being streamed
        self._text: list[str] = []

    def _event(self, kind: str, **fields: Any) -> dict[str, Any]:
        event = {"type": kind, "sequence_number": self._sequence, **fields}
        self._sequence += 1
        return event

    def _snapshot(self) -> dict[str, Any]:
        """The response as it is now (items are changed in place later; their parts are replaced)."""
        return {**self.response, "output": [dict(item) for item in self.output]}

    def start(self) -> list[dict[str, Any] | bytes]:
        """``response.created`` and ``response.in_progress``, encoded (``encode_event``'s bytes):
        the response they both carry is encoded once."""
        response = utf8(_JSON.encode(self._snapshot()))
        return [
            self._with_response("response.created", response),
            self._with_response("response.in_progress", response),
        ]

    def _with_response(self, kind: str, response: bytes) -> bytes:
        """``encode_event(self._event(kind, response=...))`` with the response encoded already."""
        head = _JSON.encode(self._event(kind))  # {"type":...,"sequence_number":N}
        return (
            b"event: "
            + kind.encode()
            + b"\ndata: "
            + head[:-1].encode()
            + b',"response":'
            + response
            + b"}\n\n"
        )

    # ----------------------------------------------------------------- items

    def _add(self, item: dict[str, Any]) -> list[dict[str, Any]]:
        self.output.append(item)
        index = len(self.output) - 1
        return [self._event("response.output_item.added", output_index=index, item=dict(item))]

    def _done(self, item: dict[str, Any]) -> dict[str, Any]:
        item["status"] = "completed"
        return self._event("response.output_item.done", output_index=self.output.index(item), item=item)

    def _open_item(self, kind: str) -> list[dict[str, Any]]:
        if self._open is not None and self._open["type"] == kind:
            return []
        events = self._close()
        index = len(self.output)
        if kind == "message":
            item: dict[str, Any] = {
                "id": new_id("msg"),
                "type": "message",
                "role": "assistant",
                "status": "in_progress",
                "content": [],
            }
            events += self._add(item)
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            events.append(
                self._event(
                    "response.content_part.added",
                    item_id=item["id"],
                    output_index=index,
                    content_index=0,
                    part=part,
                )
            )
        else:
            item = {"id": new_id("rs"), "type": "reasoning", "status": "in_progress", "summary": []}
            events += self._add(item)
            part = {"type": "summary_text", "text": ""}
            events.append(
                self._event(
                    "response.reasoning_summary_part.added",
                    item_id=item["id"],
                    output_index=index,
                    summary_index=0,
                    part=part,
                )
            )
        self._open, self._text = item, []
        return events

    def _close(self) -> list[dict[str, Any]]:
        item = self._open
        if item is None:
            return []
        self._open = None
        text = "".join(self._text)
        where = {"item_id": item["id"], "output_index": self.output.index(item)}
        if item["type"] == "message":
            part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
            item["content"] = [part]
            events = [
                self._event("response.output_text.done", **where, content_index=0, text=text, logprobs=[]),
                self._event("response.content_part.done", **where, content_index=0, part=part),
            ]
        else:
            part = {"type": "summary_text", "text": text}
            item["summary"] = [part]
            events = [
                self._event("response.reasoning_summary_text.done", **where, summary_index=0, text=text),
                self._event("response.reasoning_summary_part.done", **where, summary_index=0, part=part),
            ]
        return [*events, self._done(item)]

    def feed(self, piece: Piece) -> list[dict[str, Any]]:
        """The events ``piece`` adds (an ``EndPiece`` goes to ``finish``)."""
        if isinstance(piece, TextPiece):
            self.chat_content.append(self.content.content(piece))
            if not piece.text:
                return []
            events = self._open_item("message")
            assert self._open is not None
            self._text.append(piece.text)
            where = {"item_id": self._open["id"], "output_index": len(self.output) - 1}
            return [
                *events,
                self._event(
                    "response.output_text.delta", **where, content_index=0, delta=piece.text, logprobs=[]
                ),
            ]
        if isinstance(piece, ReasoningPiece):
            if not piece.text:
                return []
            events = self._open_item("reasoning")
            assert self._open is not None
            self._text.append(piece.text)
            where = {"item_id": self._open["id"], "output_index": len(self.output) - 1}
            return [
                *events,
                self._event(
                    "response.reasoning_summary_text.delta", **where, summary_index=0, delta=piece.text
                ),
            ]
        if isinstance(piece, ToolRunning):
            return self._close()  # the text before a tool step is complete
        if isinstance(piece, ToolBlock):
            self.chat_content.append(self.content.content(piece))
            events = self._close()
            item = {
                "id": piece.call_id or new_id("mcp"),
                "type": "mcp_call",
                "server_label": self.label,
                "name": piece.name,
                "arguments": piece.arguments,
                "status": "in_progress",
            }
            events += self._add(item)
            item["output"] = piece.result
            events.append(self._done(item))
            if self.carry_steps:
                events += self._carried(item)
            return events
        return []

    def _carried(self, step: dict[str, Any]) -> list[dict[str, Any]]:
        """A reasoning item without a summary whose ``encrypted_content`` carries ``step``."""
        token = step_token(step["id"], step["name"], step["arguments"], step["output"])
        item = {"id": new_id("rs"), "type": "reasoning", "status": "in_progress", "summary": []}
        events = self._add(item)
        item["encrypted_content"] = token
        return [*events, self._done(item)]

    def _function_call(self, call: ToolCall) -> list[dict[str, Any]]:
        item: dict[str, Any] = {
            "id": new_id("fc"),
            "type": "function_call",
            "call_id": call.id,
            "name": call.name,
            "arguments": "",
            "status": "in_progress",
        }
        if call.name in self.namespaces:
            item["namespace"] = self.namespaces[call.name]
        events = self._add(item)
        where = {"item_id": item["id"], "output_index": len(self.output) - 1}
        item["arguments"] = call.arguments
        events.append(self._event("response.function_call_arguments.delta", **where, delta=call.arguments))
        events.append(
            self._event(
                "response.function_call_arguments.done", **where, name=call.name, arguments=call.arguments
            )
        )
        return [*events, self._done(item)]

    def finish(self, end: EndPiece) -> list[dict[str, Any]]:
        """The last items and the final event, from how the run ended."""
        self.end = end
        events = self._close()
        for call in end.client_calls:
            events += self._function_call(call)
        response = self.response
        response["usage"] = usage_object(end.usage)
        runner = end.runner_field()
        if runner is not None:
            response["runner"] = runner
        if end.error is not None:
            response["status"] = "failed"
            # the API's error codes are a closed list: ours (model_error, ...) is in the error event
            response["error"] = {"code": "server_error", "message": end.error.message}
            error = self._event(
                "error", code=end.error.code, message=end.error.message, param=end.error.param
            )
            return [*events, error, self._event("response.failed", response=self._snapshot())]
        response["completed_at"] = int(time.time())
        if end.outcome is not None and end.outcome.status == "limit":
            response["status"] = "incomplete"
            response["incomplete_details"] = {"reason": "max_output_tokens"}
            return [*events, self._event("response.incomplete", response=self._snapshot())]
        response["status"] = "completed"
        return [*events, self._event("response.completed", response=self._snapshot())]

    def assistant_message(self) -> dict[str, Any]:
        """The answer as a chat assistant message (what a chat client would resend)."""
        end = self.end
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.chat_content)}
        if end is not None and end.client_calls:
            message["tool_calls"] = [call.message() for call in end.client_calls]
        return message
