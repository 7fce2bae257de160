"""Opening and closing a session: model, tool sources, registry, transcript, hooks.

``open_session`` is an async context manager: everything it opens (MCP sessions, HTTP clients,
the model's connections, the transcript) is closed when it exits, in the task that opened it.
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from runner import __version__
from runner.agentfile.config import AgentConfig, ModelConfig
from runner.errors import ConfigError, ConfigErrors
from runner.loop.events import EventSink, Note
from runner.loop.modes import Mode
from runner.loop.prompts import PromptRenderer
from runner.loop.reload import SourcePool, describe_changes, registry_of
from runner.loop.session import PreparedReload, RunOptions, Session
from runner.loop.subagent import ParentLink
from runner.models.base import Model
from runner.store.transcript import (
    Redactor,
    Transcript,
    TranscriptWriter,
    file_sha256,
    git_signature,
    git_state,
    new_session_id,
    sessions_dir,
)
from runner.tools.registry import ToolRegistry
from runner.tools.sources import SourceContext, SourceFailure
from runner.tools.threads import run_in_thread


@dataclass
class SessionConfig:
    """Where and how a session keeps its records."""

    home: Path = Path(".runner")
    fsync: bool = False
    write_transcript: bool = True
    default_model: str | None = None
    model_override: str | None = None
    openapi_cache_ttl_s: float = 3600.0
    refresh_sources: bool = False
    fast_path: bool = True
    #: Record every model call to this cassette (``--record``).
    record: Path | None = None
    #: Answer model calls from this cassette instead of a model (``--replay``).
    replay: Path | None = None
    #: With ``replay``: a request that differs from the recording is an error (else a warning).
    replay_strict: bool = True
    extra: dict[str, Any] = field(default_factory=dict)


def resolve_model_spec(spec: AgentConfig, config: SessionConfig) -> ModelConfig:
    """The model to use: ``--model`` over the agent's ``model:`` over ``RUNNER_DEFAULT_MODEL``."""
    base = spec.model
    if config.model_override:
        return replace(base, id=config.model_override) if base else ModelConfig(id=config.model_override)
    if base is not None:
        return base
    if config.default_model:
        return ModelConfig(id=config.default_model)
    raise ConfigError(
        f"agent '{spec.name}' names no model",
        file=str(spec.path),
        hint="add `model: provider/name` to the file, pass --model, or set RUNNER_DEFAULT_MODEL",
    )


def select_mode(spec: AgentConfig, model: Model, registry: ToolRegistry) -> Mode:
    """The function-calling mode of this session (SPEC section 8), checked."""
    from runner.loop.modes import choose_mode

    return choose_mode(spec, model, registry.definitions())


def _failures_error(spec: AgentConfig, failures: list[SourceFailure]) -> ConfigErrors:
    errors = []
    for failure in failures:
        s = failure.spec
        errors.append(
            ConfigError(
                f"tool source {s.label} failed: {failure.error.message}",
                file=str(spec.path),
                line=s.line,
                column=s.column,
                path=f"tools[{s.index}]",
                hint=failure.error.hint,
            )
        )
    return ConfigErrors(errors)


def _source_context(
    spec: AgentConfig,
    config: SessionConfig,
    link: ParentLink | None,
    on_progress: Callable[[str, str], None] | None,
) -> SourceContext:
    from runner.loop.subagent import make_agent_tool_factory

    return SourceContext(
        agent_tool_factory=make_agent_tool_factory(spec, config, link or ParentLink()),
        on_progress=on_progress,
        agent=spec,
        cache_dir=config.home / "cache",
        openapi_cache_ttl_s=config.openapi_cache_ttl_s,
        refresh=config.refresh_sources,
        default_timeout_s=spec.limits.tool_timeout_s,
    )


async def build_registry(
    spec: AgentConfig,
    stack: AsyncExitStack,
    config: SessionConfig,
    link: ParentLink | None = None,
    on_progress: Callable[[str, str], None] | None = None,
    pool: SourcePool | None = None,
) -> tuple[ToolRegistry, list[str], list[SourceFailure]]:
    """Open the agent's tool sources; the registry, server instructions and failed sources."""
    if pool is None:
        pool = SourcePool()
        stack.push_async_callback(pool.aclose)
    loaded, failures = await pool.load(spec.tools, _source_context(spec, config, link, on_progress))
    instructions = [r.instructions for _, r in loaded if r.instructions]
    return registry_of(loaded), instructions, failures


def tool_list(registry: ToolRegistry) -> list[dict[str, Any]]:
    """The tools as templates see them."""
    return [
        {"name": t.name, "description": t.description, "parameters": t.parameters} for t in registry.tools()
    ]


