"""``GET /metrics``: Prometheus metrics of ``runner serve`` (prometheus-client, one registry per app).

The door (``door(state)``) answers the scrape behind ``ServeState.authorize`` (loopback without keys,
a Bearer key with them). ``ServeTelemetry``, the app's outermost middleware after the host guard,
does two things for every request: it continues an incoming W3C ``traceparent`` (a malformed one is
ignored: a new trace), so a run's spans join the caller's trace; and it counts the request (endpoint,
agent, status), its latency and its first byte. What runs inside (model calls, tools, retries) reaches
the app's registry through a ``runner.telemetry`` recorder, found by a context variable the middleware
sets, so two apps in one process never count each other's runs.

Labels are bounded: endpoints are route paths (``other`` for the rest), agents the served names
(``unknown`` until a run starts), tools the agent's tool names, models the configured ids; every
label value is redacted of the environment's secrets first.
"""

from __future__ import annotations

import contextvars
import os
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

import runner.telemetry as telemetry
from runner.redact import Redactor, environment_secrets
from runner.serve.door_spec import Door
from runner.serve.state import ServeState

__all__ = ["ServeMetrics", "ServeTelemetry", "door"]

_LATENCY = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
#: The app whose request this is (set by the middleware, inherited by the run's tasks), and the
#: labels the run fills in for the request (its agent).
_current: contextvars.ContextVar[tuple[ServeMetrics, dict[str, str]] | None] = contextvars.ContextVar(
    "runner_serve_metrics", default=None
)
_by_state: dict[int, ServeMetrics] = {}
#: ``runner_tokens``' ``type`` label and the chat span attribute it counts (``cached_input`` tokens
#: are part of ``input``: the prompt tokens the provider read from its cache).
_TOKEN_KINDS = (
    ("input", "gen_ai.usage.input_tokens"),
    ("output", "gen_ai.usage.output_tokens"),
    ("cached_input", "gen_ai.usage.cache_read.input_tokens"),
)


class ServeMetrics:
    """One app's registry and instruments."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = registry = CollectorRegistry(auto_describe=True)
        self.redact = Redactor(environment_secrets(os.environ))
        self.requests = Counter(
            "runner_http_requests",
            "HTTP requests answered",
            ["endpoint", "agent", "status"],
            registry=registry,
        )
        self.latency = Histogram(
            "runner_http_request_duration_seconds", "Request time to the last byte", ["endpoint"],
            buckets=_LATENCY, registry=registry,
        )  # fmt: skip
        self.first_byte = Histogram(
            "runner_http_first_byte_seconds", "Request time to the first byte of the body", ["endpoint"],
            buckets=_LATENCY, registry=registry,
        )  # fmt: skip
        self.in_flight = Gauge("runner_http_requests_in_flight", "Requests being answered", registry=registry)
        self.runs = Gauge("runner_active_runs", "Agent runs in progress", ["agent"], registry=registry)
        self.sessions = Gauge(
            "runner_active_sessions", "Agent sessions open (a request's, a workflow step's, a sub-agent's)",
            ["agent"], registry=registry,
        )  # fmt: skip
        self.tokens = Counter("runner_tokens", "Model tokens", ["agent", "model", "type"], registry=registry)
        self.cost = Counter(
            "runner_cost_usd", "Model cost (USD, when priced)", ["agent", "model"], registry=registry
        )
        self.model_calls = Counter(
            "runner_model_calls", "Model calls", ["agent", "model", "outcome"], registry=registry
        )
        self.model_errors = Counter(
            "runner_model_errors", "Model calls that failed", ["model", "kind"], registry=registry
        )
        self.retries = Counter(
            "runner_model_retries", "Model calls retried", ["model", "kind"], registry=registry
        )
        self.rate_waits = Counter(
            "runner_rate_limit_waits", "Waits after a rate limit (429)", ["model"], registry=registry
        )
        self.rate_wait_seconds = Counter(
            "runner_rate_limit_wait_seconds", "Seconds waited after rate limits", ["model"], registry=registry
        )
        self.tools = Counter(
            "runner_tool_calls", "Tool calls", ["agent", "tool", "outcome"], registry=registry
        )

    def label(self, value: Any, default: str = "unknown") -> str:
        """A label value: text, secrets masked, at most 120 characters."""
        return self.redact(str(value))[:120] if value not in (None, "") else default

    def scrape(self) -> bytes:
        """The registry in Prometheus' text format."""
        from prometheus_client import generate_latest

        return generate_latest(self.registry)


