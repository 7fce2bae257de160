"""The agent runtime: everything a loaded agent file determines, built once by one function.

``build_runtime`` is the only way a runtime is made, for a first open and for a reload alike: it
opens the tool sources (holding the unchanged ones of the runtime it replaces), picks the model
(live, recording, replaying, or one the caller gives), chooses the function-calling mode, and
composes the prompts, permissions, hook chains and request parameters. The ``AgentRuntime`` it
returns is immutable; sessions share it (``runner serve`` keeps one per agent across requests) and
it is closed once, when nobody uses it any more (``RuntimeHost``). Nothing about a conversation
lives here: that is the session's.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from runner.agentfile.config import AgentConfig, LimitsConfig
from runner.agentfile.members import fingerprint
from runner.agentfile.output_schema import OutputSchema, load_output
from runner.agentfile.revisions import revision_of
from runner.models.base import Model
from runner.modes import Mode, choose_mode
from runner.runtime.hooks import HookChains
from runner.runtime.model_source import choose_model, live_model, resolve_model_config
from runner.runtime.prompts import Prompts
from runner.runtime.settings import RuntimeSettings
from runner.runtime.sources import Shared, SourceSet, describe_changes
from runner.store.transcript import file_sha256, git_state
from runner.tools.permissions import Permissions
from runner.tools.registry import ToolRegistry
from runner.tools.sources import AgentToolFactory, SourceContext
from runner.tools.threads import run_in_thread

__all__ = ["AgentRuntime", "AgentToolFactory", "Provenance", "build_runtime", "tool_list"]


@dataclass(frozen=True)
class Provenance:
    """Where a runtime's agent file came from: its sha256 and its repository's commit (for headers)."""

    sha256: str
    git: dict[str, Any] | None
    #: The sha256 of every file the agent is made of (``agentfile.members.fingerprint``).
    config_sha256: str = ""
    #: The revision the file was read at (``--rev``, ``git+``): repository, rev, commit, path.
    revision: dict[str, str] | None = None


@dataclass(frozen=True, eq=False)
class AgentRuntime:
    """One loaded configuration of an agent, with what it opened; shared by sessions, never changed."""

    config: AgentConfig
    settings: RuntimeSettings
    model: Model
    registry: ToolRegistry
    mode: Mode
    prompts: Prompts
    permissions: Permissions
    hooks: HookChains
    #: The request parameters of ``model:`` (temperature, max_tokens, then ``params``).
    model_params: Mapping[str, Any]
    stream: bool
    provenance: Provenance
    #: What differs from the runtime this one replaced (empty for a first open).
    changes: str = ""
    #: The shape of the final answer (``output:``), loaded (a ``python:`` model imported).
    output: OutputSchema | None = None
    #: Per model id, the structured-output strategy a provider's refusal led to (``output_refused``):
    #: what the runtime learned about its endpoints, the one thing in it that changes.
    learned_output: dict[str, str] = field(default_factory=dict)
    _sources: SourceSet = field(default_factory=SourceSet, repr=False)
    _model: Shared[Model] | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        """The agent's name."""
        return self.config.name

    @property
    def limits(self) -> LimitsConfig:
        """The agent's limits."""
        return self.config.limits

    @property
    def tool_definitions(self) -> list[dict[str, Any]]:
        """The tool definitions sent to the model (the same list object for every request)."""
        return self.registry.definitions()

    @functools.cached_property
    def tools_chars(self) -> int:
        """The size of the tool definitions, which count toward ``limits.context_tokens``."""
        return len(json.dumps(self.tool_definitions, ensure_ascii=False)) if len(self.registry) else 0

    @functools.cached_property
    def shares_messages(self) -> bool:
        """Whether a restored history's messages may stay the very dicts they were restored from
        (a stored conversation kept in memory, restored again and again): nothing of this runtime
        changes a message in place. Not with a ``python`` hook (it is handed the history's dicts)
        nor a model that does not say it keeps them (``keeps_messages``: the httpx path does;
        litellm's request transformations are not the runner's to vouch for, nor a cassette's)."""
        hooks = (hook for chain in self.config.hooks.values() for hook in chain)
        if any(hook.kind == "python" for hook in hooks):
            return False
        return getattr(self.model, "keeps_messages", False) is True

    def make_model(self, model_id: str) -> Model:
        """Another model of this agent's kind (``/model``): the same settings, another id."""
        return _model_by_id(self.config, self.settings, model_id)

    async def aclose(self) -> None:
        """Close what this runtime opened that no other runtime holds (sources, model, mode)."""
        await self.mode.aclose()
        await self._sources.aclose()
        if self._model is not None:
            await self._model.release()


