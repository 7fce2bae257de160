"""``/v1/responses`` against ``/v1/chat/completions`` on one ``runner serve`` (issue 25).

The same agent (the one ``bench.serve`` serves: a Python tool and an MCP stdio source, transcripts
on) on the same scripted server (a process of its own, answering at once), requests interleaved so
both endpoints see the same machine, each pair in one order then the other (a request's session
is still closing when its answer is out, and the next request pays for it: in a fixed order that
was always the same door's):

- **first byte, streamed**: median time to the first byte of a streamed answer, one request at a
  time (target: Responses within 1.1x of chat); and, of the same requests, the time until the
  client has read the whole stream (``response.completed`` and the stream's end);
- **whole answer**: median time of a request without streaming (target: within 1.1x);
- **continuing**: median time of a request continuing by ``previous_response_id`` a chain 200
  turns deep against one 2 turns deep (``store: false``, so the chains stay as they are; target:
  within 1.2x — the state at a response is one file, the chain is never replayed);
- **64 concurrent streaming clients** on each endpoint: errors (must be 0) and the p50 first byte
  (target: Responses within 1.2x of chat). The first byte is the first body bytes the client reads
  on either door: chat's first chunk (``delta.role``), the Responses door's ``response.created``
  and ``response.in_progress`` (written together); both go out before the model is called. Under
  64 streams it measures mostly how long a request waits behind the others' work — the server's
  and this client's own: one Python process driving 64 streams keeps a core busy, so the figure
  moves with the machine's load. Each of the 64 is a client of its own (one httpx client, one
  kept-alive connection: on one shared pool httpx walks every connection at each request and
  release, and that cost, which depends on when streams end, was this process's largest;
  ``--one-pool`` measures that way); a round of each kind opens the connections before the
  measured rounds. Also given: the median of the per-round ratios (each round of responses
  against the chat round before it), and the CPU time per request of the server process (all
  its threads) and of this client over those rounds (Linux: ``/proc``), steadier than any wall
  time on a shared machine.

Each timed request of the one-at-a-time parts starts 3 ms after the one before has answered
(``--pause-ms``): what a request leaves running once its answer is out — its session closing, a
stored response's record written after the answer — is then not timed with the next request,
whichever door that is (``--pause-ms 0``: back to back, as this bench ran before 2026-12-03 19:00).

Run: ``python -m bench.responses [--runs N] [--clients 64] [--deep 200] [--one-pool] [--pause-ms 3]``
(``--clients 0``: no concurrent part). The continuation is also given as the median of the
per-round ratios (each round times one continuation of each chain, one after the other), steadier
on a loaded machine.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import httpx

from bench.serve import percentile, start_runner, start_scripted

CHAT = {"model": "bench", "messages": [{"role": "user", "content": "go"}]}
RESPONSES = {"model": "bench", "input": "go"}


def _body(kind: str, stream: bool, **extra: Any) -> tuple[str, dict[str, Any]]:
    if kind == "chat":
        return "/chat/completions", {**CHAT, "stream": stream, **extra}
    return "/responses", {**RESPONSES, "stream": stream, **extra}


def _complete(kind: str, data: bytes) -> bool:
    if kind == "chat":
        return data.rstrip().endswith(b"data: [DONE]")
    return b"event: response.completed" in data


async def first_byte(
    client: httpx.AsyncClient, url: str, kind: str, whole: list[float] | None = None, **extra: Any
) -> float:
    """Seconds to the first byte of one streamed answer (read to its end; the seconds to its end
    are appended to ``whole``)."""
    path, body = _body(kind, True, **extra)
    sent = time.perf_counter()
    first = 0.0
    data = b""
    async with client.stream("POST", url + path, json=body) as response:
        async for chunk in response.aiter_raw():
            if not data:
                first = time.perf_counter() - sent
            data += chunk
    if whole is not None:
        whole.append(time.perf_counter() - sent)
    if response.status_code != 200 or not _complete(kind, data):
        raise RuntimeError(f"{kind}: {response.status_code} {data[-300:]!r}")
    return first


async def whole(client: httpx.AsyncClient, url: str, kind: str, **extra: Any) -> tuple[float, dict[str, Any]]:
    """Seconds for one answer without streaming, and its body."""
    path, body = _body(kind, False, **extra)
    sent = time.perf_counter()
    response = await client.post(url + path, json=body)
    elapsed = time.perf_counter() - sent
    if response.status_code != 200:
        raise RuntimeError(f"{kind}: {response.status_code} {response.text[:300]}")
    return elapsed, response.json()


async def seconds(answer: Awaitable[tuple[float, dict[str, Any]]]) -> float:
    """The seconds of a ``whole`` answer."""
    return (await answer)[0]


async def chain(client: httpx.AsyncClient, url: str, turns: int) -> str:
    """A stored conversation ``turns`` responses deep; its last id."""
    previous: str | None = None
    for _ in range(turns):
        extra = {"previous_response_id": previous} if previous else {}
        _, body = await whole(client, url, "responses", **extra)
        previous = body["id"]
    assert previous is not None
    return previous


async def concurrent(
    pool: Sequence[httpx.AsyncClient], url: str, kind: str, **extra: Any
) -> tuple[list[float], int]:
    """First bytes of one streamed request from each client of ``pool``, all sent at once; how
    many failed."""
    results = await asyncio.gather(
        *(first_byte(client, url, kind, **extra) for client in pool), return_exceptions=True
    )
    times = [r for r in results if isinstance(r, float)]
    for failure in [r for r in results if not isinstance(r, float)][:3]:
        print(f"{kind}: {type(failure).__name__}: {str(failure)[:300]}", file=sys.stderr)
    return times, len(results) - len(times)


def process_cpu(pid: int) -> float:
    """Seconds of CPU process ``pid`` has used, all its threads (0.0 where ``/proc`` is not)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


