"""What one streamed text event costs ``runner serve``'s event loop to make and send (issue 28).

The ``/metrics`` bench relays ~3,000 chunks a second on one event loop; what each costs there is
time the loop cannot spend answering a scrape. This measures, in one process and in alternate
rounds, a stream of text events made and sent through sse-starlette's response into an ASGI
``send`` that does nothing:

- before: each chunk built as a dict and encoded whole (``stream_chunks`` + ``encode``), sent by
  ``EventSourceResponse`` (a ``move_on_after`` cancel scope around each send);
- after: ``stream_events`` (the text's JSON in a prepared frame), sent by the app's ``_Events``
  (no scope when sends have no timeout).

Run: ``python -m bench.telemetry_events [--runs N] [--events N]``; it fails unless "after" is faster
and both sent the same bytes.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from bench.common import paired_ratios
from runner.models.base import Usage
from runner.serve.app import _Events
from runner.serve.engine import EndPiece, Piece, TextPiece
from runner.serve.sse import DONE, ChunkWriter, encode, stream_chunks, stream_events

SCOPE = {"type": "http", "method": "POST", "path": "/v1/chat/completions", "headers": []}


async def _pieces(events: int) -> AsyncIterator[Piece]:
    for _ in range(events):
        yield TextPiece("word ")
    yield EndPiece(finish_reason="stop", usage=Usage(3, 4, 7))


async def _before(events: int) -> AsyncIterator[bytes]:
    async for chunk in stream_chunks(_pieces(events), ChunkWriter("talker")):
        yield encode(chunk)
    yield DONE


async def _after(events: int) -> AsyncIterator[bytes]:
    async for event in stream_events(_pieces(events), ChunkWriter("talker")):
        yield event


async def _one(response: Any) -> tuple[float, int]:
    """Seconds to send ``response`` whole into a ``send`` that counts its bytes."""
    sent = 0
    disconnect = asyncio.Event()

    async def receive() -> dict[str, Any]:
        await disconnect.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal sent
        sent += len(message.get("body", b""))

    started = time.perf_counter()
    await response(SCOPE, receive, send)
    took = time.perf_counter() - started
    disconnect.set()
    return took, sent


def _round(make: Callable[[int], Any], events: int) -> tuple[float, int]:
    return asyncio.run(_one(make(events)))


def main(argv: list[str] | None = None) -> int:
    from sse_starlette import EventSourceResponse

    parser = argparse.ArgumentParser(
        prog="python -m bench.telemetry_events", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--runs", type=int, default=9, help="rounds of before / after (default 9)")
    parser.add_argument("--events", type=int, default=5000, help="text events a round (default 5000)")
    args = parser.parse_args(argv)
    kinds: dict[str, Callable[[int], Any]] = {
        "before: dict + encode, EventSourceResponse": lambda n: EventSourceResponse(_before(n), sep="\n"),
        "after: prepared frame, _Events": lambda n: _Events(_after(n), sep="\n"),
    }
    samples: dict[str, list[float]] = {name: [] for name in kinds}
    sizes: dict[str, int] = {}
    for make in kinds.values():
        _round(make, 200)  # warm
    for _ in range(args.runs):
        for name, make in kinds.items():
            took, sizes[name] = _round(make, args.events)
            samples[name].append(took / args.events)
    floor = next(iter(kinds))
    ratios = paired_ratios(samples, floor)
    print(f"## one streamed text event, made and sent ({args.events} a round, median of {args.runs})")
    for name, values in samples.items():
        print(f"{name:<46} {statistics.median(values) * 1e6:8.2f} us  {ratios[name]:5.2f}x")
    same = len(set(sizes.values())) == 1
    print(f"{'the same bytes sent':<46} {'yes' if same else 'NO'}")
    after = list(kinds)[1]
    return 0 if same and ratios[after] < 1.0 else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
