"""``runner batch``: one agent over many inputs, concurrently, within budgets, resumable (SPEC section 17).

Module map:

- ``inputs``: the items (JSONL lines or Python values), their hashes, duplicate ids.
- ``item``: ``ItemRunner``, one item on an open runtime as a plain ``ItemResult`` (the seam a worker
  elsewhere uses too); retries of transient failures.
- ``batch``: ``Batch``, the workers on one shared runtime, ordered or as finished, budgets.
- ``limiter``: ``RateLimiter`` and ``LimitedModel`` (``rpm`` / ``tpm`` shared by all items).
- ``budget``: ``BatchBudget`` (``max_cost_usd`` / ``max_tokens`` across the batch).
- ``outfile``: the output file: resuming (what is done, what is refused), appending, putting it in order.
- ``item_result``: ``ItemResult``, one line of the output file.
- ``ray_backend`` / ``ray_actors`` / ``ray_reaper``: ``--backend ray`` (the driver's side, the
  actors, and the local Ray's private folder with what reaps it after its driver dies).
- ``dispatch``: ``open_batch``: what runs per item (agent → local or Ray, workflow → workflow batch),
  one decision for the CLI and ``run_batch``; results redacted with every member's secrets.
- ``workflow_item`` / ``workflow_batch``: a team file's workflow per item (``WorkflowItemRunner``,
  ``WorkflowBatch``): one pool of agents for the batch, one workflow engine per item.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from runner.agentfile.config import AgentConfig
from runner.batch.batch import Batch, BatchLimits, BatchStats
from runner.batch.inputs import BatchItem, DuplicateIds, check_unique, item_key, item_of, parse_lines
from runner.batch.item import ItemRunner
from runner.batch.item_result import ItemResult
from runner.batch.limiter import LimitedModel, RateLimiter
from runner.models.base import Model
from runner.runtime.settings import RuntimeSettings

__all__ = [
    "Batch",
    "BatchItem",
    "BatchLimits",
    "BatchStats",
    "DuplicateIds",
    "ItemResult",
    "ItemRunner",
    "LimitedModel",
    "RateLimiter",
    "as_items",
    "check_unique",
    "parse_lines",
    "run_batch",
]


def as_items(inputs: Iterable[Any]) -> Iterator[BatchItem]:
    """``BatchItem`` values of strings, ``{"id", "input", "vars"}`` dicts (or items), lazily; a
    repeated id raises ``DuplicateIds`` when it comes (naming both positions)."""
    seen: dict[str, int] = {}
    for position, value in enumerate(inputs, 1):
        item = value if isinstance(value, BatchItem) else item_of(position, value)
        first = seen.setdefault(item_key(item.id), item.line)
        if first != item.line:
            raise DuplicateIds(f"inputs {first} and {item.line} have the same id {item.id!r}")
        yield item


async def run_batch(
    agent: str | Path | AgentConfig,
    inputs: Iterable[Any],
    *,
    concurrency: int = 8,
    vars: Mapping[str, Any] | None = None,
    max_cost_usd: float | None = None,
    max_tokens: int | None = None,
    rpm: int | None = None,
    tpm: int | None = None,
    retries: int = 0,
    limit: int | None = None,
    ordered: bool = True,
    yes: bool = False,
    settings: RuntimeSettings | None = None,
    model: Model | None = None,
    backend: str = "local",
    address: str | None = None,
    agent_name: str | None = None,
) -> AsyncIterator[ItemResult]:
    """Run ``agent`` (a file or a loaded ``AgentConfig``) on each of ``inputs``; yield each result.

    ``inputs``: strings (prompts) or ``{"id", "input", "vars"}`` dicts, taken lazily. Results come in
    input order unless ``ordered=False``. ``settings`` default to no transcripts (as ``runner.Agent``);
    ``model`` replaces the file's (a ``ScriptedModel`` in tests). ``backend="ray"`` runs the items
    on Ray actors: on the cluster at ``address`` (or the caller's ``ray.init``), else a local Ray.

    What runs is resolved as every door resolves it (``runner.runnable.resolve``): a team file with
    a ``workflow:`` runs its workflow per item (local backend only; ``model`` then answers for every
    agent); ``agent_name`` runs that team agent per item instead; a team file without a workflow
    needs ``agent_name``. Results are redacted with every agent's secrets, as ``runner batch`` does.
    """
    from runner.batch.dispatch import open_batch, redacted
    from runner.runnable.target import Target, resolve

    if isinstance(agent, AgentConfig):
        target = Target("agent", agent.path, config=agent, configs={agent.name: agent})
    else:
        target = resolve(Path(agent), agent=agent_name, extra_vars=list(vars or ()))
    limits = BatchLimits(
        concurrency=concurrency,
        max_cost_usd=max_cost_usd,
        max_tokens=max_tokens,
        rpm=rpm,
        tpm=tpm,
        retries=retries,
        limit=limit,
    )
    batch = open_batch(
        target,
        as_items(inputs),
        backend=backend,
        address=address,
        agent_name=agent_name,
        settings=settings or RuntimeSettings(write_transcript=False),
        model=model,
        variables=vars,
        limits=limits,
        ordered=ordered,
        assume_yes=yes,
    )
    async for result in redacted(batch, target.secrets):
        yield result
