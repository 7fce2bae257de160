"""The Responses API door: ``POST /v1/responses``, ``GET`` / ``DELETE /v1/responses/{id}`` and
``GET /v1/responses/{id}/input_items``.

A request is read into the chat door's ``ChatRequest`` and history (``items.py``), run by the
chat door's run (``dispatch.open_request_run``: an agent's ``ChatRun`` or a ``WorkflowRun``), and
its pieces are rendered as a response (``events.py``). A completed (or incomplete) response is
staged in the store before its last event or its body goes out (findable at once) and written
to disk once the answer is sent (``writes.py``); a failed or cancelled run stores nothing, so the
previous state stays the one to continue.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from runner.errors import ConfigError
from runner.modes.structured import prepare_wire
from runner.runtime.model_source import resolve_model_config
from runner.serve.conversations import owner_tag
from runner.serve.dispatch import open_request_run
from runner.serve.door_spec import Door
from runner.serve.engine import EndPiece, RequestRun
from runner.serve.history import ChatHistory
from runner.serve.http import JSON, read_body, require_json, unless_disconnected
from runner.serve.protocol import ApiError
from runner.serve.request import decode_json
from runner.serve.responses.events import ResponseBuilder, encode_events, new_id
from runner.serve.responses.images import check_images
from runner.serve.responses.items import ResponsesRequest, in_responses_terms, parse_responses_request
from runner.serve.responses.listing import input_items_page, stored_items
from runner.serve.responses.prior import EMPTY, Prepared, continue_conversation, prepared
from runner.serve.responses.store import (
    ResponseNotFound,
    ResponseStore,
    StoredResponse,
    StoredResponseUnreadable,
)
from runner.serve.responses.writes import RecordWrites, StoredEvents, StoredJSON
from runner.serve.state import ServeState

__all__ = ["door"]

#: Bodies up to this size are decoded on the event loop (as the chat door does); so is a
#: continuation whose body and stored conversation weigh no more together (the chat door parses
#: the same conversation resent on the loop: a thread hand-off would cost more than the parse).
_INLINE_DECODE_BYTES = 64 * 1024


def _not_found(error: ResponseNotFound, param: str | None = None) -> ApiError:
    code = "previous_response_not_found" if param else "not_found"
    message = f"Previous response{error.message[len('Response') :]}" if param else error.message
    return ApiError(404, message, param=param, code=code)


def _unreadable(error: StoredResponseUnreadable, param: str | None = None) -> ApiError:
    return ApiError(
        500, error.message, type="server_error", param=param, code="stored_response_unreadable", retry=False
    )


@dataclass(frozen=True)
class Read:
    """A request read: what it asks, the history to run, the conversation before its input, and
    what its answer's record holds prepared (``prior.Continuing.next``)."""

    parsed: ResponsesRequest
    history: ChatHistory
    prior: list[dict[str, Any]]
    next: Prepared | None


