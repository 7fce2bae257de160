"""A streamed answer's text events are the bytes ``encode`` writes for the chunk, made from a frame.

``ChunkWriter.text_event`` fills a prepared frame with the text's JSON instead of encoding the
whole chunk on every event; whatever the text, the model name or the usage option, the bytes are
the same as before, and the stream of events equals ``stream_chunks`` encoded, ``[DONE]`` last.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from runner.models.base import Usage
from runner.serve.engine import EndPiece, Piece, TextPiece
from runner.serve.sse import DONE, ChunkWriter, encode, stream_chunks, stream_events

TEXTS = [
    "word ",
    "",
    'quotes " and \\ backslashes, \n newlines, \t tabs, \x00 nul',
    '"content":"" inside the text, and </script>',
    "unicode: é 中文 🙂",
    "a lone surrogate: \ud800 here",
]
MODELS = ["talker", 'odd "model" \\ "content":""', "模型"]


@pytest.mark.parametrize("include_usage", [False, True])
@pytest.mark.parametrize("model", MODELS)
def test_a_text_event_is_the_encoded_chunk(model: str, include_usage: bool) -> None:
    writer = ChunkWriter(model, include_usage=include_usage)
    for text in TEXTS:
        event = writer.text_event(text)
        assert event == encode(writer.chunk({"content": text}))
        chunk = json.loads(event.removeprefix(b"data: ").decode("utf-8"))
        assert chunk["choices"][0]["delta"] == {"content": text.replace("\ud800", "\ufffd")}
        assert chunk["model"] == model


async def _pieces() -> AsyncIterator[Piece]:
    for text in TEXTS:
        yield TextPiece(text)
    yield EndPiece(finish_reason="stop", usage=Usage(3, 4, 7))


async def test_the_events_are_the_chunks_encoded_then_done() -> None:
    writer = ChunkWriter("talker", include_usage=True)
    events = [event async for event in stream_events(_pieces(), writer)]
    chunks = [encode(chunk) async for chunk in stream_chunks(_pieces(), writer)]
    assert events == [*chunks, DONE]
    assert len(chunks) == 1 + len([t for t in TEXTS if t]) + 2  # role, texts, finish, usage
