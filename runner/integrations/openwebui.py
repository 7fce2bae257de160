"""An Open WebUI pipe that runs runner agents inside Open WebUI (seed 002, SPEC section 11).

Install it as a Function in Open WebUI (see docs/openwebui.md): the whole Function body is::

    from runner.integrations.openwebui import Pipe

Each agent found under the ``AGENT_PATHS`` valve is a model (a manifold: ``pipes()`` lists them).
``pipe()`` runs the agent's loop in Open WebUI's own process with the rules of ``runner serve``:
text is yielded as strings, every tool the agent executes as a ``<details type="tool_calls"
done="true">`` block, and the answer ends with one ``{"choices": [{"delta": {}, "finish_reason":
"stop"}]}`` chunk. The agent's own calls never appear as ``delta.tool_calls`` (Open WebUI would run
them again, open-webui#23957); only calls of tools Open WebUI itself offers in ``body["tools"]`` do,
and then the answer ends with ``finish_reason: "tool_calls"`` and Open WebUI calls the pipe again
with the results. While a tool runs, a status line says so (``__event_emitter__``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from runner.loop.runtime import SessionConfig
from runner.loop.session import RunOptions
from runner.serve.catalog import Catalog, load_catalog
from runner.serve.engine import ChatRun, EndPiece, ReasoningPiece, ToolRunning
from runner.serve.history import parse_conversation
from runner.serve.models import ModelPool
from runner.serve.protocol import ApiError, lowered_spec, model_params, parse_chat_request
from runner.serve.sse import ContentBuilder, collect_completion, wire_calls

__all__ = ["Pipe"]

log = logging.getLogger("runner.integrations.openwebui")

EventEmitter = Callable[[dict[str, Any]], Awaitable[None]]
Chunk = str | dict[str, Any]


def _choice(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}


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
        self._catalog: Catalog | None = None
        self._catalog_paths = ""
        self._models: ModelPool | None = None

    # ----------------------------------------------------------------- models

    def _paths(self) -> list[Path]:
        return [Path(p.strip()).expanduser() for p in self.valves.AGENT_PATHS.split(",") if p.strip()]

    def _load(self) -> Catalog:
        catalog = load_catalog(self._paths())
        for line in catalog.problems():
            log.warning("runner pipe: %s", line)
        self._catalog, self._catalog_paths = catalog, self.valves.AGENT_PATHS
        return catalog

    def catalog(self) -> Catalog:
        """The agents under ``AGENT_PATHS`` (loaded again when the valve changed)."""
        if self._catalog is None or self._catalog_paths != self.valves.AGENT_PATHS:
            return self._load()
        return self._catalog

    def pipes(self) -> list[dict[str, str]]:
        """One model per agent; Open WebUI calls this when it lists models, so edits show up then."""
        catalog = self._load()
        return [{"id": name, "name": name} for name in sorted(catalog.agents)]

    def _session_config(self) -> SessionConfig:
        from runner.settings import load_settings

        settings = load_settings()
        if settings.local_cost_map:
            os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        home = Path(self.valves.RUNNER_HOME).expanduser() if self.valves.RUNNER_HOME else settings.home
        return SessionConfig(
            home=home,
            fsync=settings.fsync,
            write_transcript=self.valves.WRITE_TRANSCRIPTS,
            default_model=settings.default_model,
            openapi_cache_ttl_s=settings.openapi_cache_ttl_s,
            fast_path=settings.fast_path,
        )

    # ----------------------------------------------------------------- answers

    async def pipe(
        self,
        body: dict[str, Any],
        __user__: dict[str, Any] | None = None,
        __event_emitter__: EventEmitter | None = None,
    ) -> AsyncIterator[Chunk] | dict[str, Any]:
        """Answer ``body`` (Open WebUI's chat-completions form): a stream of chunks, or one completion.

        A request that cannot run (an unknown agent, a malformed body, a tool source that does not
        open) raises, and Open WebUI shows the error.
        """
        catalog = self.catalog()
        model = str(body.get("model") or "")
        name = model if model in catalog.agents else model.rpartition(".")[2]
        try:
            chat = parse_chat_request({**body, "model": name or model})
            agent = catalog.get(name)
            if agent is None:
                raise ApiError(404, f"no agent named '{name}' under {self.valves.AGENT_PATHS}")
            options = RunOptions(params=model_params(agent.spec, chat), client_tools=list(chat.client_tools))
            config = self._session_config()
            if self._models is None:
                self._models = ModelPool(config)
            run = ChatRun(
                lowered_spec(agent.spec, chat),
                parse_conversation(chat.messages),
                options=options,
                config=config,
                models=self._models,
            )
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
        return self._stream(run, emit)

    async def _stream(self, run: ChatRun, emit: EventEmitter | None) -> AsyncIterator[Chunk]:
        builder = ContentBuilder()
        status_shown = False
        try:
            async for piece in run.pieces():
                if isinstance(piece, ToolRunning):
                    if emit is not None:
                        status_shown = True
                        description = f"Running {piece.name}…"
                        await emit({"type": "status", "data": {"description": description, "done": False}})
                elif isinstance(piece, ReasoningPiece):
                    if piece.text:
                        yield _choice({"reasoning_content": piece.text})
                elif isinstance(piece, EndPiece):
                    if emit is not None and status_shown:
                        await emit(
                            {"type": "status", "data": {"description": "", "done": True, "hidden": True}}
                        )
                    if piece.client_calls:
                        yield _choice({"tool_calls": wire_calls(piece.client_calls)})
                    yield _choice({}, piece.finish_reason)
                else:
                    text = builder.content(piece)
                    if text:
                        yield text
        finally:
            if not run.delivered:  # Open WebUI stopped the answer: stop the agent, release its tools
                run.cancel()
                await run.wait_closed()