class ResponsesDoor:
    """The routes of the door, on one server's state and store."""

    def __init__(self, state: ServeState) -> None:
        self.state = state
        self._store: ResponseStore | None = None
        self.writes = RecordWrites(lambda: self.store, state.report)

    @property
    def store(self) -> ResponseStore:
        if self._store is None:  # the served settings are configured when the app is made
            self._store = ResponseStore(self.state.catalog.settings.home)
        return self._store

    async def _load(self, response_id: str, key: str | None, param: str | None = None) -> StoredResponse:
        store = self.store
        try:
            kept = store.recall(response_id, key)  # in memory, its file unchanged: one stat
            if kept is not None:
                return kept
            if store.is_small(response_id, _INLINE_DECODE_BYTES):  # a page-cache read and a small parse
                return store.load(response_id, key)
            return await anyio.to_thread.run_sync(store.load, response_id, key)
        except ResponseNotFound as error:
            raise _not_found(error, param) from None
        except StoredResponseUnreadable as error:
            raise _unreadable(error, param) from None

    async def _read(self, request: Request, key: str | None) -> Read:
        """The request, the history to run and the conversation before this input."""
        state = self.state
        require_json(request)
        raw = await read_body(request, state.max_body_bytes, state.body_timeout_s)
        body = (
            decode_json(raw)
            if len(raw) <= _INLINE_DECODE_BYTES
            else await anyio.to_thread.run_sync(decode_json, raw)
        )
        if not isinstance(body, dict):
            raise ApiError(400, "the request body must be a JSON object")
        previous = body.get("previous_response_id")
        stored: StoredResponse | None = None
        if previous is not None:
            if not isinstance(previous, str):
                raise ApiError(400, "'previous_response_id' must be a string", param="previous_response_id")
            stored = await self._load(previous, key, "previous_response_id")
        weight = 0
        if stored is not None and "prepared" not in stored.derived:  # to be converted here
            weight = stored.size or _INLINE_DECODE_BYTES  # still being written: no size yet, large
        if len(raw) + weight <= _INLINE_DECODE_BYTES:  # small, or converted once already
            return self._parse(body, stored)
        return await anyio.to_thread.run_sync(self._parse, body, stored)

    def _parse(self, body: dict[str, Any], stored: StoredResponse | None) -> Read:
        """``body`` continuing ``stored``: the stored part converted once (``prior.prepared``)."""
        state = self.state
        prior = stored.messages if stored is not None else []
        try:
            base = prepared(stored) if stored is not None else EMPTY
        except ApiError as error:
            raise in_responses_terms(error) from None
        parsed = parse_responses_request(body, prior=prior, issued=base.issued, report=state.report)
        count = len(parsed.chat.messages)
        if count > state.max_messages:
            raise ApiError(
                413,
                f"the conversation has {count} messages; this server takes at most "
                f"{state.max_messages} (RUNNER_SERVE_MAX_MESSAGES)",
                param="input",
                code="too_many_messages",
            )
        try:
            going = continue_conversation(
                base,
                prior,
                parsed.messages,
                instructions=parsed.instructions,
                max_messages=state.max_messages,
                keep=parsed.store,
            )
        except ApiError as error:
            raise ApiError(error.status, error.message, param="input", code=error.code) from None
        if parsed.chat.output is not None:
            prepare_wire(parsed.chat.output)
        history = going.history
        if stored is not None and stored.rendered:  # the renders of the texts it held already
            history.rendered, history.rendered_key = dict(stored.rendered), stored.rendered_key
        return Read(parsed, history, prior, going.next)

    def _skeleton(self, parsed: ResponsesRequest) -> dict[str, Any]:
        chat = parsed.chat
        echo = parsed.echo
        given = echo.get("reasoning")
        reasoning: dict[str, Any] = given if isinstance(given, dict) else {}
        return {
            "id": new_id("resp"),
            "object": "response",
            "created_at": int(time.time()),
            "model": chat.model,
            "status": "in_progress",
            "error": None,
            "incomplete_details": None,
            "instructions": parsed.instructions,
            "metadata": parsed.metadata,
            "output": [],
            "parallel_tool_calls": parsed.parallel_tool_calls,
            "temperature": chat.temperature,
            "top_p": echo.get("top_p") if isinstance(echo.get("top_p"), int | float) else None,
            "tool_choice": parsed.tool_choice,
            "tools": parsed.tools,
            "text": parsed.text,
            "max_output_tokens": chat.max_tokens,
            "previous_response_id": parsed.previous_response_id,
            "store": parsed.store,
            "background": False,
            "reasoning": {"effort": reasoning.get("effort"), "summary": reasoning.get("summary")},
            "truncation": echo.get("truncation")
            if echo.get("truncation") in ("auto", "disabled")
            else "disabled",
            "user": echo.get("user") if isinstance(echo.get("user"), str) else None,
            "usage": None,
        }

    def _stage(
        self, builder: ResponseBuilder, read: Read, key: str | None, end: EndPiece
    ) -> StoredResponse | None:
        """Stage a response that did not fail (with the conversation at it), if the request asks:
        findable at once, written once the answer is sent (``writes.py``)."""
        parsed = read.parsed
        if not parsed.store or builder.response["status"] == "failed":
            return None
        answer = builder.assistant_message()
        derived: dict[str, Any] = {}
        if read.next is not None:  # its conversation converted already: the next request's base
            calls = {call["id"] for call in answer.get("tool_calls") or ()}
            derived["prepared"] = replace(read.next, issued=read.next.issued | calls)
        stored = StoredResponse(
            response=builder.response,
            input_items=stored_items(parsed.items),
            messages=[*read.prior, *parsed.messages, answer],
            session_id=end.outcome.session_id if end.outcome is not None else None,
            owner=owner_tag(key),
            rendered=read.history.rendered,
            rendered_key=read.history.rendered_key,
            derived=derived,
        )
        self.store.stage(stored)
        return stored

    async def _keep(self, stored: StoredResponse | None, staged: list[StoredResponse]) -> None:
        """``stored`` to be written once its answer is sent (``staged``), or now when too many
        writes are in flight already (``RecordWrites.full``)."""
        if stored is None:
            return
        if self.writes.full:
            await self.writes.now(stored)
        else:
            staged.append(stored)

    def _then_write(self, staged: list[StoredResponse]) -> Callable[[], None]:
        """What a response calls once it is sent: the write of the record its run staged, if any."""

        def write() -> None:
            for stored in staged:
                self.writes.start(stored)
            staged.clear()

        return write

    def _model_id(self, name: str) -> str | None:
        """The model id of the agent served as ``name`` (None: a workflow, unknown, or none named)."""
        holder = self.state.catalog
        agent = holder.get(name)
        if agent is None:
            return None
        try:
            return resolve_model_config(agent.config, holder.settings).id
        except ConfigError:
            return None

    async def create(self, request: Request) -> Response:
        key = self.state.authorize(request)
        read = await self._read(request, key)
        parsed, history = read.parsed, read.history
        state = self.state
        check_images(parsed.items, parsed.chat.model, self._model_id(parsed.chat.model))
        try:
            run = open_request_run(
                state.catalog, parsed.chat, history, report=state.report, tool_details=state.tool_details
            )
            await run.start()
        except ApiError as error:  # a conflict with the agent's output schema, a tool source down
            raise in_responses_terms(error) from None
        state.track(run)
        builder = ResponseBuilder(
            self._skeleton(parsed),
            label=parsed.chat.model,
            namespaces=parsed.namespaces,
            carry_steps=parsed.carry_steps,
        )
        staged: list[StoredResponse] = []
        if parsed.chat.stream:
            stream = self._stream(run, builder, read, key, staged)
            return StoredEvents(stream, then=self._then_write(staged), sep="\n")
        collect = self._collect(run, builder, read, key, staged)
        response = await unless_disconnected(request.receive, run, collect)
        if response is None:
            self._then_write(staged)()  # nobody is there to read it; a record staged is kept
            return Response(status_code=499)
        if not staged:
            return JSON(response)
        return StoredJSON(response, then=self._then_write(staged))

    async def _collect(
        self,
        run: RequestRun,
        builder: ResponseBuilder,
        read: Read,
        key: str | None,
        staged: list[StoredResponse],
    ) -> dict[str, Any]:
        async for piece in run.pieces():
            if isinstance(piece, EndPiece):
                if piece.error is not None:
                    raise piece.error
                builder.finish(piece)
                await self._keep(self._stage(builder, read, key, piece), staged)
                return builder.response
            builder.feed(piece)
        raise ApiError(500, "the run ended without an answer", type="server_error", retry=False)

    async def _stream(
        self,
        run: RequestRun,
        builder: ResponseBuilder,
        read: Read,
        key: str | None,
        staged: list[StoredResponse],
    ) -> AsyncIterator[bytes]:
        try:
            yield encode_events(builder.start())
            async for piece in run.pieces():
                if isinstance(piece, EndPiece):
                    events = builder.finish(piece)
                    # findable before the last event goes out
                    await self._keep(self._stage(builder, read, key, piece), staged)
                else:
                    events = builder.feed(piece)
                if events:
                    yield encode_events(events)
        finally:
            if not run.delivered:  # the client went away: stop the agent, store nothing
                run.cancel()
                with anyio.CancelScope(shield=True):
                    await run.wait_closed()

    async def retrieve(self, request: Request) -> Response:
        key = self.state.authorize(request)
        stored = await self._load(request.path_params["response_id"], key)
        return JSON(stored.response)

    async def delete(self, request: Request) -> Response:
        key = self.state.authorize(request)
        response_id = request.path_params["response_id"]
        try:
            await anyio.to_thread.run_sync(self.store.delete, response_id, key)
        except ResponseNotFound as error:
            raise _not_found(error) from None
        return JSON({"id": response_id, "object": "response.deleted", "deleted": True})

    async def input_items(self, request: Request) -> Response:
        key = self.state.authorize(request)
        stored = await self._load(request.path_params["response_id"], key)
        return JSON(input_items_page(stored.input_items, request.query_params))


def door(state: ServeState) -> Door:
    """The Responses API door on ``state`` (its lifespan waits for the record writes at shutdown)."""
    responses = ResponsesDoor(state)

    @asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
        try:
            yield
        finally:
            await responses.writes.drain()

    paths = ("/v1/responses", "/v1/responses/{id}", "/v1/responses/{id}/input_items")
    routes = [
        Route("/v1/responses", responses.create, methods=["POST"]),
        Route("/v1/responses/{response_id}/input_items", responses.input_items, methods=["GET"]),
        Route("/v1/responses/{response_id}", responses.retrieve, methods=["GET"]),
        Route("/v1/responses/{response_id}", responses.delete, methods=["DELETE"]),
    ]
    return Door("responses", routes=routes, lifespan=lifespan, paths=paths)