@dataclass
class Reloader:
    """Prepares a running session's next configuration from a changed agent file (``--watch``)."""

    pool: SourcePool
    config: SessionConfig
    link: ParentLink
    options: RunOptions
    sink: EventSink
    clock: Any = None

    async def prepare(self, session: Session, spec: AgentConfig) -> PreparedReload:
        """Open what the new ``spec`` needs; raise ``ConfigError(s)`` and keep the old config on failure."""
        on_progress = lambda label, text: self.sink(Note(f"{label}: {text}"))  # noqa: E731
        ctx = _source_context(spec, self.config, self.link, on_progress)
        loaded, failures = await self.pool.load(spec.tools, ctx, reload_code=True)
        if failures:
            raise _failures_error(spec, failures)
        registry = registry_of(loaded)
        model = None
        if spec.model != session.spec.model and self.config.replay is None:
            from runner.models.factory import make_model

            model = make_model(resolve_model_spec(spec, self.config), fast_path=self.config.fast_path)
        mode = select_mode(spec, model or session.model, registry)
        renderer = PromptRenderer(
            spec, variables=self.options.variables, tools=tool_list(registry), clock=self.clock
        )
        renderer.system(session.first_input)  # a template error fails the reload now, not at the next turn
        return PreparedReload(
            spec=spec,
            registry=registry,
            instructions=[r.instructions for _, r in loaded if r.instructions],
            renderer=renderer,
            model=model,
            changes=describe_changes(session.spec, spec, session.registry, registry),
            mode=mode,
        )


def _cassette_model(spec: AgentConfig, config: SessionConfig, sink: EventSink) -> tuple[Model, Any]:
    """The model for this session: live, recording to a cassette, or replaying one."""
    import datetime as _dt

    from runner.agentfile.templates import frozen_clock
    from runner.loop.events import Note
    from runner.store.cassette import CassetteError, CassetteWriter, read_cassette
    from runner.store.replay import RecordingModel, ReplayModel

    redact = Redactor(spec.secrets)
    if config.replay is not None:
        cassette = read_cassette(config.replay)
        recorded_for = cassette.header.get("agent")
        if recorded_for != spec.name:
            raise CassetteError(
                f"{config.replay}: this cassette was recorded for agent '{recorded_for}', not '{spec.name}'",
                hint="give the cassette of this agent, or record one with --record",
            )
        model_id = str(cassette.header.get("model") or resolve_model_spec(spec, config).id)
        clock = None
        if cassette.header.get("clock"):
            clock = frozen_clock(_dt.datetime.fromisoformat(str(cassette.header["clock"])))
        replay = ReplayModel(
            cassette,
            name=model_id,
            redact=redact,
            strict=config.replay_strict,
            on_warning=lambda text: sink(Note(text, "warning")),
        )
        return replay, clock
    from runner.models.factory import make_model

    model: Model = make_model(resolve_model_spec(spec, config), fast_path=config.fast_path)
    if config.record is not None:
        writer = CassetteWriter(
            config.record,
            redact=redact,
            header={
                "agent": spec.name,
                # relative to the cassette, so a committed cassette names no machine's folders
                "agent_path": os.path.relpath(spec.path, config.record.resolve().parent),
                "agent_sha256": file_sha256(spec.path),
                "git": git_state(spec.path),
                "model": model.name,
                "clock": _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
                "runner_version": __version__,
            },
        )
        model = RecordingModel(model, writer)
    return model, None


#: How long a file's git state is reused while nothing it depends on changed (``agent_provenance``).
PROVENANCE_TTL_S = 60.0
_provenance: dict[tuple[Any, ...], tuple[float, str, dict[str, Any] | None]] = {}


async def agent_provenance(path: Path) -> tuple[str, dict[str, Any] | None]:
    """The sha256 of an agent file and its git state, for a transcript header.

    ``git`` runs two subprocesses (~5 ms): they run on a worker thread, not the event loop, and the
    answer is reused while the file's size and mtime and the repository's ``git_signature`` (HEAD, the
    index, the branch ref) stay the same, so the sessions ``runner serve`` opens per request do not
    pay for it each time; a commit, a checkout or an edit is seen by the next session. The answer is
    also never older than ``PROVENANCE_TTL_S``, for what the signature cannot see.
    """
    try:
        stat = path.stat()
    except OSError:
        return await run_in_thread(lambda: (file_sha256(path), git_state(path)))
    key = (str(path), stat.st_mtime_ns, stat.st_size, git_signature(path))
    now = time.monotonic()
    cached = _provenance.get(key)
    if cached is not None and now - cached[0] < PROVENANCE_TTL_S:
        return cached[1], cached[2]
    sha256, git = await run_in_thread(lambda: (file_sha256(path), git_state(path)))
    if len(_provenance) > 256:
        _provenance.clear()
    _provenance[key] = (now, sha256, git)
    return sha256, git


