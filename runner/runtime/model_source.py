"""Which model a runtime talks to: live, recording a cassette, or replaying one.

``--model`` wins over the agent's ``model:``, which wins over ``RUNNER_DEFAULT_MODEL``. With
``RuntimeSettings.replay`` the model answers from a cassette (and templates see the recording's
clock); with ``record`` every call of the live model is written to one. ``capabilities`` answers
what ``auto`` needs to know without connecting (``runner render``).
"""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from runner.agentfile.config import AgentConfig, ModelConfig
from runner.errors import ConfigError
from runner.models.base import Model
from runner.runtime.settings import RuntimeSettings
from runner.store.transcript import Redactor, file_sha256, git_state
from runner.version import __version__

__all__ = [
    "BorrowedModel",
    "ModelChoice",
    "capabilities",
    "choose_model",
    "live_model",
    "resolve_model_config",
]

Warn = Callable[[str], None]


def resolve_model_config(config: AgentConfig, settings: RuntimeSettings) -> ModelConfig:
    """The model to use: ``--model`` over the agent's ``model:`` over ``RUNNER_DEFAULT_MODEL``."""
    base = config.model
    if settings.model_override:
        override = settings.model_override
        return replace(base, id=override) if base else ModelConfig(id=override)
    if base is not None:
        return base
    if settings.default_model:
        return ModelConfig(id=settings.default_model)
    raise ConfigError(
        f"agent '{config.name}' names no model",
        file=str(config.path),
        hint="add `model: provider/name` to the file, pass --model, or set RUNNER_DEFAULT_MODEL",
    )


def live_model(model: ModelConfig, settings: RuntimeSettings) -> Model:
    """The model of ``model`` with its retries and fallbacks, on the fast path when it applies."""
    from runner.models.factory import make_model

    return make_model(model, fast_path=settings.fast_path)


@dataclass(frozen=True)
class ModelChoice:
    """A runtime's model, and the clock its templates see (a replay's recording time)."""

    model: Model
    clock: Callable[..., str] | None = None


def choose_model(config: AgentConfig, settings: RuntimeSettings, *, warn: Warn | None = None) -> ModelChoice:
    """The model of a runtime: live, recording to a cassette, or replaying one."""
    redact = Redactor(config.secrets)
    if settings.replay is not None:
        return _replaying(config, settings, redact, warn)
    model = live_model(resolve_model_config(config, settings), settings)
    if settings.record is None:
        return ModelChoice(model)
    from runner.agentfile.templates import frozen_clock
    from runner.store.cassette import CassetteWriter
    from runner.store.replay import RecordingModel

    record = settings.record
    # the recording renders now() at the time its header keeps, as its replay will
    now = _dt.datetime.now().astimezone().replace(microsecond=0)
    writer = CassetteWriter(
        record,
        redact=redact,
        header={
            "agent": config.name,
            # relative to the cassette, so a committed cassette names no machine's folders
            "agent_path": os.path.relpath(config.path, record.resolve().parent),
            "agent_sha256": file_sha256(config.path),
            "git": git_state(config.path),
            "model": model.name,
            "clock": now.isoformat(timespec="seconds"),
            "runner_version": __version__,
        },
    )
    return ModelChoice(RecordingModel(model, writer), frozen_clock(now))


def _replaying(
    config: AgentConfig, settings: RuntimeSettings, redact: Redactor, warn: Warn | None
) -> ModelChoice:
    from runner.agentfile.templates import frozen_clock
    from runner.store.cassette import CassetteError, read_cassette
    from runner.store.replay import ReplayModel

    assert settings.replay is not None
    cassette = read_cassette(settings.replay)
    recorded_for = cassette.header.get("agent")
    if recorded_for != config.name:
        raise CassetteError(
            f"{settings.replay}: this cassette was recorded for agent '{recorded_for}', not '{config.name}'",
            hint="give the cassette of this agent, or record one with --record",
        )
    model_id = str(cassette.header.get("model") or resolve_model_config(config, settings).id)
    clock = None
    if cassette.header.get("clock"):
        clock = frozen_clock(_dt.datetime.fromisoformat(str(cassette.header["clock"])))
    model = ReplayModel(
        cassette,
        name=model_id,
        redact=redact,
        strict=settings.replay_strict,
        on_warning=warn or (lambda text: None),
    )
    return ModelChoice(model, clock)


class BorrowedModel:
    """Another runtime's model, used but not owned: closing it is its owner's business.

    A sub-agent recording or replaying a cassette talks to its parent's model, so that one cassette
    holds every call of the run, in order.
    """

    def __init__(self, model: Model) -> None:
        self.model = model

    @property
    def name(self) -> str:
        """The borrowed model's id."""
        return self.model.name

    @property
    def supports_tools(self) -> bool | None:
        """Whether the borrowed model takes native tool calls."""
        return self.model.supports_tools

    @property
    def structured_output(self) -> str | None:
        """How the borrowed model takes ``output:``."""
        return getattr(self.model, "structured_output", None)

    def stream(self, request: Any) -> Any:
        """Stream from the borrowed model."""
        return self.model.stream(request)

    async def complete(self, request: Any) -> Any:
        """Complete with the borrowed model."""
        return await self.model.complete(request)

    async def aclose(self) -> None:
        """Nothing: the owner closes it."""


@dataclass(frozen=True)
class DescribedModel:
    """Stands in for a model when only its capabilities matter (``runner render``): never called."""

    name: str
    supports_tools: bool | None
    structured_output: str | None = None

    def stream(self, request: Any) -> Any:
        """Refused: ``runner render`` shows a request, it never sends one."""
        raise RuntimeError(f"{self.name} only describes the model for runner render; it cannot answer")

    async def complete(self, request: Any) -> Any:
        """Refused: ``runner render`` shows a request, it never sends one."""
        return self.stream(request)

    async def aclose(self) -> None:
        """Nothing to release."""


def capabilities(config: AgentConfig, settings: RuntimeSettings) -> DescribedModel:
    """What ``auto`` needs to know about the agent's model, without a connection.

    On the fast path (``openai/...`` with an ``api_base``) the server decides; otherwise litellm's
    model data answers, read from its data file: litellm is never imported here (seconds), and the
    answer is the one ``runner run`` gets from litellm itself (``tests/runtime/test_capabilities.py``).
    """
    try:
        model = resolve_model_config(config, settings)
    except ConfigError:
        return DescribedModel("(none: set model: in the file, --model or RUNNER_DEFAULT_MODEL)", None)
    from runner.models.model_data import output_strategy, supports_function_calling

    strategy = output_strategy(model.id, model.api_base)
    if settings.fast_path and model.api_base and model.id.startswith("openai/"):
        return DescribedModel(model.id, None, strategy)
    if config.function_calling != "auto":
        return DescribedModel(model.id, None, strategy)
    return DescribedModel(model.id, supports_function_calling(model.id), strategy)
