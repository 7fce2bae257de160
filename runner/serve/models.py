"""One model client per model configuration, shared by every request of the server.

A session normally builds its model and closes it at its end. A server opens a session per
request, so it would pay for a new HTTP client (an SSL context: ~40 ms of blocked event loop) and
new connections on every request. The pool builds each model once (per model section of the agent
file, so a reloaded agent with a new model gets a new one) and hands sessions a ``SharedModel``
whose ``aclose`` does nothing; the pool closes the real models when the server stops.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator

from runner.agentfile.config import AgentConfig
from runner.loop.runtime import SessionConfig, resolve_model_spec
from runner.models.base import Model, Reply, Request, StreamEvent

__all__ = ["ModelPool", "SharedModel"]


class SharedModel:
    """A model many sessions use at once; closing it is the pool's job, not theirs."""

    def __init__(self, model: Model) -> None:
        self.model = model

    @property
    def name(self) -> str:
        """The shared model's id."""
        return self.model.name

    @property
    def supports_tools(self) -> bool | None:
        """Whether the shared model takes native tool calls."""
        return self.model.supports_tools

    def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        """Stream from the shared model."""
        return self.model.stream(request)

    async def complete(self, request: Request) -> Reply:
        """Complete with the shared model."""
        return await self.model.complete(request)

    async def aclose(self) -> None:
        """Nothing: the pool closes the model when the server stops."""


class ModelPool:
    """The models of a server's agents, built on first use and kept until ``aclose``."""

    def __init__(self, config: SessionConfig) -> None:
        self.config = config
        self._models: dict[str, Model] = {}

    def get(self, spec: AgentConfig) -> Model | None:
        """The shared model for ``spec``; None when sessions must build their own (cassettes)."""
        if self.config.record is not None or self.config.replay is not None:
            return None
        from runner.models.factory import make_model

        model_spec = resolve_model_spec(spec, self.config)
        key = json.dumps(dataclasses.asdict(model_spec), sort_keys=True, default=str)
        model = self._models.get(key)
        if model is None:
            model = self._models[key] = make_model(model_spec, fast_path=self.config.fast_path)
        return SharedModel(model)

    async def aclose(self) -> None:
        """Close every model (the server is stopping)."""
        models, self._models = list(self._models.values()), {}
        for model in models:
            await model.aclose()
