"""``AgentRunner``: one agent behind the runner interface (open, run, interrupt, close).

It holds the agent's ``RuntimeHost`` (the runtime is built on the first run, or given) and runs each
call as a new ``Session`` with ``Session.run``. ``run`` returns the session's ``Outcome``; an error
during the run (a model that stays unreachable, a tool's escape) is an ``error`` outcome, not an
exception, unless ``raise_errors``. A transcript that cannot be written (``StorageError``) always
raises: it is the caller's problem, not the run's.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from runner.agentfile.config import AgentConfig
from runner.errors import RunnerError, StorageError
from runner.models.base import Model
from runner.runtime.host import RuntimeHost
from runner.runtime.runtime import AgentRuntime
from runner.runtime.settings import RuntimeSettings
from runner.session import RunOptions, RunResult, Session
from runner.session.events import EventSink
from runner.session.opening import runtime_host
from runner.session.outcome import Outcome

__all__ = ["AgentRunner"]

log = logging.getLogger("runner.runnable")


class AgentRunner:
    """Runs one agent: a new session per ``run`` on one runtime, closed by ``aclose``."""

    kind = "agent"

    def __init__(
        self,
        config: AgentConfig,
        settings: RuntimeSettings | None = None,
        *,
        model: Model | None = None,
        host: RuntimeHost | None = None,
        runtime: AgentRuntime | None = None,
    ) -> None:
        self.config = config
        self.settings = settings or RuntimeSettings()
        self._runtime = runtime  # given: the caller owns it
        self.host = (
            host
            if host is not None or runtime is not None
            else runtime_host(config, self.settings, model=model)
        )
        self._sessions: set[Session] = set()
        #: The last run's ``RunResult`` (None after an error): the turns, for callers that read them.
        self.last: RunResult | None = None

    @property
    def name(self) -> str:
        return self.config.name

    async def open(self) -> AgentRuntime:
        """The runtime, built now if it was not (tool sources, model client)."""
        if self._runtime is not None:
            return self._runtime
        assert self.host is not None
        runtime = await self.host.acquire()
        await self.host.release(runtime)
        return runtime

    async def session(
        self, *, options: RunOptions | None = None, sink: EventSink | None = None, **kw: Any
    ) -> Session:
        """A new session on the runtime (the caller runs and closes it)."""
        if self._runtime is not None:
            return Session(self._runtime, options=options, sink=sink, **kw)
        assert self.host is not None
        return await Session.open(self.host, follow=False, options=options, sink=sink, **kw)

    async def run(
        self,
        inputs: Sequence[str],
        *,
        options: RunOptions | None = None,
        sink: EventSink | None = None,
        session_id: str | None = None,
        raise_errors: bool = False,
    ) -> Outcome:
        """Run ``inputs`` in one new session, to its end; its outcome."""
        self.last = None
        session = await self.session(options=options, sink=sink, session_id=session_id)
        self._sessions.add(session)
        try:
            result = await session.run(list(inputs))
        except StorageError:
            raise
        except Exception as exc:
            if raise_errors:
                raise
            if not isinstance(exc, RunnerError):
                log.exception("agent %s: the run failed", self.name)
            return Outcome.of_error(
                exc,
                session_id=session.session_id,
                usage=session.usage,
                tools=session.calls,
                refused=session.confirmation.refused,
            )
        finally:
            self._sessions.discard(session)
            await asyncio.shield(session.close())
        self.last = result
        return result.outcome

    def interrupt(self) -> None:
        """Stop every running session's step (each ends its turn with every call answered)."""
        for session in list(self._sessions):
            session.interrupt()

    async def aclose(self) -> None:
        """Close the runtime (a given one stays the caller's)."""
        if self.host is not None:
            await self.host.aclose()
