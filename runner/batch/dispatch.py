"""What a batch runs per item, decided once for ``runner batch`` and ``runner.batch.run_batch``.

``open_batch(target, items, ...)``: an agent target → ``Batch`` (asyncio here) or ``RayBatch``
(``backend="ray"``); a workflow target → ``WorkflowBatch`` (the local backend only: a workflow on Ray
is refused, naming what to do instead). Every result is redacted with the secrets of every agent the
target runs (each member of a workflow), whichever door asked.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from typing import Any

from runner.batch.batch import Batch
from runner.batch.inputs import BatchItem
from runner.batch.item_result import ItemResult
from runner.errors import ConfigError
from runner.redact import Redactor
from runner.runnable.target import Target, shown

__all__ = ["BACKENDS", "open_batch", "redacted"]

BACKENDS = ("local", "ray")


def open_batch(
    target: Target,
    items: Iterable[BatchItem],
    *,
    backend: str = "local",
    address: str | None = None,
    agent_name: str | None = None,
    **options: Any,
) -> Batch:
    """The batch of ``target`` over ``items`` (``options``: ``Batch``'s)."""
    if backend not in BACKENDS:
        raise ConfigError(f"backend must be 'local' or 'ray', not {backend!r}")
    if target.workflow is not None:
        if backend == "ray":
            raise ConfigError(
                f"{shown(target.path)} has a workflow: a batch of workflows runs on the local "
                "backend, not on Ray",
                hint="drop --backend ray (backend='local') to run the workflow per input here, or give "
                "--agent NAME (agent_name=NAME) to run one of its agents per input on Ray",
            )
        from runner.batch.workflow_batch import WorkflowBatch

        return WorkflowBatch(target.path, target.workflow, items, configs=target.configs, **options)
    assert target.config is not None
    if backend == "ray":
        from runner.batch.ray_backend import RayBatch

        return RayBatch(target.config, items, address=address, agent_name=agent_name, **options)
    return Batch(target.config, items, **options)


async def redacted(batch: Batch, secrets: frozenset[str]) -> AsyncIterator[ItemResult]:
    """``batch.results()`` with every secret masked in each result's text."""
    redactor = Redactor(secrets)
    async for result in batch.results():
        if not secrets:
            yield result
            continue
        clean = ItemResult.from_record(redactor.record(result.as_record()))
        clean.interrupted, clean.retry_after = result.interrupted, result.retry_after
        yield clean
