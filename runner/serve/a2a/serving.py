"""The A2A door's routes on the ``a2a-sdk`` (``door.py`` builds the door from them).

Routes (behind the server's ``HostGuard``, CORS and ``ServeState.authorize``; docs/a2a.md):

- ``GET /a2a``: the cards of every served agent and workflow (``{"agents": [card, ...]}``);
- ``GET /.well-known/agent-card.json``: the card of the only served agent (404 with several);
- ``/a2a/NAME/.well-known/agent-card.json``: the card of ``NAME``;
- ``POST /a2a/NAME``: JSON-RPC, protocol 1.0; ``/a2a/NAME/rest/...``: HTTP+JSON 1.0;
- ``POST /a2a/NAME/v0.3``: JSON-RPC 0.3; ``/a2a/NAME/v0.3/rest/v1/...``: HTTP+JSON 0.3.

The wire is the ``a2a-sdk``'s (its JSON-RPC and REST dispatchers, the 0.3 adapters, its request
handler with the direct path of ``direct.py``); runner adds the executor (``executor.py``), the
bounded task store (``tasks.py``), the card (``card.py``) and, here, who the caller is and what
``contextId`` means.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from a2a.server.agent_execution import RequestContext, SimpleRequestContextBuilder
from a2a.server.context import ServerCallContext
from a2a.server.id_generator import IDGenerator, IDGeneratorContext
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes import ServerCallContextBuilder, create_jsonrpc_routes, create_rest_routes
from a2a.types import a2a_pb2 as pb
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route, Router
from starlette.types import Receive, Scope, Send

from runner.serve.a2a import fast, tasks
from runner.serve.a2a.card import agent_card
from runner.serve.a2a.direct import DirectHandler
from runner.serve.a2a.executor import RunnerExecutor, message_text
from runner.serve.a2a.tasks import BoundedTaskStore, Owner
from runner.serve.catalog import ServedAgent, ServedWorkflow
from runner.serve.conversations import Conversations, idle_seconds, owner_tag
from runner.serve.door_spec import Door
from runner.serve.http import JSON, read_body, replaying
from runner.serve.protocol import ApiError
from runner.serve.state import ServeState
from runner.store.transcript import new_session_id

__all__ = ["A2AServing", "door_routes"]

_KEY = "runner.a2a.key"
_AGENT = "runner.a2a.agent"


class _Caller(ServerCallContextBuilder):
    """The SDK's call context: the owner (agent and key digest) and the key itself."""

    def build(self, request: Request) -> ServerCallContext:
        return _call_context(request.scope.get(_AGENT, ""), request.scope.get(_KEY), request)


def _call_context(agent: str, key: str | None, request: Request) -> ServerCallContext:
    state = {"runner_key": key, "headers": dict(request.headers)}
    return ServerCallContext(user=Owner(agent, owner_tag(key)), state=state)


class _SessionIds(IDGenerator):
    def generate(self, context: IDGeneratorContext) -> str:
        return new_session_id()


class _Contexts(SimpleRequestContextBuilder):
    """A new ``contextId`` is a new session id; a given one must be the caller's conversation."""

    def __init__(self, conversations: Conversations) -> None:
        super().__init__(context_id_generator=_SessionIds())
        self.conversations = conversations

    async def build(
        self,
        context: ServerCallContext,
        params: pb.SendMessageRequest | None = None,
        task_id: str | None = None,
        context_id: str | None = None,
        task: pb.Task | None = None,
    ) -> RequestContext:
        from a2a.utils.errors import InvalidParamsError

        if params is not None:
            message_text(params.message)  # refuse what the agent cannot take before a task exists
        if context_id and not task_id:
            key = context.state.get("runner_key")
            if not self.conversations.owns(context_id, key):
                raise InvalidParamsError(
                    message=f"no conversation '{context_id[:80]}' (unknown, expired, or another key's): "
                    "send the message without a contextId to start one"
                )
        built = await super().build(context, params, task_id, context_id, task)
        if not context_id and not task_id:  # minted here: the executor need not look it up
            context.state["runner_minted"] = built.context_id
        return built


