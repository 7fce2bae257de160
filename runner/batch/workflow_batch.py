"""A batch of a team file's workflow: the workflow run once per item, on one pool of agents.

``WorkflowBatch`` is ``Batch`` with its three running methods replaced: ``start`` makes ONE
``WorkflowAgents`` pool for the whole batch (each team agent's runtime opens once, its tool sources
too, and its model is the batch's: a client per few workflows, behind the batch's one rate limiter);
``run_item`` runs the workflow once per item (``WorkflowItemRunner``: a ``WorkflowRunner`` on the
pool); ``stop`` closes the pool. Feeding, order, budgets (every model call of every step of every
item counts), stats and Ctrl+C are ``Batch``'s. ``--concurrency`` is the number of workflows at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from runner.agentfile.config import AgentConfig
from runner.agentfile.workflow import WorkflowConfig
from runner.batch.batch import Batch
from runner.batch.inputs import BatchItem
from runner.batch.item_result import ItemResult
from runner.batch.pooled_model import batch_model
from runner.batch.workflow_item import WorkflowItemRunner
from runner.errors import ConfigError
from runner.models.base import Model
from runner.runnable.target import Target
from runner.runnable.workflow import WorkflowRunner
from runner.store.transcript import file_sha256
from runner.workflow.agents import WorkflowAgents
from runner.workflow.engine import load_configs

__all__ = ["WorkflowBatch"]


class WorkflowBatch(Batch):
    """``workflow`` of the team file at ``path`` over ``items``; iterate ``results()`` once.

    ``configs``: the team agents the workflow runs (``load_configs`` when None). The other options
    are ``Batch``'s; ``model``, when given, answers for every agent (tests).
    """

    def __init__(
        self,
        path: Path,
        workflow: WorkflowConfig,
        items: Iterable[BatchItem],
        *,
        configs: Mapping[str, AgentConfig] | None = None,
        **options: Any,
    ) -> None:
        configs = dict(configs) if configs is not None else load_configs(path, workflow)
        if not configs:
            raise ConfigError(f"the workflow of {path} runs no agent", file=str(path))
        super().__init__(next(iter(configs.values())), items, **options)
        if self.settings.replay is not None or self.settings.record is not None:
            raise ConfigError(
                "a batch of a workflow does not record or replay a cassette: the items' model calls "
                "interleave, so their order would not replay",
                hint="record or replay one input with runner run TEAM.yaml -p INPUT --record/--replay FILE",
            )
        self.path = path
        self.workflow = workflow
        self.configs = configs
        self.agent_sha256 = self.agent_sha256 or file_sha256(path)
        self.agents: WorkflowAgents | None = None
        self.workflow_runner: WorkflowItemRunner | None = None

    def interrupt(self) -> None:
        """Ctrl+C: start no new item and stop the running workflows (their transcripts stay whole)."""
        super().interrupt()
        if self.workflow_runner is not None:
            self.workflow_runner.interrupt()

    def _model_for(self, config: AgentConfig) -> Model | None:
        """An agent's model in this batch: the given one, or clients per few workflows, rate-limited."""
        return batch_model(
            config,
            self.settings,
            concurrency=max(1, self.limits.concurrency),
            given=self.model,
            limiter=self.limiter,
        )

    async def start(self) -> None:
        """The batch's pool of agents (each runtime opens when a step first needs it)."""
        self.agents = WorkflowAgents(self.configs, self.settings, model_for=self._model_for)
        target = Target("workflow", self.path, workflow=self.workflow, configs=dict(self.configs))
        runner = WorkflowRunner(target, self.settings, agents=self.agents, assume_yes=self.assume_yes)
        self.workflow_runner = WorkflowItemRunner(
            runner,
            agent_sha256=self.agent_sha256,
            variables=self.variables,
            retries=self.limits.retries,
            assume_yes=self.assume_yes,
            on_usage=self._count,
        )
        if self.interrupted:
            self.workflow_runner.interrupt()

    async def run_item(self, item: BatchItem) -> ItemResult:
        """Run the workflow on one item (never raises for the item's own errors)."""
        assert self.workflow_runner is not None
        return await self.workflow_runner.run(item)

    async def stop(self) -> None:
        """Close every agent's runtime."""
        agents, self.agents = self.agents, None
        if agents is not None:
            await agents.aclose()
