"""What ``runner serve`` serves and how (``ServeState``): shared by the app and every door.

The catalog (with each agent's runtime), the API keys and ``authorize`` (the one check every
endpoint makes), the body limits, and the runs in flight (shutdown cancels what is left).
"""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Protocol

from runner.serve.engine import RequestRun
from runner.serve.guard import is_loopback
from runner.serve.protocol import ApiError
from runner.serve.reload import CatalogHolder
from runner.serve.request import DEFAULT_MAX_MESSAGES

__all__ = [
    "DEFAULT_BODY_TIMEOUT_S",
    "DEFAULT_MAX_BODY_BYTES",
    "Caller",
    "ServeState",
    "ignore_report",
]

DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024
DEFAULT_BODY_TIMEOUT_S = 30.0


class Caller(Protocol):
    """What ``authorize`` reads of a request (a starlette ``Request`` is one)."""

    @property
    def headers(self) -> Mapping[str, str]: ...

    @property
    def client(self) -> Address | None: ...


class Address(Protocol):
    @property
    def host(self) -> str: ...


def ignore_report(line: str) -> None:
    """A report callback that drops the line."""


@dataclass
class ServeState:
    """What the app serves and how: the catalog (with each agent's runtime), keys and limits."""

    catalog: CatalogHolder
    api_keys: tuple[str, ...] = ()
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S
    max_messages: int = DEFAULT_MAX_MESSAGES
    watch: bool = False
    report: Callable[[str], None] = ignore_report
    tool_details: bool = True
    runs: set[RequestRun] = field(default_factory=set)

    @asynccontextmanager
    async def serving(self) -> AsyncIterator[None]:
        """While the server answers: the agent files watched (with ``watch``). After: every run in
        flight cancelled (each releases its tools; 10 s for them to end) and the runtimes closed."""
        stop = asyncio.Event()
        watcher = (
            asyncio.create_task(self.catalog.watch(stop=stop, report=self.report)) if self.watch else None
        )
        try:
            yield
        finally:
            stop.set()
            for run in list(self.runs):
                run.cancel()
            tasks = [run.task for run in self.runs if run.task is not None]
            if watcher is not None:
                tasks.append(watcher)
            if tasks:
                await asyncio.wait(tasks, timeout=10)
            await self.catalog.aclose()

    def authorize(self, request: Caller) -> str | None:
        """Refuse a request without a configured key (401); the key it used, or None without keys.

        With no keys only loopback clients are answered. Doors that keep state per caller (stored
        responses, sessions) own it by the returned key.
        """
        if not self.api_keys:
            client = request.client
            if client is not None and not is_loopback(client.host):
                raise ApiError(
                    401,
                    "this server has no API keys and answers only loopback clients",
                    code="invalid_api_key",
                )
            return None
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        given = token.strip().encode()
        matches = [hmac.compare_digest(given, key.encode()) for key in self.api_keys]
        if scheme.lower() != "bearer" or not any(matches):
            raise ApiError(401, "Incorrect API key provided.", code="invalid_api_key")
        return token.strip()

    def track(self, run: RequestRun) -> None:
        """Remember a started run until its task ends (shutdown cancels what is left)."""
        self.runs.add(run)
        if run.task is not None:
            run.task.add_done_callback(lambda _task: self.runs.discard(run))