def _model_by_id(config: AgentConfig, settings: RuntimeSettings, model_id: str) -> Model:
    """A live model with the agent's ``model:`` settings but another id (and no fallbacks)."""
    base = resolve_model_config(config, settings)
    return live_model(replace(base, id=model_id, fallbacks=()), settings)


def tool_list(registry: ToolRegistry) -> list[dict[str, Any]]:
    """The tools as templates see them."""
    return [
        {"name": t.name, "description": t.description, "parameters": t.parameters} for t in registry.tools()
    ]


async def provenance_of(config: AgentConfig) -> Provenance:
    """The agent file's sha256 and git state, off the event loop (``git`` runs two subprocesses)."""

    def read() -> Provenance:
        try:
            revision = revision_of(config.path)
            return Provenance(
                file_sha256(config.path),
                git_state(config.path),
                config_sha256=fingerprint(config),
                revision=revision.record() if revision is not None else None,
            )
        except OSError:
            return Provenance("", None)

    return await run_in_thread(read)


def source_context(
    config: AgentConfig,
    settings: RuntimeSettings,
    *,
    agent_tools: AgentToolFactory | None = None,
    on_progress: Callable[[str, str], None] | None = None,
) -> SourceContext:
    """What the source loaders of ``config`` get (caches under the settings' home)."""
    return SourceContext(
        agent=config,
        agent_tool_factory=agent_tools,
        on_progress=on_progress,
        cache_dir=settings.home / "cache",
        openapi_cache_ttl_s=settings.openapi_cache_ttl_s,
        refresh=settings.refresh_sources,
        default_timeout_s=config.limits.tool_timeout_s,
    )


def _model_for(
    config: AgentConfig,
    settings: RuntimeSettings,
    given: Model | None,
    previous: AgentRuntime | None,
    warn: Callable[[str], None] | None,
    clock: Callable[..., str] | None = None,
) -> tuple[Shared[Model], Callable[..., str] | None]:
    if given is not None:
        return Shared(given, given.aclose), clock
    if previous is not None and previous._model is not None and settings.replay is None:
        same = previous.config.model == config.model and previous.settings == settings
        if same:
            return previous._model.hold(), previous.prompts.clock
    choice = choose_model(config, settings, warn=warn)
    return Shared(choice.model, choice.model.aclose), choice.clock


async def build_runtime(
    config: AgentConfig,
    settings: RuntimeSettings | None = None,
    *,
    model: Model | None = None,
    previous: AgentRuntime | None = None,
    agent_tools: AgentToolFactory | None = None,
    on_progress: Callable[[str, str], None] | None = None,
    warn: Callable[[str], None] | None = None,
    clock: Callable[..., str] | None = None,
) -> AgentRuntime:
    """The runtime of ``config``; raises ``ConfigError(s)`` (nothing stays open) when it cannot open.

    ``model`` replaces the one ``model:`` names (a scripted model in tests); ``previous`` is the
    runtime this one replaces: its unchanged sources and model are shared, not opened again.
    ``clock`` goes with a given ``model``: the ``now()`` its templates see (a replay's recording time).
    """
    settings = settings or RuntimeSettings()
    ctx = source_context(config, settings, agent_tools=agent_tools, on_progress=on_progress)
    sources = await SourceSet.open(config.tools, ctx, previous=previous._sources if previous else None)
    shared: Shared[Model] | None = None
    try:
        shared, clock = _model_for(config, settings, model, previous, warn, clock)
        registry = sources.registry()
        definitions = registry.definitions()

        def selector_model(model_id: str) -> Model:
            return _model_by_id(config, settings, model_id)

        output = (
            load_output(config.output, name=config.name, reload=previous is not None)
            if config.output
            else None
        )
        make = None if settings.replay is not None else selector_model
        mode = choose_mode(config, shared.value, definitions, make_model=make)
        prompts = Prompts(
            config,
            tools=tool_list(registry),
            instructions=sources.instructions(),
            section=mode.system_section(definitions),
            clock=clock,
        )
        from runner.models.factory import model_params

        runtime = AgentRuntime(
            config=config,
            settings=settings,
            model=shared.value,
            registry=registry,
            mode=mode,
            prompts=prompts,
            permissions=Permissions(config.permissions),
            hooks=HookChains(config),
            model_params=MappingProxyType(model_params(config.model)),
            stream=config.model.stream if config.model else True,
            provenance=await provenance_of(config),
            changes=describe_changes(previous.config, config, previous.registry, registry)
            if previous
            else "",
            output=output,
            _sources=sources,
            _model=shared,
        )
    except BaseException:
        await sources.aclose()
        if shared is not None:
            await shared.release()
        raise
    return runtime
