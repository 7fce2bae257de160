"""A run's pieces as OpenAI chat-completion chunks (seed 002) or as one ``chat.completion``.

Streaming rules: the first chunk carries ``delta.role = "assistant"``; text arrives as
``delta.content``; each tool the agent executed is a ``<details type="tool_calls" done="true">``
block inside the content, on a line of its own; the agent's own calls never appear as
``delta.tool_calls``. Only calls of the client's tools do, in the last chunk but one, and then the
answer ends with ``finish_reason: "tool_calls"``; otherwise with ``"stop"``. ``finish_reason`` is
set exactly once, on the last choice chunk; a usage chunk (no choices) follows when asked, then
``data: [DONE]``. A run whose answer had to be JSON (``output:``, ``response_format``) and failed
ends instead with OpenAI's error event, ``data: {"error": {...}}``, then ``[DONE]``: the openai SDK
raises it as an ``APIError`` (a note in the content would be read as the answer).

Beside OpenAI's fields, the last choice chunk and a ``chat.completion`` carry ``runner``: the run's
``status`` (``ok``, ``stopped``, ``limit``, ``interrupted``, ``error``), ``reason``, ``exit_code`` and
``session_id``, read from the same ``Outcome`` every door reads (clients ignore unknown fields).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from runner.models.base import ToolCall, Usage
from runner.serve.details import render_details
from runner.serve.engine import EndPiece, Piece, ReasoningPiece, TextPiece, ToolBlock
from runner.serve.protocol import ApiError
from runner.text import utf8

__all__ = [
    "DONE",
    "ChunkWriter",
    "ContentBuilder",
    "collect_completion",
    "completion",
    "encode",
    "stream_chunks",
    "stream_events",
    "usage_dict",
    "wire_calls",
]

DONE = b"data: [DONE]\n\n"


def encode(chunk: dict[str, Any]) -> bytes:
    """One server-sent event holding ``chunk`` as compact JSON (valid UTF-8, whatever its text holds)."""
    return b"data: " + utf8(json.dumps(chunk, ensure_ascii=False, separators=(",", ":"))) + b"\n\n"


def usage_dict(usage: Usage) -> dict[str, int]:
    """Usage in OpenAI's shape."""
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
    }


def wire_calls(calls: tuple[ToolCall, ...]) -> list[dict[str, Any]]:
    """Client tool calls as ``delta.tool_calls`` items (with their ``index``)."""
    return [{"index": index, **call.message()} for index, call in enumerate(calls)]


class ContentBuilder:
    """Turns pieces into message content: text as is, each tool as a details block on its own line."""

    def __init__(self) -> None:
        self._at_line_start = True

    def content(self, piece: Piece) -> str:
        """The content ``piece`` adds (empty for pieces that add none)."""
        if isinstance(piece, TextPiece):
            if piece.text:
                self._at_line_start = piece.text.endswith("\n")
            return piece.text
        if isinstance(piece, ToolBlock):
            block = render_details(piece)
            if not self._at_line_start:
                block = "\n" + block
            self._at_line_start = True
            return block
        return ""


class ChunkWriter:
    """The chunks of one streamed answer: one id, one creation time, one model."""

    def __init__(self, model: str, *, include_usage: bool = False) -> None:
        self.id = f"chatcmpl-{uuid.uuid4().hex}"
        self.created = int(time.time())
        self.model = model
        self.include_usage = include_usage
        # A text delta's event is this chunk with the text's JSON in the middle (the bytes
        # ``encode`` would write, in a sixth of its time: most of a stream's events are text).
        head, _, tail = encode(self.chunk({"content": ""})).partition(b'"content":""')
        self._text_frame = (head + b'"content":', tail)

    def text_event(self, text: str) -> bytes:
        """``encode(self.chunk({"content": text}))``, made from the frame."""
        head, tail = self._text_frame
        return head + utf8(json.dumps(text, ensure_ascii=False)) + tail

    def chunk(self, delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        """A ``chat.completion.chunk`` with one choice."""
        chunk: dict[str, Any] = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
        }
        if self.include_usage:
            chunk["usage"] = None
        return chunk

    def usage_chunk(self, usage: Usage) -> dict[str, Any]:
        """The chunk ``stream_options.include_usage`` asks for: no choices, the usage."""
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [],
            "usage": usage_dict(usage),
        }


async def stream_chunks(pieces: AsyncIterator[Piece], writer: ChunkWriter) -> AsyncIterator[dict[str, Any]]:
    """The chunks of a streamed answer (without the final ``[DONE]``)."""
    async for chunk in _chunks(pieces, writer):
        yield writer.chunk({"content": chunk}) if isinstance(chunk, str) else chunk


async def stream_events(pieces: AsyncIterator[Piece], writer: ChunkWriter) -> AsyncIterator[bytes]:
    """The server-sent events of a streamed answer, ``[DONE]`` last: ``stream_chunks`` encoded."""
    async for chunk in _chunks(pieces, writer):
        yield writer.text_event(chunk) if isinstance(chunk, str) else encode(chunk)
    yield DONE


async def _chunks(pieces: AsyncIterator[Piece], writer: ChunkWriter) -> AsyncIterator[str | dict[str, Any]]:
    """``stream_chunks``, with each text delta as its text (each caller makes its chunk)."""
    builder = ContentBuilder()
    yield writer.chunk({"role": "assistant", "content": ""})
    async for piece in pieces:
        if isinstance(piece, ReasoningPiece):
            if piece.text:
                yield writer.chunk({"reasoning_content": piece.text})
            continue
        if isinstance(piece, EndPiece):
            if piece.error is not None and piece.structured:
                yield piece.error.body()  # the answer had to be JSON: no finish, OpenAI's error event
                return
            if piece.client_calls:
                yield writer.chunk({"tool_calls": wire_calls(piece.client_calls)})
            last = writer.chunk({}, piece.finish_reason)
            runner = piece.runner_field()
            if runner is not None:
                last["runner"] = runner
            yield last
            if writer.include_usage:
                yield writer.usage_chunk(piece.usage)
            return
        text = builder.content(piece)
        if text:
            yield text


async def collect_completion(pieces: AsyncIterator[Piece], *, model: str) -> dict[str, Any]:
    """The whole answer as one ``chat.completion``; a failed run raises its ``ApiError``."""
    builder = ContentBuilder()
    content: list[str] = []
    reasoning: list[str] = []
    async for piece in pieces:
        if isinstance(piece, ReasoningPiece):
            reasoning.append(piece.text)
        elif isinstance(piece, EndPiece):
            if piece.error is not None:
                raise piece.error
            return completion(model, "".join(content), piece, reasoning="".join(reasoning))
        else:
            content.append(builder.content(piece))
    raise ApiError(500, "the run ended without an answer", type="server_error", retry=False)


def completion(model: str, content: str, end: EndPiece, *, reasoning: str = "") -> dict[str, Any]:
    """A ``chat.completion`` body."""
    message: dict[str, Any] = {"role": "assistant", "content": content or (None if end.client_calls else "")}
    if end.client_calls:
        message["tool_calls"] = [call.message() for call in end.client_calls]
    if reasoning:
        message["reasoning_content"] = reasoning
    body: dict[str, Any] = {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": end.finish_reason}],
        "usage": usage_dict(end.usage),
    }
    runner = end.runner_field()
    if runner is not None:
        body["runner"] = runner
    return body
