"""The Starlette app of ``runner serve`` (SPEC sections 11 and 15).

``GET /health``, ``GET /v1/models`` (one model per agent, and one per team file's workflow),
``GET /v1/models/{id}`` and ``POST /v1/chat/completions`` (streamed or not; a workflow model runs
the workflow once, ``workflow_run.py``). Every error is answered in OpenAI's shape.
Safety: ``Authorization: Bearer KEY`` against the configured keys (constant-time comparison;
with no keys only loopback clients are answered, and the CLI binds nothing else), a request body
limit (413), per-request parameters that only lower the agent's, and a client that goes away
(mid-stream or while waiting for a whole answer) cancels its run, which releases its tools.

Against hostile clients (SPEC section 15; ``guard.py``, ``request.py``, ``server.py``): a chat
request must be ``application/json`` (415 otherwise: a web page cannot send one without a CORS
preflight), its body must arrive within ``body_timeout_s`` (408), it is decoded and turned into
history in a worker thread (the event loop keeps answering), and it may hold at most
``max_messages`` messages (413). ``HostGuard`` refuses unexpected ``Host`` and ``Origin`` headers;
allowed origins get CORS.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from runner.modes.structured import prepare_wire
from runner.runtime.settings import RuntimeSettings
from runner.serve.catalog import Catalog, ServedAgent, ServedWorkflow
from runner.serve.dispatch import open_request_run
from runner.serve.doors import open_doors
from runner.serve.engine import RequestRun
from runner.serve.guard import HostGuard, is_loopback, normalize_origin
from runner.serve.history import ChatHistory
from runner.serve.http import JSON, Events, read_body, require_json, unless_disconnected
from runner.serve.metrics import ServeTelemetry
from runner.serve.outward import outward
from runner.serve.protocol import ApiError, ChatRequest
from runner.serve.reload import CatalogHolder
from runner.serve.request import DEFAULT_MAX_MESSAGES, read_chat
from runner.serve.sse import ChunkWriter, collect_completion, stream_events
from runner.serve.state import DEFAULT_BODY_TIMEOUT_S, DEFAULT_MAX_BODY_BYTES, ServeState, ignore_report

__all__ = [
    "DEFAULT_BODY_TIMEOUT_S",
    "DEFAULT_MAX_BODY_BYTES",
    "ServeState",
    "create_app",
    "is_loopback",
]


#: Bodies up to this size are decoded on the event loop (linear time, well under a millisecond).
_INLINE_DECODE_BYTES = 64 * 1024


def _model_card(served: ServedAgent | ServedWorkflow) -> dict[str, Any]:
    """What ``/v1/models`` says of one model; its description with secrets masked (``outward``)."""
    card: dict[str, Any] = {
        "id": served.name,
        "object": "model",
        "created": served.created,
        "owned_by": "runner",
    }
    if isinstance(served, ServedWorkflow):
        secrets = frozenset().union(*(config.secrets for config in served.configs.values()))
        card["description"] = outward(served.description(), secrets)
    elif served.config.description:
        card["description"] = outward(served.config.description, served.config.secrets)
    return card


async def _stream(run: RequestRun, writer: ChunkWriter) -> AsyncIterator[bytes]:
    try:
        async for event in stream_events(run.pieces(), writer):
            yield event
    finally:
        if not run.delivered:  # the client went away: stop the agent and release its tools
            run.cancel()
            with anyio.CancelScope(shield=True):
                await run.wait_closed()


async def _complete(request: Request, run: RequestRun, model: str) -> Response:
    body = await unless_disconnected(request.receive, run, collect_completion(run.pieces(), model=model))
    if body is None:
        return Response(status_code=499)  # nobody is there to read it
    return JSON(body)


def _request_run(
    holder: CatalogHolder,
    chat: ChatRequest,
    history: ChatHistory,
    *,
    report: Callable[[str], None],
    tool_details: bool,
) -> RequestRun:
    """The run of the request's model: its workflow, or an agent's turn (404: neither)."""
    return open_request_run(holder, chat, history, report=report, tool_details=tool_details)


def create_app(
    catalog: CatalogHolder | Catalog,
    *,
    settings: RuntimeSettings,
    api_keys: Sequence[str] = (),
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S,
    max_messages: int = DEFAULT_MAX_MESSAGES,
    allowed_origins: Sequence[str] = (),
    allowed_hosts: Sequence[str] = (),
    tool_details: bool = True,
    watch: bool = False,
    report: Callable[[str], None] = ignore_report,
) -> Starlette:
    """The ASGI app serving ``catalog``'s agents; ``watch`` swaps in reloaded agent files.

    Each agent's runtime is built on its first request and kept until the app stops. Without
    ``api_keys`` (or with ``allowed_hosts``) only requests for a loopback ``Host`` (or one of
    ``allowed_hosts``) are answered; requests from a browser origin only if ``allowed_origins``
    names it.
    """
    holder = catalog if isinstance(catalog, CatalogHolder) else CatalogHolder([], catalog)
    holder.configure(settings, report)
    state = ServeState(
        holder,
        api_keys=tuple(k for k in api_keys if k),
        max_body_bytes=max_body_bytes,
        body_timeout_s=body_timeout_s,
        max_messages=max_messages,
        watch=watch,
        report=report,
        tool_details=tool_details,
    )

    authorize = state.authorize

    async def health(request: Request) -> Response:
        return JSON({"status": "ok", "models": len(holder.current.names())})

    async def list_models(request: Request) -> Response:
        authorize(request)
        current = holder.current
        cards = [_model_card(agent) for agent in current.agents.values()]
        cards += [_model_card(workflow) for workflow in current.workflows.values()]
        return JSON({"object": "list", "data": cards})

    async def get_model(request: Request) -> Response:
        authorize(request)
        name = request.path_params["model_id"]
        served = holder.get(name) or holder.workflow(name)
        if served is None:
            raise ApiError(404, f"The model '{name}' does not exist", param="model", code="model_not_found")
        return JSON(_model_card(served))

    async def chat_completions(request: Request) -> Response:
        authorize(request)
        require_json(request)
        raw = await read_body(request, state.max_body_bytes, state.body_timeout_s)
        if len(raw) <= _INLINE_DECODE_BYTES:  # microseconds: a thread hand-off would cost more
            chat, history = read_chat(raw, max_messages=state.max_messages)
        else:  # linear, but a 4 MB history is tens of ms: off the event loop
            chat, history = await anyio.to_thread.run_sync(
                lambda: read_chat(raw, max_messages=state.max_messages)
            )
        if chat.output is not None:  # a client's schema: its wire form is made off the event loop
            await anyio.to_thread.run_sync(prepare_wire, chat.output)
        run = _request_run(holder, chat, history, report=state.report, tool_details=tool_details)
        await run.start()
        state.track(run)
        if chat.stream:
            writer = ChunkWriter(chat.model, include_usage=chat.include_usage)
            return Events(_stream(run, writer), sep="\n")
        return await _complete(request, run, chat.model)

    async def api_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ApiError)
        headers = exc.headers()
        if exc.status == 401:
            headers["www-authenticate"] = "Bearer"
        if exc.status in (408, 413):
            headers["connection"] = "close"  # the rest of the body is not read
        return JSON(exc.body(), status_code=exc.status, headers=headers)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        kind = "invalid_request_error" if exc.status_code < 500 else "server_error"
        return JSON(ApiError(exc.status_code, str(exc.detail), type=kind).body(), status_code=exc.status_code)

    async def server_error(request: Request, exc: Exception) -> Response:
        error = ApiError(500, f"internal error: {type(exc).__name__}", type="server_error", retry=False)
        return JSON(error.body(), status_code=500, headers=error.headers())

    doors = open_doors(state)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with state.serving(), AsyncExitStack() as stack:
            for door in doors:
                if door.lifespan is not None:
                    await stack.enter_async_context(door.lifespan())
            yield

    routes: list[BaseRoute] = [
        Route("/health", health, methods=["GET"]),
        Route("/v1/models", list_models, methods=["GET"]),
        Route("/v1/models/{model_id:path}", get_model, methods=["GET"]),
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
    ]
    for door in doors:
        routes.extend(door.routes)
    origins = sorted({normalize_origin(o) for o in allowed_origins if o.strip()})
    check_host = not state.api_keys or bool(allowed_hosts)
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        middleware=[
            Middleware(
                HostGuard, check_host=check_host, allowed_hosts=allowed_hosts, allowed_origins=origins
            ),
            Middleware(ServeTelemetry, state=state),  # traceparent in, /metrics' request counts
            Middleware(
                CORSMiddleware,
                allow_origins=origins,
                allow_methods=["GET", "POST"],
                allow_headers=["*"],
                allow_private_network=True,
                max_age=600,
            ),
        ],
        exception_handlers={ApiError: api_error, HTTPException: http_error, Exception: server_error},
    )
    app.state.serve = state
    app.state.doors = doors
    return app
