"""What a run shows outside: OpenTelemetry GenAI spans and metrics, and the recorders of ``/metrics``.

The core calls this facade at the few places runs happen (``Session.run``, the model call of a step,
the tool gate, workflow steps, batch items): each call opens a *scope* (a context manager) that ends
a span and tells the recorders how long the work took and how it ended. Nothing here imports
OpenTelemetry: ``enable`` (``--otel``, ``RUNNER_OTEL=1``) loads ``runner.telemetry.otel``, which
does; until then, and without a recorder (``runner serve``'s ``/metrics`` adds one), every call
returns the one shared ``NOOP`` scope, so tracing off costs a global read per call.

Scopes: ``agent`` (``invoke_agent {name}``, one per ``Session.run``), ``chat`` (``chat {model}``),
``tool`` (``execute_tool {tool}``, parented on the agent's span even when the call started while the
model was still streaming), ``workflow`` / ``step``, ``batch`` / ``item``. Trace context crosses
process boundaries with ``inject`` (outgoing headers, MCP ``_meta``) and ``continue_trace`` (an
incoming carrier parents what runs inside: the door helper).
"""

from __future__ import annotations

import contextvars
import functools
import time
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from typing import Any, Protocol

__all__ = [
    "NOOP",
    "Noop",
    "Recorder",
    "Scope",
    "active",
    "add_recorder",
    "agent",
    "batch",
    "chat",
    "continue_trace",
    "count",
    "enable",
    "enabled",
    "inject",
    "item",
    "model_retry",
    "remove_recorder",
    "session_change",
    "setup",
    "step",
    "tool",
    "trace_headers",
    "worker_environment",
    "workflow",
]

Attributes = dict[str, Any]


class Recorder(Protocol):
    """What learns of every scope and count (``runner serve``'s Prometheus registry is one)."""

    def started(self, kind: str, attributes: Mapping[str, Any]) -> None: ...

    def ended(
        self, kind: str, attributes: Mapping[str, Any], duration_s: float, error: str | None
    ) -> None: ...

    def counted(self, name: str, attributes: Mapping[str, Any]) -> None: ...


class Noop:
    """The scope of every call while nothing listens: each method does nothing."""

    __slots__ = ()

    def __enter__(self) -> Noop:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def set(self, attributes: Mapping[str, Any]) -> None:
        """Add attributes (nothing: nobody listens)."""

    def event(self, name: str, attributes: Mapping[str, Any] | None = None) -> None:
        """Add a span event (nothing: nobody listens)."""

    def content(self, key: str, value: Callable[[], Any]) -> None:
        """Add message or tool content when the user opted in (nothing: nobody listens)."""

    def first_chunk(self) -> None:
        """Note the first streamed chunk (nothing: nobody listens)."""

    def reply(self, reply: Any) -> None:
        """Note the model's reply (nothing: nobody listens)."""

    def tool_result(self, result: Any, tool: Any = None) -> None:
        """Note a tool call's result (nothing: nobody listens)."""


NOOP = Noop()

# ----------------------------------------------------------------- the state of the process

_tracing: Any = None  # runner.telemetry.otel.Tracing once ``enable`` ran
_recorders: list[Recorder] = []
_active = False
#: The agent span's context and name: a tool call's parent (not the chat span it started under).
_agent: contextvars.ContextVar[tuple[Any, str] | None] = contextvars.ContextVar(
    "runner_otel_agent", default=None
)
#: The secrets of the agent that runs (its ``${VAR}`` values), masked in content besides the environment's.
_secrets: contextvars.ContextVar[frozenset[str]] = contextvars.ContextVar(
    "runner_otel_secrets", default=frozenset()
)


def active() -> bool:
    """Whether anything listens (tracing on, or a recorder)."""
    return _active


def enabled() -> bool:
    """Whether OpenTelemetry tracing is on in this process."""
    return _tracing is not None


def enable(**options: Any) -> None:
    """Turn tracing on (``--otel``): the SDK and the OTLP exporter, configured by ``OTEL_*``.

    ``options`` go to ``runner.telemetry.otel.Tracing`` (tests give an in-memory exporter). A
    second call replaces the first (its providers are shut down).
    """
    global _tracing, _active
    from runner.telemetry import otel

    old, _tracing = _tracing, otel.Tracing(**options)
    _active = True
    if old is not None:
        old.shutdown()