WIDE: tuple[tuple[str, dict[str, Any]], ...] = (
    ("chat", {}),
    ("responses", {}),
    ("unstored", {"store": False}),
)


async def wide_rounds(pool: Sequence[httpx.AsyncClient], url: str, *, runs: int, pid: int) -> dict[str, Any]:
    """A round of each kind unmeasured (connections opened), then ``runs`` rounds of each: the p50
    first byte, the median of the per-round ratios to chat, CPU per request, errors."""
    wide: dict[str, list[float]] = {kind: [] for kind, _ in WIDE}
    rounds: dict[str, list[float]] = {kind: [] for kind in wide}  # each round's p50
    cpu = {kind: [0.0, 0.0] for kind in wide}  # the server's, this client's
    errors = 0
    for measured in [False] + [True] * runs:
        for kind, extra in WIDE:
            server, own = process_cpu(pid), time.process_time()
            times, failed = await concurrent(pool, url, kind.replace("unstored", "responses"), **extra)
            errors += failed
            if not measured:
                continue
            cpu[kind][0] += process_cpu(pid) - server
            cpu[kind][1] += time.process_time() - own
            wide[kind].extend(times)
            rounds[kind].append(percentile(times, 0.5) if times else 0.0)
    ratios = {
        kind: statistics.median(r / c for r, c in zip(rounds[kind], rounds["chat"], strict=True) if c)
        for kind in ("responses", "unstored")
    }
    return {
        "p50": {kind: percentile(values, 0.5) * 1000 if values else 0.0 for kind, values in wide.items()},
        "per_round": ratios,
        "cpu_ms": {kind: [t / (runs * len(pool)) * 1000 for t in used] for kind, used in cpu.items()},
        "errors": errors,
    }


def _limits(connections: int) -> httpx.Limits:
    # idle connections are dropped well before the server's keep-alive timeout (5 s), so no request
    # goes out on a connection the server is closing (a ReadError that says nothing of the server)
    return httpx.Limits(
        max_connections=connections, max_keepalive_connections=connections, keepalive_expiry=1.0
    )


async def measure(
    url: str,
    *,
    runs: int,
    clients: int,
    deep: int,
    pid: int = 0,
    one_pool: bool = False,
    pause_s: float = 0.003,
) -> dict[str, Any]:
    keys = ("fb_chat", "fb_resp", "s_chat", "s_resp", "w_chat", "w_resp", "c_2", "c_deep", "chat_deep")
    samples: dict[str, list[float]] = {k: [] for k in keys}
    async with contextlib.AsyncExitStack() as stack:
        client = await stack.enter_async_context(
            httpx.AsyncClient(timeout=120, limits=_limits(max(clients, 2) * 2))
        )
        for kind in ("chat", "responses", "chat", "responses"):  # warm-up
            await first_byte(client, url, kind)
            await whole(client, url, kind)
        shallow, deep_id = await chain(client, url, 2), await chain(client, url, deep)
        turn = [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": "Done after 0 additions."},
        ]
        resent = {"messages": turn * deep + turn[:1]}  # the same conversation, resent to chat
        timed: dict[str, Callable[[], Awaitable[float]]] = {
            "fb_chat": lambda: first_byte(client, url, "chat", samples["s_chat"]),
            "fb_resp": lambda: first_byte(client, url, "responses", samples["s_resp"]),
            "w_chat": lambda: seconds(whole(client, url, "chat")),
            "w_resp": lambda: seconds(whole(client, url, "responses")),
            "c_2": lambda: seconds(
                whole(client, url, "responses", previous_response_id=shallow, store=False)
            ),
            "c_deep": lambda: seconds(
                whole(client, url, "responses", previous_response_id=deep_id, store=False)
            ),
            "chat_deep": lambda: seconds(whole(client, url, "chat", **resent)),
        }
        for round_ in range(runs * 10):
            # each pair in both orders, a round each: what a request leaves running when its answer
            # is out (its session closing) falls on the next one, and that is either door's turn
            for pair in (("fb_chat", "fb_resp"), ("w_chat", "w_resp"), ("c_2", "c_deep"), ("chat_deep",)):
                for key in pair if round_ % 2 == 0 else pair[::-1]:
                    await asyncio.sleep(pause_s)  # what the request before left running ends first
                    samples[key].append(await timed[key]())
        wide: dict[str, Any] = {"p50": {}, "per_round": {}, "cpu_ms": {}, "errors": 0}
        if clients:
            # each client its own connection (httpx's pool walks every connection it holds at each
            # request and release: 64 streams on one pool cost this process more than the server)
            pool = [client] * clients
            if not one_pool:
                made = (httpx.AsyncClient(timeout=120, limits=_limits(1)) for _ in range(clients))
                pool = [await stack.enter_async_context(each) for each in made]
            wide = await wide_rounds(pool, url, runs=runs, pid=pid)
    medians = {key: statistics.median(values) * 1000 for key, values in samples.items()}
    paired = [deep / shallow for deep, shallow in zip(samples["c_deep"], samples["c_2"], strict=True)]
    return {"medians": medians, "paired": statistics.median(paired), **wide}


