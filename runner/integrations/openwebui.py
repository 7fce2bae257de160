"""An Open WebUI pipe that runs runner agents inside Open WebUI (seed 002, SPEC section 11).

Install it as a Function in Open WebUI (see docs/openwebui.md): the whole Function body is::

    from runner.integrations.openwebui import Pipe

Each agent found under the ``AGENT_PATHS`` valve is a model (a manifold: ``pipes()`` lists them),
and so is each team file's workflow. ``pipe()`` runs the agent's loop (or the workflow, once) in
Open WebUI's own process with the rules of ``runner serve``; a workflow's steps show as its
reasoning and as status lines.

A streamed answer is returned as a ``StreamingResponse`` holding exactly the event stream
``runner serve`` sends: Open WebUI passes a pipe's ``StreamingResponse`` through untouched (a pipe
that yields chunks instead gets Open WebUI's own final ``finish_reason: "stop"`` chunk added after
its own, and chunks it yields as dicts are not completed with ``id`` / ``object`` / ``model``, which
the ``openai`` SDK needs). So every chunk is a whole ``chat.completion.chunk``, one finish reason
ends the answer, ``stream_options.include_usage`` gets its usage chunk, and ``[DONE]`` follows.
Every tool the agent executes is a ``<details type="tool_calls" done="true">`` block in the text.
The agent's own calls never appear as ``delta.tool_calls`` (Open WebUI would run them again,
open-webui#23957); only calls of tools Open WebUI itself offers in ``body["tools"]`` do, and then
the answer ends with ``finish_reason: "tool_calls"`` and Open WebUI calls the pipe again with the
results. While a tool runs, a status line says so (``__event_emitter__``).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from runner.runtime.settings import RuntimeSettings
from runner.serve.catalog import load_catalog
from runner.serve.dispatch import open_request_run
from runner.serve.engine import EndPiece, RequestRun, StepRunning, ToolRunning
from runner.serve.history import parse_conversation
from runner.serve.protocol import ApiError, ChatRequest, parse_chat_request
from runner.serve.reload import CatalogHolder
from runner.serve.sse import DONE, ChunkWriter, collect_completion, encode, stream_chunks

__all__ = ["Pipe"]

log = logging.getLogger("runner.integrations.openwebui")

EventEmitter = Callable[[dict[str, Any]], Awaitable[None]]


class Pipe:
    """Open WebUI's pipe interface over the runner: one model per agent, run in process."""

    class Valves(BaseModel):
        """The pipe's settings, edited in Open WebUI (Admin -> Functions -> the gear)."""

        AGENT_PATHS: str = Field(
            default="agents", description="Agent files or folders (searched recursively), comma-separated."
        )
        RUNNER_HOME: str = Field(
            default="", description="Where transcripts go (empty: the RUNNER_HOME variable, else ./.runner)."
        )
        WRITE_TRANSCRIPTS: bool = Field(default=True, description="Write a transcript for every answer.")
        SHOW_TOOL_STATUS: bool = Field(default=True, description="Show a status line while a tool runs.")

    def __init__(self) -> None:
        self.type = "manifold"
        self.id = "runner"
        self.name = "runner: "
        self.valves = self.Valves()
        self._holder: CatalogHolder | None = None
        self._holder_key: tuple[str, str, bool] | None = None

    # ----------------------------------------------------------------- models

    def _paths(self) -> list[Path]:
        return [Path(p.strip()).expanduser() for p in self.valves.AGENT_PATHS.split(",") if p.strip()]

    def pipes(self) -> list[dict[str, str]]:
        """One model per agent and per workflow; Open WebUI calls this when it lists models, so edits
        show up then."""
        catalog = load_catalog(self._paths())
        for line in catalog.problems():
            log.warning("runner pipe: %s", line)
        return [{"id": name, "name": name} for name in sorted(catalog.names())]

    def _settings(self) -> RuntimeSettings:
        from dataclasses import replace

        settings = RuntimeSettings.from_environment()
        home = Path(self.valves.RUNNER_HOME).expanduser() if self.valves.RUNNER_HOME else settings.home
        return replace(settings, home=home, write_transcript=self.valves.WRITE_TRANSCRIPTS)

    async def holder(self) -> CatalogHolder:
        """The agents under ``AGENT_PATHS`` with their runtimes, kept across requests.

        Files edited since the last request are loaded again first (runtimes rebuilt, reusing what
        did not change); a change of the valves starts a new set of runtimes.
        """
        key = (self.valves.AGENT_PATHS, self.valves.RUNNER_HOME, self.valves.WRITE_TRANSCRIPTS)
        if self._holder is None or self._holder_key != key:
            if self._holder is not None:
                await self._holder.aclose()
            paths = self._paths()
            catalog = load_catalog(paths)
            for line in catalog.problems():
                log.warning("runner pipe: %s", line)
            report = lambda line: log.warning("runner pipe: %s", line)  # noqa: E731
            self._holder = CatalogHolder(paths, catalog, settings=self._settings(), report=report)
            self._holder_key = key
            await self._holder.refresh()  # the files as they are now: later requests see edits
            return self._holder
        for line in await self._holder.refresh():
            log.warning("runner pipe: %s", line)
        return self._holder

    # ----------------------------------------------------------------- answers

    async def pipe(
        self,
        body: dict[str, Any],
        __user__: dict[str, Any] | None = None,
        __event_emitter__: EventEmitter | None = None,
    ) -> Any:
        """Answer ``body`` (Open WebUI's chat-completions form): a ``StreamingResponse`` of server-sent
        events (as ``runner serve`` streams them), or one completion.

        A request that cannot run (an unknown agent, a malformed body, a tool source that does not
        open) raises, and Open WebUI shows the error.
        """
        holder = await self.holder()
        model = str(body.get("model") or "")
        name = model if model in holder.current.names() else model.rpartition(".")[2]
        try:
            chat = parse_chat_request({**body, "model": name or model})
            run = self._run(holder, chat, name)
            await run.start()
        except ApiError as exc:
            raise RuntimeError(f"runner: {exc.message}") from None
        if not chat.stream:
            try:
                return await collect_completion(run.pieces(), model=model)
            except ApiError as exc:
                raise RuntimeError(f"runner: {exc.message}") from None
            finally:
                if not run.delivered:
                    run.cancel()
                    await run.wait_closed()
        emit = __event_emitter__ if self.valves.SHOW_TOOL_STATUS else None
        from starlette.responses import StreamingResponse

        writer = ChunkWriter(model, include_usage=chat.include_usage)
        return StreamingResponse(self._events(run, emit, writer), media_type="text/event-stream")

    def _run(self, holder: CatalogHolder, chat: ChatRequest, name: str) -> RequestRun:
        """The run of model ``name``: its workflow, or an agent's turn (``ApiError`` 404: neither)."""
        where = f" under {self.valves.AGENT_PATHS}"
        return open_request_run(holder, chat, parse_conversation(chat.messages), name=name, where=where)

    async def _events(
        self, run: RequestRun, emit: EventEmitter | None, writer: ChunkWriter
    ) -> AsyncIterator[bytes]:
        try:
            async for chunk in stream_chunks(self._with_status(run, emit), writer):
                yield encode(chunk)
            yield DONE
        finally:
            if not run.delivered:  # Open WebUI stopped the answer: stop the agent, release its tools
                run.cancel()
                await run.wait_closed()

    @staticmethod
    async def _with_status(run: RequestRun, emit: EventEmitter | None) -> AsyncIterator[Any]:
        """The run's pieces; a status line in Open WebUI while a tool (or a workflow's step) runs."""
        shown = False
        async for piece in run.pieces():
            if emit is not None and isinstance(piece, ToolRunning | StepRunning):
                shown = True
                what = piece.name if isinstance(piece, ToolRunning) else f"step {piece.key}"
                await emit({"type": "status", "data": {"description": f"Running {what}…", "done": False}})
            elif emit is not None and shown and isinstance(piece, EndPiece):
                await emit({"type": "status", "data": {"description": "", "done": True, "hidden": True}})
            yield piece