def setup(on: bool) -> bool:
    """The ``--otel`` switch of a command (``on``: the flag or ``RUNNER_OTEL``): tracing on, exported
    over OTLP as ``OTEL_*`` say, flushed (within a bounded wait) when the process ends. Off when
    ``OTEL_SDK_DISABLED=true``. Whether tracing is on."""
    import os

    if not on or os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true" or _tracing is not None:
        return _tracing is not None
    try:
        import opentelemetry.exporter.otlp.proto.http
        import opentelemetry.sdk  # noqa: F401
    except ImportError:
        from runner.errors import ConfigError

        raise ConfigError(
            "--otel needs the OpenTelemetry SDK and its OTLP exporter",
            hint="pip install 'runner[otel]'",
        ) from None
    import atexit

    enable()
    atexit.register(flush, 2.0)
    return True


def disable() -> None:
    """Turn tracing off again (flushing what is queued); recorders stay."""
    global _tracing, _active
    old, _tracing = _tracing, None
    _active = bool(_recorders)
    if old is not None:
        old.shutdown()


def flush(timeout_s: float = 5.0) -> None:
    """Export what is queued now (a command's end)."""
    if _tracing is not None:
        _tracing.flush(timeout_s)


def add_recorder(recorder: Recorder) -> None:
    """Tell ``recorder`` of every scope from now on."""
    global _active
    _recorders.append(recorder)
    _active = True


def remove_recorder(recorder: Recorder) -> None:
    """Stop telling ``recorder``."""
    global _active
    if recorder in _recorders:
        _recorders.remove(recorder)
    _active = _tracing is not None or bool(_recorders)


# ----------------------------------------------------------------- scopes


class Scope:
    """One unit of work: a span (when tracing) and what the recorders learn when it ends."""

    __slots__ = ("_agent_token", "_secrets", "_start", "_token", "attributes", "kind", "name", "span")

    def __init__(self, kind: str, name: str, attributes: Attributes) -> None:
        self.kind = kind
        self.name = name
        self.attributes = attributes
        self.span: Any = None
        self._token: Any = None
        self._agent_token: Any = None
        self._secrets: frozenset[str] | None = None  # an agent's, to mask while it runs
        self._start = 0.0

    def __enter__(self) -> Scope:
        self._start = time.perf_counter()
        tracing = _tracing
        context: Any = None
        if tracing is not None:
            parent = None
            if self.kind == "tool":
                agent = _agent.get()
                parent = agent[0] if agent is not None else None
            started = tracing.start(self.name, self.attributes, parent, scope=self.kind)
            self.span, self._token, context = started
        if self.kind == "agent":
            name = str(self.attributes.get("gen_ai.agent.name", ""))
            self._secrets = _secrets.get() | (self._secrets or frozenset())
            self._agent_token = (_agent.set((context, name)), _secrets.set(self._secrets))
        for recorder in _recorders:
            recorder.started(self.kind, self.attributes)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        error = _error_type(exc) if exc is not None else self.attributes.get("error.type")
        duration = time.perf_counter() - self._start
        if self.span is not None:
            _tracing.end(self.span, self._token, self.attributes, error, exc, duration, scope=self.kind)
        if self._agent_token is not None:
            _agent.reset(self._agent_token[0])
            _secrets.reset(self._agent_token[1])
        for recorder in _recorders:
            recorder.ended(self.kind, self.attributes, duration, error)

    def set(self, attributes: Mapping[str, Any]) -> None:
        """Add attributes (the span's and the recorders', both given them as the scope ends)."""
        self.attributes.update(attributes)

    def event(self, name: str, attributes: Mapping[str, Any] | None = None) -> None:
        """A span event (``runner.turn``, ``runner.hook``, ``runner.reload``, ``runner.limit``)."""
        if self.span is not None:
            self.span.add_event(name, {k: v for k, v in (attributes or {}).items() if v is not None})

    def content(self, key: str, value: Callable[[], Any]) -> None:
        """Message or tool content, only when the user opted in (``value`` is built then), redacted."""
        if self.span is not None and _tracing.capture_content:
            self.span.set_attribute(key, _tracing.redacted(value(), _secrets.get()))

    def first_chunk(self) -> None:
        """The first streamed chunk arrived: its time from the start (the first one only)."""
        if "gen_ai.response.time_to_first_chunk" not in self.attributes:
            self.attributes["gen_ai.response.time_to_first_chunk"] = time.perf_counter() - self._start

    def reply(self, reply: Any) -> None:
        """A model's ``Reply``: its model, id, finish reason, usage (cost as ``runner.usage.cost_usd``)."""
        usage, attributes = reply.usage, self.attributes
        attributes["gen_ai.response.model"] = reply.model or None
        attributes["gen_ai.response.id"] = reply.response_id
        attributes["gen_ai.response.finish_reasons"] = (reply.finish_reason,) if reply.finish_reason else None
        attributes["gen_ai.usage.input_tokens"] = usage.prompt_tokens
        attributes["gen_ai.usage.output_tokens"] = usage.completion_tokens
        attributes["gen_ai.usage.cache_read.input_tokens"] = usage.cached_tokens or None
        attributes["runner.usage.cost_usd"] = usage.cost_usd
        if self.span is not None and _tracing.capture_content:
            self.content("gen_ai.output.messages", lambda: [reply.message()])

    def tool_result(self, result: Any, tool: Any = None) -> None:
        """A tool call's ``ToolResult`` (and the ``Tool`` that ran it, when known)."""
        source, attributes = getattr(tool, "source_kind", None), self.attributes
        attributes["gen_ai.tool.type"] = "function" if source in (None, "python", "builtin") else "extension"
        attributes["runner.tool.source"] = source
        attributes["runner.tool.outcome"] = "error" if result.is_error else "ok"
        attributes["error.type"] = "tool_error" if result.is_error else None
        if self.span is not None and _tracing.capture_content:
            self.content("gen_ai.tool.call.arguments", lambda: result.arguments or {})
            self.content("gen_ai.tool.call.result", lambda: result.content)


