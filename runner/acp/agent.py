"""The ACP agent: ``initialize``, ``session/new`` / ``load`` / ``set_mode``, ``session/prompt`` and
``session/cancel``, each a thin translation onto runner sessions (a mode is a team member: the
session moves to its runtime, ``Session.move_to``).

- A session is a runner ``Session`` opened at its first prompt (or at ``session/load``) on the
  runtime of its configuration (``sessions.session_config``: the editor's folder, its MCP servers);
  the ACP session id is the runner session's id, so its transcript is ``runner resume ID``'s.
- A prompt runs ``Session.run([text])``; the loop's events stream as ``session/update``s
  (``mapping.EventMapper``) in order through the session's ``Outbox``; the run's ``Outcome`` becomes
  the ``stopReason`` (an ``error`` outcome is a JSON-RPC error whose message says why).
- A call that needs confirmation (a permission rule's ``ask``, a tool's ``confirm``) asks the editor
  with ``session/request_permission`` (allow once, allow always for the session, reject), within
  the tool's timeout; no answer is a "no".
- ``session/cancel`` interrupts the running step at once; before the first step starts, the turn
  is stopped as its first step begins.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from acp import PROTOCOL_VERSION, RequestError, helpers
from acp.schema import (
    AgentCapabilities,
    AllowedOutcome,
    Implementation,
    InitializeResponse,
    LoadSessionResponse,
    McpCapabilities,
    NewSessionResponse,
    PermissionOption,
    PromptCapabilities,
    PromptResponse,
    SessionMode,
    SessionModeState,
    SetSessionModeResponse,
    ToolCallUpdate,
)

import runner.telemetry as telemetry
from runner.acp.mapping import (
    EventMapper,
    UnsupportedContent,
    prompt_text,
    replay_updates,
    stop_reason,
    tool_kind,
    tool_title,
)
from runner.acp.sessions import AcpSession, HostPool, Outbox, session_config
from runner.agentfile.config import AgentConfig
from runner.errors import LimitReached, RunnerError, StorageError
from runner.redact import Redactor, environment_secrets
from runner.runtime.settings import RuntimeSettings
from runner.session import RunOptions, Session
from runner.session.events import LoopEvent, Note, StepStarted
from runner.session.gate import ConfirmAnswer, confirming_call
from runner.session.outcome import Outcome
from runner.store.transcript import find_transcript, new_session_id, read_transcript
from runner.tools.base import Tool
from runner.version import __version__

__all__ = ["PERMISSION_OPTIONS", "RunnerAgent"]

log = logging.getLogger("runner.acp")

#: What the editor offers for a call that needs confirmation, and what each answer means.
PERMISSION_OPTIONS = (
    PermissionOption(option_id="allow", name="Allow", kind="allow_once"),
    PermissionOption(option_id="always", name="Always allow in this session", kind="allow_always"),
    PermissionOption(option_id="reject", name="Reject", kind="reject_once"),
)
_ANSWERS: dict[str, ConfirmAnswer] = {"allow": "yes", "always": "always", "reject": "no"}
#: How long ``shutdown`` lets interrupted turns take to end before closing anyway.
_SHUTDOWN_GRACE_S = 10.0


def _error(code: int, exc: RunnerError, redact: Redactor | None = None) -> RequestError:
    """A JSON-RPC error whose message is the runner's own (with its hint), secrets masked."""
    message = exc.message + (f" ({exc.hint})" if exc.hint else "")
    return RequestError(code, redact(message) if redact else message, {"error": type(exc).__name__})