def verdict(ratio: float, target: float) -> str:
    return "ok" if ratio <= target else f"over {target}x"


def main(argv: list[str]) -> int:
    """Run the benchmark; 0 when every request succeeded."""
    parser = argparse.ArgumentParser(prog="python -m bench.responses")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--deep", type=int, default=200)
    parser.add_argument(
        "--one-pool", action="store_true", help="the concurrent clients share one httpx pool (as before)"
    )
    parser.add_argument(
        "--pause-ms",
        type=float,
        default=3.0,
        help="idle time before each timed request, so the previous one's leftovers (its session "
        "closing, its record's write) are not timed with it (default 3; 0: back to back, as before)",
    )
    args = parser.parse_args(argv)
    scripted, scripted_url = start_scripted(1)
    with tempfile.TemporaryDirectory() as tmp:
        process, url = start_runner(Path(tmp), scripted_url, limits=f"max_turns: {args.deep + 100}")
        log: list[str] = []  # its access lines, read as they come (a full pipe would stall the server)
        assert process.stderr is not None
        threading.Thread(target=lambda: log.extend(process.stderr or ()), daemon=True).start()
        try:
            result = asyncio.run(
                measure(
                    url,
                    runs=args.runs,
                    clients=args.clients,
                    deep=args.deep,
                    pid=process.pid,
                    one_pool=args.one_pool,
                    pause_s=args.pause_ms / 1000,
                )
            )
        finally:
            process.terminate()
            process.wait(timeout=15)
            scripted.communicate(timeout=15)
    for line in [line for line in log if " 200 " not in line][:5]:
        print("server:", line.rstrip(), file=sys.stderr)
    m, p50 = result["medians"], result["p50"]
    fb, w, c = m["fb_resp"] / m["fb_chat"], m["w_resp"] / m["w_chat"], m["c_deep"] / m["c_2"]
    wide = p50["responses"] / p50["chat"] if p50.get("chat") else 0.0  # none with --clients 0
    lines = [
        f"## runner serve: /v1/responses against /v1/chat/completions (medians of {args.runs * 10})",
        f"streamed, first byte      chat {m['fb_chat']:6.2f} ms  responses {m['fb_resp']:6.2f} ms  "
        f"{fb:.2f}x  {verdict(fb, 1.1)}",
        f"streamed, whole stream    chat {m['s_chat']:6.2f} ms  responses {m['s_resp']:6.2f} ms  "
        f"{m['s_resp'] / m['s_chat']:.2f}x",
        f"whole answer              chat {m['w_chat']:6.2f} ms  responses {m['w_resp']:6.2f} ms  "
        f"{w:.2f}x  {verdict(w, 1.1)}",
        f"continue after 2 / {args.deep:<4}    {m['c_2']:6.2f} ms  / {m['c_deep']:6.2f} ms  "
        f"{c:.2f}x  {verdict(c, 1.2)}",
        f"  the same, median of the {args.runs * 10} paired ratios        {result['paired']:.2f}x  "
        f"{verdict(result['paired'], 1.2)}",
        f"  chat with those {args.deep} turns resent       {m['chat_deep']:6.2f} ms  "
        f"(responses {m['c_deep'] / m['chat_deep']:.2f}x of it)",
    ]
    if args.clients:
        lines += [
            f"{args.clients} concurrent streams   p50 first byte chat {p50['chat']:6.1f} ms  responses "
            f"{p50['responses']:6.1f} ms  {wide:.2f}x  {verdict(wide, 1.2)}; errors {result['errors']}",
            f"  the same with store: false          responses {p50['unstored']:6.1f} ms  "
            f"{p50['unstored'] / p50['chat']:.2f}x",
            f"  median of the {args.runs} per-round ratios    "
            f"responses {result['per_round']['responses']:.2f}x  "
            f"store: false {result['per_round']['unstored']:.2f}x",
            "  CPU per request, server / this client: "
            + "  ".join(f"{kind} {s:.2f} / {c:.2f} ms" for kind, (s, c) in result["cpu_ms"].items()),
        ]
    print("\n".join(lines))
    summary = {"medians_ms": m, "p50_ms": p50, "cpu_ms": result["cpu_ms"], "errors": result["errors"]}
    print(json.dumps(summary), file=sys.stderr)
    return 0 if result["errors"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