def _error_type(exc: BaseException) -> str:
    import asyncio

    if isinstance(exc, asyncio.CancelledError):
        return "cancelled"
    status = getattr(exc, "status", None)  # a ModelError's HTTP status, as the conventions name it
    return str(status) if isinstance(status, int) else type(exc).__name__


def failure_kind(exc: BaseException) -> str:
    """A model error's kind for metrics: ``rate_limit`` (429), ``server`` (5xx), ``client``, ``network``."""
    status = getattr(exc, "status", None)
    if not isinstance(status, int):
        return "network"
    return "rate_limit" if status == 429 else "server" if status >= 500 else "client"


def model_retry(model: str, error: BaseException, wait_s: float) -> None:
    """A model call is retried after ``wait_s`` (a ``runner.model.retry`` event, counted by kind)."""
    if _active:
        kind = failure_kind(error)
        count(
            "runner.model.retry",
            {"gen_ai.request.model": model, "runner.retry.kind": kind, "runner.retry.wait_s": wait_s},
        )


@functools.lru_cache(maxsize=256)
def provider_of(model: str) -> str:
    """``gen_ai.provider.name`` of a litellm-style model id (``openai/gpt-4o`` -> ``openai``)."""
    prefix, slash, _ = model.partition("/")
    return prefix if slash else "openai"


def agent(
    name: str,
    *,
    conversation_id: str,
    model: str,
    path: str | None = None,
    revision: str | None = None,
    secrets: frozenset[str] = frozenset(),
) -> Scope | Noop:
    """``invoke_agent {name}``: one run of a session (``Session.run``); ``secrets`` masked in content."""
    if not _active:
        return NOOP
    scope = Scope(
        "agent",
        f"invoke_agent {name}",
        {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": name,
            "gen_ai.conversation.id": conversation_id,
            "gen_ai.provider.name": provider_of(model),
            "gen_ai.request.model": model,
            "runner.agent.path": path,
            "runner.agent.revision": revision,
        },
    )
    scope._secrets = secrets
    return scope


def chat(
    model: str, *, stream: bool, params: Mapping[str, Any] | None = None, step: int | None = None
) -> Scope | Noop:
    """``chat {model}``: one model call of a step (``step``: the loop's, from 1 in each turn)."""
    if not _active:
        return NOOP
    current = _agent.get()
    attributes: Attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider_of(model),
        "gen_ai.request.model": model,
        "gen_ai.request.stream": stream,
        "gen_ai.agent.name": current[1] if current is not None else None,
        "runner.step": step,
    }
    if params:
        for key in ("temperature", "max_tokens", "top_p", "seed"):
            value = params.get(key)
            if isinstance(value, (int, float)):
                attributes[f"gen_ai.request.{key}"] = value
    return Scope("chat", f"chat {model}", attributes)