class RunnerAgent:
    """The agent side of ACP for one agent file's members (the modes; ``default`` first)."""

    def __init__(
        self,
        members: Mapping[str, AgentConfig],
        *,
        default: str,
        settings: RuntimeSettings,
        model: Any = None,
    ) -> None:
        self.members = dict(members)
        self.default = default
        self.settings = settings
        self.pool = HostPool(settings, model=model)
        self.sessions: dict[str, AcpSession] = {}
        self.conn: Any = None
        #: What error messages to the editor may not show: the agents' secrets, the environment's.
        secrets = set().union(*(config.secrets for config in self.members.values()))
        self.redact = Redactor(secrets | environment_secrets(os.environ))

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    # ----------------------------------------------------------------- set-up

    async def initialize(self, protocol_version: int, **_: Any) -> InitializeResponse:
        """Protocol v1 (the only version it speaks: the answer to any other request, as the protocol
        says); sessions can be loaded; text, resource links and text resources in prompts; stdio,
        HTTP and SSE MCP servers from the editor."""
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(
                load_session=True,
                prompt_capabilities=PromptCapabilities(embedded_context=True),
                mcp_capabilities=McpCapabilities(http=True, sse=True),
            ),
            agent_info=Implementation(name="runner", title="runner", version=__version__),
        )

    async def new_session(
        self, cwd: str, mcp_servers: list[Any] | None = None, **_: Any
    ) -> NewSessionResponse:
        """A session in the editor's folder ``cwd`` on the default member; its runtime opens now."""
        state = await self._new_state(new_session_id(), self.default, cwd, mcp_servers or [])
        return NewSessionResponse(session_id=state.id, modes=self._modes(state.mode))

    async def load_session(
        self, cwd: str, session_id: str, mcp_servers: list[Any] | None = None, **_: Any
    ) -> LoadSessionResponse:
        """The saved session ``session_id`` (its transcript), its conversation replayed to the editor."""
        state = self.sessions.get(session_id)
        if state is None or state.session is None:
            try:
                transcript = read_transcript(find_transcript(self.settings.home, session_id))
            except RunnerError as exc:
                raise _error(-32602, exc, self.redact) from None
            member = str(transcript.header.get("agent", ""))
            if "workflow" in transcript.header or member not in self.members:
                raise RequestError(
                    -32602,
                    f"session {session_id} belongs to '{member or '?'}', not an agent of this file",
                    {"agents": sorted(self.members)},
                )
            state = await self._new_state(transcript.session_id, member, cwd, mcp_servers or [])
            state.session = await Session.open(
                state.host, follow=False, options=self._options(state), resume=transcript
            )
        for update in replay_updates(state.session.history):
            state.outbox.put(update)
        await state.outbox.flush()
        return LoadSessionResponse(modes=self._modes(state.mode))

    async def set_session_mode(self, session_id: str, mode_id: str, **_: Any) -> SetSessionModeResponse:
        """Run another member of the team in this session: its prompt, tools and limits from the next
        turn on, with the conversation so far."""
        state = self._state(session_id)
        if mode_id not in self.members:
            raise RequestError(-32602, f"unknown mode '{mode_id}'", {"modes": sorted(self.members)})
        if state.running is not None:
            raise RequestError(-32600, "the mode changes between prompts: cancel the running one first")
        if mode_id != state.mode:
            config = session_config(self.members[mode_id], cwd=state.cwd, servers=state.servers)
            state.host = await self._host(config)
            state.mode, state.config = mode_id, config
            if state.session is not None:
                await state.session.move_to(state.host)
        return SetSessionModeResponse()

    # ----------------------------------------------------------------- a prompt turn

    async def prompt(self, session_id: str, prompt: list[Any], **meta: Any) -> PromptResponse:
        """Run one turn on the prompt; its updates stream before the answer. ``meta``: the request's
        ``_meta`` (the SDK spreads it); a W3C ``traceparent`` there parents the turn's spans."""
        state = self._state(session_id)
        try:
            text = prompt_text(prompt)
        except UnsupportedContent as exc:
            raise _error(-32602, exc, self.redact) from None
        if state.running is not None:
            raise RequestError(-32600, f"a prompt is already running in session {session_id}")
        state.running, state.cancelled = asyncio.current_task(), False
        try:
            session = await self._opened(state)
            mapper = state.mapper = EventMapper(session.runtime.registry.get)
            session.sink = self._sink(state, session, mapper)
            limit: LimitReached | None = None
            try:
                # A turn that failed or was cut short is not tried again: the new prompt follows it.
                with telemetry.continue_trace(meta):
                    result = await session.run([text], continue_waiting=False)
                outcome, limit = result.outcome, result.limit
            except StorageError as exc:
                raise _error(-32603, exc, self.redact) from None
            except Exception as exc:
                outcome = Outcome.of_error(exc, session_id=session.session_id)
                limit = exc if isinstance(exc, LimitReached) else None
                if outcome.status == "error":
                    if isinstance(exc, RunnerError):
                        log.warning("session %s: %s", session_id, outcome.error)
                    else:  # an escape: its traceback belongs on stderr
                        log.exception("session %s: the turn failed", session_id)
                    await state.outbox.flush()
                    message = self.redact(outcome.error or "the turn failed")
                    raise RequestError(-32603, message, {"error": type(exc).__name__}) from None
            await state.outbox.flush()
            reason = stop_reason(
                outcome, limit=limit, finish_reason=mapper.finish_reason, cancelled=state.cancelled
            )
            return PromptResponse(stop_reason=reason)
        finally:
            state.running, state.mapper = None, None

    async def cancel(self, session_id: str, **_: Any) -> None:
        """Stop the session's running turn now (or as its first step begins)."""
        state = self.sessions.get(session_id)
        if state is None or state.running is None:
            return
        state.cancelled = True
        if state.session is not None:
            state.session.interrupt()

    # ----------------------------------------------------------------- the end

    async def shutdown(self) -> None:
        """The editor went away: interrupt running turns, let them end (answered, recorded), close
        every session (its transcript stays resumable) and runtime."""
        running = [state.running for state in self.sessions.values() if state.running is not None]
        for state in self.sessions.values():
            if state.running is not None:
                await self.cancel(state.id)
        if running:
            await asyncio.wait(running, timeout=_SHUTDOWN_GRACE_S)
        for state in list(self.sessions.values()):
            await state.outbox.aclose()
            if state.session is not None:
                await asyncio.shield(state.session.close())
        self.sessions.clear()
        await self.pool.aclose()

    # ----------------------------------------------------------------- parts

    def _state(self, session_id: str) -> AcpSession:
        state = self.sessions.get(session_id)
        if state is None:
            raise RequestError(
                -32602, f"unknown session '{session_id}': start one with session/new or session/load", None
            )
        return state

    async def _new_state(self, session_id: str, member: str, cwd: str, servers: list[Any]) -> AcpSession:
        folder = Path(cwd)
        if not folder.is_absolute() or not folder.is_dir():
            raise RequestError(-32602, f"cwd {cwd!r} is not an absolute path to a folder", None)
        try:
            config = session_config(self.members[member], cwd=folder, servers=servers)
        except RunnerError as exc:
            raise _error(-32602, exc, self.redact) from None
        host = await self._host(config)
        conn = self.conn

        async def send(update: Any) -> None:
            await conn.session_update(session_id=session_id, update=update)

        state = AcpSession(session_id, member, folder, config, host, Outbox(send), servers=servers)
        self.sessions[session_id] = state
        return state

    async def _host(self, config: AgentConfig) -> Any:
        try:
            return await self.pool.host(config)
        except RunnerError as exc:
            raise _error(-32603, exc, self.redact) from None

    def _modes(self, current: str) -> SessionModeState | None:
        if len(self.members) < 2:
            return None
        modes = [
            SessionMode(id=name, name=name, description=c.description or None)
            for name, c in self.members.items()
        ]
        return SessionModeState(current_mode_id=current, available_modes=modes)

    def _options(self, state: AcpSession) -> RunOptions:
        return RunOptions(confirm=lambda tool, arguments: self._confirm(state, tool, arguments))

    async def _opened(self, state: AcpSession) -> Session:
        if state.session is None:
            state.session = await Session.open(
                state.host, follow=False, options=self._options(state), session_id=state.id
            )
        return state.session

    def _sink(self, state: AcpSession, session: Session, mapper: EventMapper) -> Any:
        def sink(event: LoopEvent) -> None:
            if isinstance(event, StepStarted) and state.cancelled:
                session.interrupt()  # a cancel that came before the step could be stopped
            elif isinstance(event, Note):
                log.log(logging.WARNING if event.level != "info" else logging.INFO, "%s", event.text)
            for update in mapper.updates(event):
                state.outbox.put(update)

        return sink

    async def _confirm(self, state: AcpSession, tool: Tool, arguments: dict[str, Any]) -> ConfirmAnswer:
        """Ask the editor about one call, within the tool's timeout; no answer (or none in time) is "no"."""
        call = confirming_call()
        call_id = call.id if call is not None else f"confirm-{id(arguments)}"
        mapper = state.mapper
        if mapper is not None:
            start = mapper.announce(call_id, tool.name, arguments, "pending")
            if start is not None:
                state.outbox.put(start)
        await state.outbox.flush()
        session = state.session
        timeout = (
            tool.timeout_s
            if tool.timeout_s is not None
            else (session.limits.tool_timeout_s if session else 60.0)
        )
        asked = ToolCallUpdate(
            tool_call_id=call_id,
            title=tool_title(tool.name, arguments),
            kind=tool_kind(tool),
            status="pending",
            raw_input=arguments,
        )
        try:
            async with asyncio.timeout(timeout):
                response = await self.conn.request_permission(
                    session_id=state.id, tool_call=asked, options=list(PERMISSION_OPTIONS)
                )
        except TimeoutError:
            note = f"Not executed: no answer to the permission request within {timeout:g} s."
            log.warning("session %s: %s (%s)", state.id, note, tool.name)
            state.outbox.put(helpers.update_tool_call(call_id, status="failed", raw_output=note))
            return "no"
        except (ConnectionError, RequestError) as exc:
            log.warning("session %s: the permission request for %s failed: %s", state.id, tool.name, exc)
            return "no"
        outcome = response.outcome
        if isinstance(outcome, AllowedOutcome):
            return _ANSWERS.get(outcome.option_id, "no")
        return "no"
