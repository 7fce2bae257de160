"""One cassette for a whole workflow run (``runner run team.yaml --record FILE`` / ``--replay FILE``).

Every child session's model calls go to one cassette, in the order they are made: recording, each
team agent talks to its own live model through a ``RecordingModel`` that shares one writer;
replaying, every agent borrows one ``ReplayModel`` under its own model's name (the name is part of
each request, so a request is the one recorded). Sub-agents that a step's agent calls as tools
borrow their parent's model already (``runner.session.subagent``), so their calls land in the same
cassette.

Replay answers in order, so the order of the calls must not depend on timing: under record or
replay the engine runs ``parallel`` steps and ``for_each`` items one after another, in the file's
order (``WorkflowEngine.sequential``). A recorded cassette therefore replays on any machine.
"""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from runner.agentfile.config import AgentConfig
from runner.agentfile.workflow import WorkflowConfig
from runner.errors import ConfigError
from runner.models.base import Model
from runner.runtime.model_source import BorrowedModel, live_model, resolve_model_config
from runner.runtime.settings import RuntimeSettings
from runner.store.replay import RecordingModel
from runner.store.transcript import Redactor, file_sha256, git_state
from runner.version import __version__

__all__ = ["WorkflowCassette", "open_cassette"]

Warn = Callable[[str], None]


class _Named(BorrowedModel):
    """The workflow's replay model, seen by one agent under that agent's model id."""

    def __init__(self, model: Model, name: str) -> None:
        super().__init__(model)
        self._name = name

    @property
    def name(self) -> str:
        return self._name


class _SharedRecording(RecordingModel):
    """A ``RecordingModel`` whose writer the workflow shares: closing it closes the live model only."""

    async def aclose(self) -> None:
        await self.inner.aclose()


def _model_id(config: AgentConfig, settings: RuntimeSettings) -> str | None:
    try:
        return resolve_model_config(config, settings).id
    except ConfigError:
        return None


class WorkflowCassette:
    """The cassette a workflow records to or replays from; ``model_for`` gives each agent its model."""

    def __init__(
        self,
        path: Path,
        workflow: WorkflowConfig,
        team_path: Path,
        configs: dict[str, AgentConfig],
        settings: RuntimeSettings,
        *,
        warn: Warn | None = None,
    ) -> None:
        self.path = path
        self.settings = settings
        self.replaying = settings.replay is not None
        self._writer: Any = None
        self._replay: Any = None
        self._models: dict[str, str] = {}
        self.clock: Callable[..., str] | None = None
        secrets = frozenset().union(*(config.secrets for config in configs.values()))
        redact = Redactor(secrets)
        if self.replaying:
            self._open_replay(workflow, redact, warn)
        else:
            self._open_record(workflow, team_path, configs, redact)

    def _open_replay(self, workflow: WorkflowConfig, redact: Redactor, warn: Warn | None) -> None:
        from runner.agentfile.templates import frozen_clock
        from runner.store.cassette import CassetteError, read_cassette
        from runner.store.replay import ReplayModel

        cassette = read_cassette(self.path)
        recorded_for = cassette.header.get("workflow")
        if recorded_for != workflow.name:
            what = (
                f"workflow '{recorded_for}'"
                if recorded_for
                else f"agent '{cassette.header.get('agent')}' (not a workflow)"
            )
            raise CassetteError(
                f"{self.path}: this cassette was recorded for {what}, not the workflow '{workflow.name}'",
                hint="give the cassette of this workflow, or record one with --record",
            )
        models = cassette.header.get("models")
        self._models = {str(k): str(v) for k, v in models.items()} if isinstance(models, dict) else {}
        if cassette.header.get("clock"):
            self.clock = frozen_clock(_dt.datetime.fromisoformat(str(cassette.header["clock"])))
        self._replay = ReplayModel(
            cassette,
            name=workflow.name,
            redact=redact,
            strict=self.settings.replay_strict,
            on_warning=warn or (lambda text: None),
        )

    def _open_record(
        self, workflow: WorkflowConfig, team_path: Path, configs: dict[str, AgentConfig], redact: Redactor
    ) -> None:
        from runner.agentfile.templates import frozen_clock
        from runner.store.cassette import CassetteWriter

        # The recording renders now() at the time its header keeps, as its replay will (a second
        # boundary between the header and a step's first prompt would break the replay).
        now = _dt.datetime.now().astimezone().replace(microsecond=0)
        self.clock = frozen_clock(now)
        models = {name: _model_id(config, self.settings) for name, config in configs.items()}
        self._writer = CassetteWriter(
            self.path,
            redact=redact,
            header={
                "workflow": workflow.name,
                "agent": workflow.name,
                # relative to the cassette, so a committed cassette names no machine's folders
                "agent_path": os.path.relpath(team_path, self.path.resolve().parent),
                "agent_sha256": file_sha256(team_path),
                "git": git_state(team_path),
                "models": {name: model for name, model in models.items() if model is not None},
                "clock": now.isoformat(timespec="seconds"),
                "runner_version": __version__,
            },
        )

    def model_for(self, config: AgentConfig) -> Model:
        """The model the runtime of ``config`` talks to: recording into, or replaying from, the cassette."""
        if self._replay is not None:
            name = self._models.get(config.name) or _model_id(config, self.settings) or self._replay.name
            return _Named(self._replay, name)
        live = live_model(resolve_model_config(config, self.settings), self.settings)
        return _SharedRecording(live, self._writer)

    def remaining(self) -> int:
        """Replaying: recorded responses not used (the workflow now makes fewer calls)."""
        return int(self._replay.remaining()) if self._replay is not None else 0

    def close(self) -> None:
        """Recording: close the cassette file."""
        if self._writer is not None:
            self._writer.close()


def open_cassette(
    workflow: WorkflowConfig,
    team_path: Path,
    configs: dict[str, AgentConfig],
    settings: RuntimeSettings,
    *,
    warn: Warn | None = None,
) -> WorkflowCassette | None:
    """The workflow's cassette under ``--record`` / ``--replay`` (None without either)."""
    path = settings.replay if settings.replay is not None else settings.record
    if path is None:
        return None
    return WorkflowCassette(path, workflow, team_path, configs, settings, warn=warn)