def tool(
    name: str, *, call_id: str, agent_name: str, tool_type: str = "function", step: int | None = None
) -> Scope | Noop:
    """``execute_tool {name}``: one call through the gate (``step``: the loop step that called it)."""
    if not _active:
        return NOOP
    return Scope(
        "tool",
        f"execute_tool {name}",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.type": tool_type,
            "gen_ai.agent.name": agent_name,
            "runner.step": step,
        },
    )


def workflow(name: str, *, conversation_id: str | None = None) -> Scope | Noop:
    """``invoke_workflow {name}``: one run of a team file's workflow."""
    if not _active:
        return NOOP
    return Scope(
        "workflow",
        f"invoke_workflow {name}",
        {
            "gen_ai.operation.name": "invoke_workflow",
            "gen_ai.workflow.name": name,
            "gen_ai.conversation.id": conversation_id,
        },
    )


def step(step_id: str, *, kind: str) -> Scope | Noop:
    """``step {id}``: one step of a workflow."""
    if not _active:
        return NOOP
    return Scope("step", f"step {step_id}", {"runner.step.id": step_id, "runner.step.kind": kind})


def batch(target: str, *, items: int | None = None) -> Scope | Noop:
    """``batch {target}``: one ``runner batch`` run; its items are its children."""
    if not _active:
        return NOOP
    return Scope("batch", f"batch {target}", {"runner.batch.target": target, "runner.batch.items": items})


def item(index: int, *, key: str | None = None) -> Scope | Noop:
    """``batch_item {index}``: one input of a batch."""
    if not _active:
        return NOOP
    return Scope("item", f"batch_item {index}", {"runner.batch.index": index, "runner.batch.key": key})


def session_change(agent_name: str, change: int) -> str:
    """A session of ``agent_name`` opened (``change`` 1) or closed (-1): recorders only (serve's
    ``runner_active_sessions``), no span event. Returns ``agent_name`` (what the close names)."""
    if _recorders:
        for recorder in _recorders:
            recorder.counted(
                "runner.session", {"gen_ai.agent.name": agent_name, "runner.session.change": change}
            )
    return agent_name


def count(name: str, attributes: Mapping[str, Any]) -> None:
    """A count without duration (a retry, a rate-limit wait): recorders, and the current span's event."""
    if not _active:
        return
    if _tracing is not None:
        _tracing.current_event(name, attributes)
    for recorder in _recorders:
        recorder.counted(name, attributes)


# ----------------------------------------------------------------- trace context across boundaries


def inject(carrier: MutableMapping[str, str]) -> MutableMapping[str, str]:
    """Add the current trace context (``traceparent``, ``tracestate``) to ``carrier``; as is when off."""
    if _tracing is not None:
        _tracing.inject(carrier)
    return carrier


def worker_environment() -> dict[str, str]:
    """What a worker process (a Ray actor) needs to trace as this process does: ``RUNNER_OTEL`` and
    the ``OTEL_*`` settings; empty when tracing is off."""
    if _tracing is None:
        return {}
    import os

    names = [n for n in os.environ if n.startswith("OTEL_") or n == "RUNNER_OTEL_CONTENT"]
    return {"RUNNER_OTEL": "true", **{n: os.environ[n] for n in names}}


def trace_headers() -> dict[str, str]:
    """The current trace context as headers (empty when tracing is off)."""
    return dict(inject({})) if _tracing is not None else {}


@contextmanager
def continue_trace(carrier: Mapping[str, Any] | None) -> Iterator[None]:
    """Run the block as part of the trace ``carrier`` names (headers, an MCP or ACP ``_meta``).

    A malformed or missing ``traceparent`` is ignored: what runs starts a trace of its own. The
    door helper: ``with telemetry.continue_trace(request.headers): await runner.run(...)``.
    """
    if _tracing is None or not carrier:
        yield
        return
    token = _tracing.attach(carrier)
    try:
        yield
    finally:
        if token is not None:
            _tracing.detach(token)