class A2AServing:
    """Every served name's request handler and routes, made on its first request."""

    def __init__(self, state: ServeState, conversations: Conversations) -> None:
        self.state = state
        self.conversations = conversations
        self.store = BoundedTaskStore(tasks.MAX_TASKS)
        self._apps: dict[str, Router] = {}
        self._by_name: dict[str, DirectHandler] = {}

    def served(self, name: str) -> ServedAgent | ServedWorkflow | None:
        holder = self.state.catalog
        return holder.get(name) or holder.workflow(name)

    def card(self, served: ServedAgent | ServedWorkflow, request: Request) -> dict[str, Any]:
        host = self.state.catalog.host(served.name) if isinstance(served, ServedAgent) else None
        runtime = host.current if host is not None else None
        card = agent_card(
            served,
            base_url=_base_url(request),
            secured=bool(self.state.api_keys),
            registry=runtime.registry if runtime is not None else None,
        )
        return agent_card_to_dict(card)

    def app(self, name: str) -> Router:
        app = self._apps.get(name)
        if app is None:
            app = self._apps[name] = self._build(name)
        return app

    def _build(self, name: str) -> Router:
        state = self.state
        executor = RunnerExecutor(
            state.catalog,
            name,
            self.conversations,
            report=state.report,
            track=state.track,
            tool_details=state.tool_details,
        )
        served = self.served(name)
        assert served is not None
        card = agent_card(served, base_url="http://localhost", secured=bool(state.api_keys))
        handler = DirectHandler(
            agent_executor=executor,
            task_store=self.store,
            agent_card=card,
            request_context_builder=_Contexts(self.conversations),
        )
        self._by_name[name] = handler
        caller = _Caller()
        from a2a.compat.v0_3.rest_adapter import REST03Adapter

        legacy = REST03Adapter(http_handler=handler, context_builder=caller)
        routes: list[BaseRoute] = [
            Route("/.well-known/agent-card.json", self._card_endpoint, methods=["GET"]),
            *create_jsonrpc_routes(handler, "/", context_builder=caller, enable_v0_3_compat=True),
            *create_jsonrpc_routes(handler, "/v0.3", context_builder=caller, enable_v0_3_compat=True),
            *(
                Route(f"/v0.3/rest{path}", endpoint, methods=[method])
                for (path, method), endpoint in legacy.routes().items()
            ),
            *create_rest_routes(handler, context_builder=caller, path_prefix="/rest"),
        ]
        return Router(routes=routes)

    async def _card_endpoint(self, request: Request) -> Response:
        served = self.served(request.scope[_AGENT])
        if served is None:
            raise ApiError(404, "no such agent", code="model_not_found")
        return JSON(self.card(served, request))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """``/a2a/NAME/...``: authorize, find NAME, hand the rest of the path to its routes."""
        request = Request(scope, receive)
        key = self.state.authorize(request)
        path = scope["path"][len(scope.get("root_path", "")) :] if scope.get("root_path") else scope["path"]
        name, _, rest = path.lstrip("/").partition("/")
        if self.served(name) is None:
            served = ", ".join(sorted(self.state.catalog.current.names())) or "none"
            raise ApiError(404, f"no agent or workflow '{name[:80]}' is served (served: {served})")
        if scope["method"] in _WITH_BODY:  # read here, within the server's limits (413, 408)
            body = await read_body(request, self.state.max_body_bytes, self.state.body_timeout_s)
            plain = None
            if not rest and scope["method"] == "POST":  # JSON-RPC 1.0: a plain SendMessage is ours
                plain = fast.plain_send(body, request.headers.get("a2a-version"))
            if plain is not None:
                self.app(name)  # the handler, made on the first request
                call = _call_context(name, key, request)
                response = await fast.answer(self._by_name[name], *plain, call)
                await response(scope, receive, send)
                return
            receive = replaying([{"type": "http.request", "body": body, "more_body": False}], receive)
        inner = dict(scope)
        inner[_KEY], inner[_AGENT] = key, name
        inner["root_path"] = f"{scope.get('root_path', '')}/{name}"
        inner["path"] = f"{inner['root_path']}/{rest}" if rest else inner["root_path"] + "/"
        await self.app(name)(inner, receive, send)

    async def aclose(self) -> None:
        for handler in self._by_name.values():
            await handler.aclose()


#: The methods whose body the door reads before the SDK does, so that the SDK (which reads a
#: body whole, however large) gets only one within ``RUNNER_SERVE_MAX_BODY_BYTES``.
_WITH_BODY = frozenset({"POST", "PUT", "PATCH"})


def _base_url(request: Request) -> str:
    """``scheme://host[:port]`` as the client reached the server (its ``Host``; never 0.0.0.0)."""
    host = request.headers.get("host", "").strip()
    if not host or host.split(":")[0] in ("0.0.0.0", "[::]"):
        server = request.scope.get("server") or ("127.0.0.1", 80)
        address = "127.0.0.1" if server[0] in ("0.0.0.0", "::", "") else server[0]
        port = host.rpartition(":")[2] if ":" in host else str(server[1])
        host = f"{address}:{port}"
    return f"{request.url.scheme}://{host}"


def door_routes(state: ServeState) -> Door:
    """The A2A door on ``state`` (module docstring)."""
    conversations = Conversations(state.catalog.settings.home, idle_s=idle_seconds())
    serving = A2AServing(state, conversations)

    async def listing(request: Request) -> Response:
        state.authorize(request)
        current = state.catalog.current
        served: list[ServedAgent | ServedWorkflow] = [*current.agents.values(), *current.workflows.values()]
        return JSON({"agents": [serving.card(one, request) for one in served]})

    async def root_card(request: Request) -> Response:
        state.authorize(request)
        current = state.catalog.current
        served: list[ServedAgent | ServedWorkflow] = [*current.agents.values(), *current.workflows.values()]
        if len(served) != 1:
            raise ApiError(
                404,
                f"this server serves {len(served)} agents: each card is at /a2a/NAME/.well-known/"
                "agent-card.json, all of them at /a2a",
            )
        return JSON(serving.card(served[0], request))

    @asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
        try:
            yield
        finally:
            await serving.aclose()

    return Door(
        name="a2a",
        routes=[
            Route("/a2a", listing, methods=["GET"]),
            Route("/.well-known/agent-card.json", root_card, methods=["GET"]),
            Mount("/a2a", app=serving),
        ],
        lifespan=lifespan,
        paths=("/a2a", "/a2a/NAME", "/.well-known/agent-card.json"),
    )