class _Recorder:
    """The one ``runner.telemetry`` recorder of the process: it hands each event to its app's metrics."""

    users = 0

    def started(self, kind: str, attributes: Mapping[str, Any]) -> None:
        current = _current.get()
        if current is None or kind != "agent":
            return
        metrics, labels = current
        agent = metrics.label(attributes.get("gen_ai.agent.name"))
        labels.setdefault("agent", agent)
        metrics.runs.labels(agent).inc()

    def ended(self, kind: str, attributes: Mapping[str, Any], duration_s: float, error: str | None) -> None:
        current = _current.get()
        if current is None:
            return
        metrics = current[0]
        agent = metrics.label(attributes.get("gen_ai.agent.name"))
        if kind == "agent":
            metrics.runs.labels(agent).dec()
        elif kind == "chat":
            self._chat(metrics, agent, attributes, error)
        elif kind == "tool":
            outcome = (
                "cancelled" if error == "cancelled" else str(attributes.get("runner.tool.outcome", "error"))
            )
            metrics.tools.labels(agent, metrics.label(attributes.get("gen_ai.tool.name")), outcome).inc()

    @staticmethod
    def _chat(metrics: ServeMetrics, agent: str, attributes: Mapping[str, Any], error: str | None) -> None:
        model = metrics.label(attributes.get("gen_ai.request.model"))
        metrics.model_calls.labels(agent, model, "error" if error else "ok").inc()
        if error:
            kind = "rate_limit" if error == "429" else "server" if error.startswith("5") else error
            metrics.model_errors.labels(model, metrics.label(kind)).inc()
        for kind, key in _TOKEN_KINDS:
            value = attributes.get(key)
            if isinstance(value, int) and value:
                metrics.tokens.labels(agent, model, kind).inc(value)
        cost = attributes.get("runner.usage.cost_usd")
        if isinstance(cost, int | float) and cost > 0:
            metrics.cost.labels(agent, model).inc(cost)

    def counted(self, name: str, attributes: Mapping[str, Any]) -> None:
        current = _current.get()
        if current is None:
            return
        metrics = current[0]
        if name == "runner.session":
            change = attributes["runner.session.change"]
            metrics.sessions.labels(metrics.label(attributes.get("gen_ai.agent.name"))).inc(change)
            return
        if name != "runner.model.retry":
            return
        model = metrics.label(attributes.get("gen_ai.request.model"))
        kind = str(attributes.get("runner.retry.kind", "network"))
        metrics.retries.labels(model, kind).inc()
        if kind == "rate_limit":
            metrics.rate_waits.labels(model).inc()
            wait = attributes.get("runner.retry.wait_s")
            if isinstance(wait, int | float):
                metrics.rate_wait_seconds.labels(model).inc(wait)


_RECORDER = _Recorder()


class ServeTelemetry:
    """ASGI middleware: continue the caller's trace; count the request on the app's registry."""

    def __init__(self, app: ASGIApp, *, state: ServeState) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        metrics = _by_state.get(id(self.state))
        if scope["type"] != "http" or (metrics is None and not telemetry.enabled()):
            await self.app(scope, receive, send)
            return
        carrier = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers", ())}
        with telemetry.continue_trace(carrier):
            if metrics is None:
                await self.app(scope, receive, send)
            else:
                await self._counted(metrics, scope, receive, send)

    async def _counted(self, metrics: ServeMetrics, scope: Scope, receive: Receive, send: Send) -> None:
        labels: dict[str, str] = {}
        token = _current.set((metrics, labels))
        started = time.perf_counter()
        status = 500
        first: float | None = None

        async def counting(message: Message) -> None:
            nonlocal status, first
            if message["type"] == "http.response.start":
                status = int(message["status"])
            elif message["type"] == "http.response.body" and first is None:
                first = time.perf_counter() - started
            await send(message)

        metrics.in_flight.inc()
        try:
            await self.app(scope, receive, counting)
        finally:
            metrics.in_flight.dec()
            _current.reset(token)
            route = scope.get("route")
            endpoint = str(getattr(route, "path", "")) or "other"
            metrics.requests.labels(endpoint, labels.get("agent", "none"), str(status)).inc()
            metrics.latency.labels(endpoint).observe(time.perf_counter() - started)
            if first is not None:
                metrics.first_byte.labels(endpoint).observe(first)


def door(state: ServeState) -> Door:
    """``GET /metrics`` on ``state``'s app, and the recorder that fills its registry while it runs."""
    try:
        metrics = _by_state[id(state)] = ServeMetrics()
    except ImportError:  # prometheus-client is in the otel extra, not the serve one
        return _not_installed()

    async def scrape(request: Request) -> Response:
        state.authorize(request)
        from prometheus_client import CONTENT_TYPE_LATEST

        return Response(metrics.scrape(), media_type=CONTENT_TYPE_LATEST)

    @asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
        if _Recorder.users == 0:
            telemetry.add_recorder(_RECORDER)
        _Recorder.users += 1
        try:
            yield
        finally:
            _Recorder.users -= 1
            if _Recorder.users == 0:
                telemetry.remove_recorder(_RECORDER)
            _by_state.pop(id(state), None)

    routes: list[BaseRoute] = [Route("/metrics", scrape, methods=["GET"])]
    return Door(name="metrics", routes=routes, lifespan=lifespan, paths=["/metrics"])


def _not_installed() -> Door:
    """``/metrics`` without prometheus-client: a 501 that says what to install."""

    async def missing(request: Request) -> Response:
        body = {"error": {"message": "GET /metrics needs prometheus-client: pip install 'runner[otel]'"}}
        return JSONResponse(body, status_code=501)

    @asynccontextmanager
    async def nothing() -> AsyncIterator[None]:
        yield

    routes: list[BaseRoute] = [Route("/metrics", missing, methods=["GET"])]
    return Door(name="metrics", routes=routes, lifespan=nothing, paths=["/metrics"])