@asynccontextmanager
async def open_session(
    spec: AgentConfig,
    *,
    sink: EventSink,
    options: RunOptions | None = None,
    config: SessionConfig | None = None,
    model: Model | None = None,
    resume: Transcript | None = None,
) -> AsyncIterator[Session]:
    """A ready session (sources open, ``session_start`` run); closed with everything it opened."""
    options = options or RunOptions()
    config = config or SessionConfig()
    async with AsyncExitStack() as stack:
        clock = None
        if model is None:
            model, clock = _cassette_model(spec, config, sink)
        stack.push_async_callback(model.aclose)
        link = ParentLink()
        pool = SourcePool()
        stack.push_async_callback(pool.aclose)
        registry, instructions, failures = await build_registry(
            spec,
            stack,
            config,
            link,
            on_progress=lambda label, text: sink(Note(f"{label}: {text}")),
            pool=pool,
        )
        if failures:
            raise _failures_error(spec, failures)
        mode = select_mode(spec, model, registry)
        session_id = resume.session_id if resume is not None else new_session_id()
        transcript = None
        if config.write_transcript:
            transcript = TranscriptWriter(
                sessions_dir(config.home) / f"{session_id}.jsonl", Redactor(spec.secrets), fsync=config.fsync
            )
            stack.callback(transcript.close)
            if resume is None:
                sha256, git = await agent_provenance(spec.path)
                transcript.header(
                    session_id=session_id,
                    agent=spec.name,
                    agent_path=str(spec.path),
                    agent_sha256=sha256,
                    git=git,
                    model=model.name,
                    replay=str(config.replay) if config.replay else None,
                    record=str(config.record) if config.record else None,
                )
            else:
                transcript.event("resume", agent_sha256=(await agent_provenance(spec.path))[0])
        renderer = PromptRenderer(spec, variables=options.variables, tools=tool_list(registry), clock=clock)
        session = Session(
            spec,
            session_id=session_id,
            model=model,
            registry=registry,
            renderer=renderer,
            transcript=transcript,
            sink=sink,
            options=options,
            instructions=instructions,
            mode=mode,
        )
        if mode.kind == "prompt" and spec.selector.model and config.replay is None:
            from runner.models.factory import make_model

            session.selector_model = make_model(
                replace(resolve_model_spec(spec, config), id=spec.selector.model, fallbacks=()),
                fast_path=config.fast_path,
            )
            stack.push_async_callback(session.selector_model.aclose)
        link.session = session
        session.reloader = Reloader(pool, config, link, options, sink, clock)
        if resume is not None:
            session.restore(
                resume.history(),
                system=resume.system_prompt(),
                errors=resume.error_call_ids(),
                turns=resume.turns(),
            )
        elif not await session.start():
            session.queue.clear()
        try:
            yield session
        finally:
            await session.end()


@dataclass(frozen=True)
class _DescribedModel:
    """Stands in for a model when only its capabilities matter (``runner render``): never called."""

    name: str
    supports_tools: bool | None


def capabilities(spec: AgentConfig, config: SessionConfig) -> _DescribedModel:
    """What ``auto`` needs to know about the agent's model, without a connection.

    On the fast path (``openai/...`` with an ``api_base``) the server decides and litellm is not
    imported; otherwise litellm's model information answers.
    """
    try:
        model = resolve_model_spec(spec, config)
    except ConfigError:
        return _DescribedModel("(none: set model: in the file, --model or RUNNER_DEFAULT_MODEL)", None)
    if config.fast_path and model.api_base and model.id.startswith("openai/"):
        return _DescribedModel(model.id, None)
    if spec.function_calling != "auto":
        return _DescribedModel(model.id, None)
    from runner.models.litellm_model import supports_function_calling

    return _DescribedModel(model.id, supports_function_calling(model.id))


async def first_request(
    spec: AgentConfig, *, input: str, variables: dict[str, Any], config: SessionConfig
) -> dict[str, Any]:
    """The exact first request of a session on ``input`` (sources opened, no model call, no hooks)."""
    from runner.loop.prompts import compose_system

    described = capabilities(spec, config)
    async with AsyncExitStack() as stack:
        registry, instructions, failures = await build_registry(spec, stack, config)
        if failures:
            raise _failures_error(spec, failures)
        mode = select_mode(spec, described, registry)  # type: ignore[arg-type]
        renderer = PromptRenderer(spec, variables=variables, tools=tool_list(registry))
        section = mode.system_section(registry.definitions())
        system = compose_system(renderer.system(input), instructions, section)
        messages = [m for m in (system, renderer.user(input), renderer.status(input)) if m]
        return {
            "model": described.name,
            "mode": mode.kind,
            "mode_why": mode.why,
            "messages": messages,
            "tools": mode.request_tools(registry.definitions() or None),
        }
