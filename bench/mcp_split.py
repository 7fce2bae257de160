"""Where an MCP ``tools/call`` spends the server's time, against a chat completion (issue 26).

The ``runner serve`` app runs in this process (httpx's ASGI transport, no sockets between client and
server; the scripted model in a process of its own). One chat completion and one 2026-07-28
``tools/call`` (the one POST it is on the wire) take turns; for each, the event loop thread's CPU
time (``time.thread_time``, which leaves out the threads and the model's process) is taken:

- **chat completion**: the whole request, through the app's middleware;
- **/mcp**: the whole request; of it, **the SDK's handle_request** (the ``mcp`` SDK's session
  manager: JSON-RPC parsing and validation, the 2026 request's checks, its dispatch, the result's
  serialization) and, inside that, **runner's McpCalls.call** (the arguments, the run, the answer).

So ``/mcp`` less the SDK's part is runner's door (authorize, the middleware both share), and
``McpCalls.call`` against the chat completion is what runner's MCP code adds to the same run.
Reported: medians per call (the first 20 calls left out).

With ``--parts``, the steps of the SDK's 2026-07-28 entry are timed the same way, each where it
runs (between two runs, so with the caches the run left: several times what a loop of the step
alone takes): the envelope's validation, the classification of its ``_meta`` and headers, the
per-request ``Connection``, the params' two validations, the result's dump and sieve, the reply's
serialization. They are the SDK's own (private) functions, wrapped for the run: what runner could
only skip by answering the protocol itself. A step a later SDK no longer has is left out.

Run: ``python -m bench.mcp_split [--calls N] [--parts]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

from bench.mcp_server import AGENT, QUESTION, RAW_CALL, RAW_HEADERS, start_scripted

WARM = 20
MAIN = ("chat completion", "/mcp", "the SDK's handle_request", "runner's McpCalls.call")


def _timed(samples: list[float], method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    async def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.thread_time()
        try:
            return await method(*args, **kwargs)
        finally:
            samples.append(time.thread_time() - start)

    return timed


#: The SDK's steps ``--parts`` times: (module, attribute path, label).
PARTS = (
    ("mcp_types", "JSONRPCRequest.model_validate", "the envelope (JSONRPCRequest)"),
    ("mcp.server._streamable_http_modern", "classify_inbound_request", "_meta and headers classified"),
    ("mcp.server._streamable_http_modern", "find_duplicated_routing_header", "routing headers checked"),
    ("mcp.server.connection", "Connection.from_envelope", "the request's Connection"),
    ("mcp.server.runner", "_extract_meta", "_meta validated (RequestParams)"),
    ("mcp_types.methods", "validate_client_request", "params against the version's surface"),
    ("mcp_types", "CallToolRequestParams.model_validate", "params again (the handler's model)"),
    ("runner.serve.mcp.server", "_result", "runner's CallToolResult"),
    ("mcp.server.runner", "_dump_result", "results dumped (twice a call)"),
    ("mcp_types.methods", "serialize_server_result", "the result's sieve (validate, dump)"),
    ("mcp.server.runner", "aclose_shielded", "the Connection's exit stack"),
    ("mcp.server._streamable_http_modern", "_write", "the reply (dump, json.dumps, send)"),
    ("runner.serve.mcp.door", "wants_json", "runner: JSON or a stream"),
)


def _wrap_parts(samples: dict[str, list[float]]) -> None:
    """Time each of ``PARTS`` where it runs (a classmethod stays one; calls of subclasses are not counted)."""
    import importlib
    import inspect

    for module_name, path, label in PARTS:
        owner: Any = importlib.import_module(module_name)
        *outer, name = path.split(".")
        for part in outer:
            owner = getattr(owner, part, None)
        raw = inspect.getattr_static(owner, name, None) if owner is not None else None
        if raw is None:
            continue
        bound = isinstance(raw, classmethod)
        function = raw.__func__ if bound else raw
        kept = samples.setdefault(label, [])
        if inspect.iscoroutinefunction(function):
            wrapped = _timed(kept, function)
        else:
            wrapped = _timed_sync(kept, function, only=owner if bound else None)
        setattr(owner, name, classmethod(wrapped) if bound else wrapped)


def _timed_sync(samples: list[float], function: Callable[..., Any], *, only: Any) -> Callable[..., Any]:
    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.thread_time()
        try:
            return function(*args, **kwargs)
        finally:
            if only is None or args[0] is only:
                samples.append(time.thread_time() - start)

    return timed


async def measure(folder: Path, home: Path, calls: int, *, parts: bool = False) -> dict[str, list[float]]:
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    from runner.runtime import RuntimeSettings
    from runner.serve.app import create_app
    from runner.serve.catalog import load_catalog
    from runner.serve.mcp.calls import McpCalls
    from runner.serve.reload import CatalogHolder

    samples: dict[str, list[float]] = {k: [] for k in MAIN}
    if parts:
        _wrap_parts(samples)
    McpCalls.call = _timed(samples["runner's McpCalls.call"], McpCalls.call)  # type: ignore[method-assign]
    manager = StreamableHTTPSessionManager
    manager.handle_request = _timed(samples["the SDK's handle_request"], manager.handle_request)  # type: ignore[method-assign]
    app = create_app(CatalogHolder([folder], load_catalog([folder])), settings=RuntimeSettings(home=home))

    async def outer(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await app(scope, receive, send)
        start = time.thread_time()
        try:
            return await app(scope, receive, send)
        finally:
            name = "chat completion" if scope["path"].startswith("/v1/") else "/mcp"
            samples[name].append(time.thread_time() - start)

    body = {"model": "oneshot", "messages": [{"role": "user", "content": QUESTION}]}
    transport = httpx.ASGITransport(app=outer, client=("127.0.0.1", 5000))
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000", timeout=60) as http,
    ):
        for _ in range(calls + WARM):
            chat = await http.post("/v1/chat/completions", json=body)
            assert chat.json()["choices"][0]["message"]["content"] == "42", chat.text
            tool = await http.post("/mcp", json=RAW_CALL, headers=RAW_HEADERS)
            assert tool.json()["result"]["content"][0]["text"] == "42", tool.text
    return {name: values[WARM:] for name, values in samples.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.mcp_split", description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300, help="calls of each (default 300)")
    parser.add_argument("--parts", action="store_true", help="also time the SDK's steps (see above)")
    options = parser.parse_args(argv)
    os.environ["SCRIPTED_API_KEY"] = "sk-test"
    scripted, base = start_scripted()
    try:
        with tempfile.TemporaryDirectory() as workdir:
            folder = Path(workdir) / "agents"
            folder.mkdir()
            (folder / "oneshot.yaml").write_text(AGENT.format(base=base), encoding="utf-8")
            samples = asyncio.run(measure(folder, Path(workdir) / "home", options.calls, parts=options.parts))
    finally:
        assert scripted.stdin is not None
        scripted.stdin.close()
        scripted.wait(timeout=10)
    medians = {name: statistics.median(values) for name, values in samples.items() if values}
    chat = medians["chat completion"]
    print("## the event loop's CPU per call (runner serve in process)")
    for name in MAIN:
        print(f"{name:<40} {medians[name] * 1000:6.2f} ms  {medians[name] / chat:.2f}x")
    sdk = medians["the SDK's handle_request"] - medians["runner's McpCalls.call"]
    print(f"{'the SDK alone (handle_request less the call)':<40} {sdk * 1000:6.2f} ms")
    if options.parts:
        print("## its steps, where they run (median of each, times how often a call has it)")
        calls = len(samples["/mcp"])
        total = 0.0
        for name, values in samples.items():
            if name not in MAIN and values:
                each = medians[name] * round(len(values) / calls)
                total += each
                print(f"{name:<40} {each * 1e6:6.0f} us")
        print(f"{'all of them':<40} {total * 1e6:6.0f} us")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
