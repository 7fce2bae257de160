"""The model of a batch's runtime: several clients of the agent's model, behind the rate limiter.

httpx's connection pool checks every connection it holds each time a request starts or ends
(``httpcore``'s ``_assign_requests_to_connections``, partly quadratic in the pool's size): at 32
items at once, one client's pool cost about half the batch's CPU (bench/batch.py). So a batch
opens one client per ``PER_CLIENT`` concurrent items (``PooledModel``, each request to the client
with the fewest requests in flight); each client keeps a small pool. A cassette (record or replay)
keeps the one model ``choose_model`` gives.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

from runner.agentfile.config import AgentConfig
from runner.batch.limiter import LimitedModel, RateLimiter
from runner.models.base import Model, Reply, Request, StreamEvent
from runner.runtime.settings import RuntimeSettings

__all__ = ["PER_CLIENT", "PooledModel", "batch_model"]

#: Concurrent items per model client.
PER_CLIENT = 8


class PooledModel:
    """Several clients of one model; each request goes to the one with the fewest in flight."""

    def __init__(self, models: Sequence[Model]) -> None:
        assert models
        self.models = list(models)
        self._busy = [0] * len(self.models)

    @property
    def name(self) -> str:
        return self.models[0].name

    @property
    def supports_tools(self) -> bool | None:
        return self.models[0].supports_tools

    def __getattr__(self, name: str) -> Any:  # structured_output, context window, ...
        return getattr(self.models[0], name)

    def _pick(self) -> int:
        busy = self._busy
        return busy.index(min(busy))

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        index = self._pick()
        self._busy[index] += 1
        try:
            async for event in self.models[index].stream(request):
                yield event
        finally:
            self._busy[index] -= 1

    async def complete(self, request: Request) -> Reply:
        index = self._pick()
        self._busy[index] += 1
        try:
            return await self.models[index].complete(request)
        finally:
            self._busy[index] -= 1

    async def aclose(self) -> None:
        for model in self.models:
            await model.aclose()


def batch_model(
    config: AgentConfig,
    settings: RuntimeSettings,
    *,
    concurrency: int,
    given: Model | None = None,
    limiter: RateLimiter | None = None,
) -> Model | None:
    """The model to open the batch's runtime with (None: the one the runtime would choose itself)."""
    from runner.runtime.model_source import choose_model

    model = given
    cassette = settings.replay is not None or settings.record is not None
    clients = 1 if cassette else max(1, -(-concurrency // PER_CLIENT))
    if model is None and clients > 1:
        model = PooledModel([choose_model(config, settings).model for _ in range(clients)])
    if limiter is None:
        return model
    if model is None:
        model = choose_model(config, settings).model
    return LimitedModel(model, limiter)
