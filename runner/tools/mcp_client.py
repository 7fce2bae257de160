"""One MCP server's client session: opened once, shared by every call, closed by the task that opened it.

The SDK runs transports and sessions in anyio task groups whose cancel scopes must be left by the
task that entered them (Open WebUI's ``MCPClient.disconnect``, seed 003). So each connection is
owned by a dedicated asyncio task that enters the transport and the ``ClientSession``, initializes,
lists the tools (following ``nextCursor``), then waits until told to stop, re-listing when the server
sends ``notifications/tools/list_changed``. Calls are made from any task through that session.

A connection whose stream ends (the server died) is marked lost: calls in flight become tool errors,
and the next call makes one reconnect attempt, shared by the calls that wait on it. The transport is
a seam: ``connect(stack, stderr)`` enters one (stdio, streamable HTTP, SSE; see
``runner.tools.mcp``) on the owner task's stack and returns its stream pair; ``stderr`` is a file
kept for the connection's lifetime, for a subprocess's error output.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import tempfile
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any, Self, TextIO, cast

import anyio
import httpx2
import mcp.types as types
from mcp import ClientSession
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage

import runner.telemetry as telemetry
from runner.errors import ToolError
from runner.version import __version__

__all__ = ["Connect", "ListingFilter", "McpClient", "McpStartError"]

_CLOSE_TIMEOUT_S = 10.0
_MAX_PAGES = 1000
_STDERR_TAIL_CHARS = 2000
_REPORTED_JUNK_LINES = 10  # per connection; a server that prints on and on is not echoed forever
_JUNK_EXCERPT_CHARS = 120
_CLIENT_INFO = types.Implementation(name="runner", version=__version__)

ListingFilter = Callable[[dict[str, Any]], None]
"""Edits a raw ``tools/list`` result in place before the SDK validates it."""
Connect = Callable[[AsyncExitStack, TextIO], Awaitable[tuple[Any, Any]]]
"""Enters a transport on the stack and returns its (read, write) streams."""


class _QuietParseErrors(logging.Filter):
    """Drops the SDK's traceback for a stdout line that is not JSON-RPC (``mcp.client.stdio`` logs it
    with ``logger.exception``); the client reports such a line itself, in one warning line."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], ValueError))


_QUIET_PARSE_ERRORS = _QuietParseErrors()


class McpStartError(Exception):
    """A connection could not be opened; ``stderr_tail`` is what a stdio server printed last."""

    def __init__(self, reason: str, *, stderr_tail: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.stderr_tail = stderr_tail


@dataclass(eq=False)
class _Connection:
    """One generation of the session, from open to close, owned by ``task``."""

    stop: asyncio.Event = field(default_factory=asyncio.Event)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    ready: asyncio.Future[None] = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    session: ClientSession | None = None
    # Closed by McpClient._retire, not with the stack: errors quote it after the process ended.
    stderr: TextIO = field(default_factory=lambda: cast(TextIO, tempfile.TemporaryFile("w+")))  # noqa: SIM115
    lost: bool = False
    relist: bool = False
    junk_lines: int = 0
    task: asyncio.Task[None] | None = None

    def mark_lost(self) -> None:
        self.lost = True
        self.wake.set()

    def stderr_tail(self) -> str:
        """The end of what the server wrote to stderr (``pread``: the child shares the file offset)."""
        if self.stderr.closed:
            return ""
        fd = self.stderr.fileno()
        size = os.fstat(fd).st_size
        start = max(0, size - _STDERR_TAIL_CHARS)
        return os.pread(fd, size - start, start).decode("utf-8", errors="replace").strip()


class McpClient:
    """The client side of one MCP server for one runner session."""

    def __init__(
        self,
        connect: Connect,
        *,
        label: str,
        timeout_s: float = 60.0,
        startup_timeout_s: float | None = None,
        listing_filter: ListingFilter | None = None,
        on_progress: Callable[[str, str], None] | None = None,
        on_tools_changed: Callable[[], None] | None = None,
        logger: logging.Logger | None = None,
    ) -> None:
        self.connect = connect
        self.label = label
        self.timeout_s = timeout_s
        self.startup_timeout_s = startup_timeout_s if startup_timeout_s is not None else timeout_s
        self.listing_filter = listing_filter
        self.on_progress = on_progress
        self.on_tools_changed = on_tools_changed
        self.logger = logger or logging.getLogger("runner.tools.mcp")
        self.tools: tuple[types.Tool, ...] = ()
        self.instructions: str | None = None
        self.server_name = ""
        self.sessions_opened = 0
        """MCP sessions initialized so far: 1, plus one per successful reconnect."""
        self._current: _Connection | None = None
        self._attempts = 0
        self._last_failure: McpStartError | None = None
        self._lock = asyncio.Lock()
        self._closed = False
        self._listed = False
        sdk_stdio = logging.getLogger("mcp.client.stdio")
        if _QUIET_PARSE_ERRORS not in sdk_stdio.filters:
            sdk_stdio.addFilter(_QUIET_PARSE_ERRORS)

    async def start(self) -> None:
        """Open the first session; raises ``McpStartError`` if the server cannot be reached."""
        async with self._lock:
            await self._open()

    async def close(self) -> None:
        """Stop the session (its owner task closes it) and wait for that, bounded."""
        async with self._lock:
            self._closed = True
            await self._retire(self._current)

    async def call_tool(
        self, name: str, arguments: dict[str, Any], *, timeout_s: float | None = None
    ) -> types.CallToolResult:
        """Call one tool; any failure (server error, timeout, lost connection) is a ``ToolError``."""
        timeout = timeout_s if timeout_s is not None else self.timeout_s
        connection = await self._usable_connection()
        assert connection.session is not None

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            text = f"{name}: {progress:g}/{total:g}" if total else f"{name}: {progress:g}"
            self._report(f"{text} {message}" if message else text)

        try:
            # The SDK's read timeout also sends notifications/cancelled; the outer one bounds the rest.
            async with asyncio.timeout(_bound(timeout, grace=1.0)):
                return await connection.session.call_tool(
                    name,
                    arguments,
                    read_timeout_seconds=_bound(timeout),
                    progress_callback=on_progress,
                    meta=cast(Any, telemetry.trace_headers()) or None,  # traceparent in _meta
                )
        except MCPError as exc:
            if exc.code == types.REQUEST_TIMEOUT:
                raise self._timeout_error(name, timeout) from None
            if exc.code == types.CONNECTION_CLOSED:
                connection.mark_lost()
                raise self._lost_error(name, connection) from None
            raise ToolError(f"MCP server {self.label!r} answered with an error: {exc.message}") from None
        except TimeoutError:
            raise self._timeout_error(name, timeout) from None
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, httpx2.TransportError):
            connection.mark_lost()
            raise self._lost_error(name, connection) from None
        except Exception as exc:
            raise ToolError(f"MCP tool {name!r} failed: {_describe(exc)}") from None

    async def _usable_connection(self) -> _Connection:
        current = self._current
        if current is not None and not current.lost and current.session is not None:
            return current
        seen = self._attempts
        async with self._lock:
            if self._closed:
                raise ToolError(f"MCP server {self.label!r} is closed")
            current = self._current
            if self._attempts != seen:  # a concurrent call already made this reconnect attempt
                if current is not None and not current.lost:
                    return current
                raise self._unavailable_error()
            self._report("connection lost; reconnecting")
            await self._retire(current)
            try:
                return await self._open()
            except McpStartError:
                raise self._unavailable_error() from None

    async def _open(self) -> _Connection:
        self._attempts += 1
        connection = self._current = _Connection()
        connection.task = asyncio.create_task(self._own(connection), name=f"mcp:{self.label}")
        try:
            await asyncio.shield(connection.ready)
        except BaseException as exc:
            if isinstance(exc, McpStartError):
                self._last_failure = exc
            await self._retire(connection)
            raise
        self._last_failure = None
        return connection

    async def _retire(self, connection: _Connection | None) -> None:
        """Tell a connection's owner task to close and wait for it; cancel it if it will not finish."""
        if connection is None or connection.task is None:
            return
        connection.stop.set()
        connection.wake.set()
        if connection.ready.done() and not connection.ready.cancelled():
            connection.ready.exception()  # a failed start was reported by _open; mark it retrieved
        done, _ = await asyncio.wait({connection.task}, timeout=_CLOSE_TIMEOUT_S)
        if not done:
            self.logger.warning("MCP server %s did not close in time; cancelling it", self.label)
            connection.task.cancel()  # the cancellation unwinds in the owner task itself
            with contextlib.suppress(asyncio.CancelledError):
                await connection.task
        connection.stderr.close()

    async def _own(self, connection: _Connection) -> None:
        """The owner task: open, serve until told to stop (or the stream ends), close; all in here."""
        try:
            async with AsyncExitStack() as stack:
                try:
                    async with asyncio.timeout(_bound(self.startup_timeout_s)):
                        session = await self._enter_session(connection, stack)
                        result = await session.initialize()
                        tools = await self._list_tools(session)
                except TimeoutError:
                    raise McpStartError(f"no answer within {self.startup_timeout_s:g} s") from None
                self.sessions_opened += 1
                self.server_name = result.server_info.name
                self.instructions = (result.instructions or "").strip() or None
                self._adopt_tools(tools)
                connection.session = session
                connection.ready.set_result(None)
                await self._serve(connection, session)
        except BaseException as exc:
            if not connection.ready.done():
                failure = (
                    exc if isinstance(exc, McpStartError) else McpStartError(_describe(exc, starting=True))
                )
                failure.stderr_tail = connection.stderr_tail()
                connection.ready.set_exception(failure)
            elif not connection.stop.is_set():
                self.logger.warning("MCP server %s: connection ended: %s", self.label, _describe(exc))
            if isinstance(exc, asyncio.CancelledError | KeyboardInterrupt | SystemExit):
                raise
        finally:
            connection.lost = True

    async def _enter_session(self, connection: _Connection, stack: AsyncExitStack) -> ClientSession:
        read, write = await self.connect(stack, connection.stderr)

        async def on_message(message: types.ServerNotification | Exception) -> None:
            if isinstance(message, types.ToolListChangedNotification):
                connection.relist = True
                connection.wake.set()

        def on_junk(exc: Exception) -> None:
            connection.junk_lines += 1
            if connection.junk_lines > _REPORTED_JUNK_LINES:
                return
            last = (
                " (further such lines are not reported)"
                if connection.junk_lines == _REPORTED_JUNK_LINES
                else ""
            )
            self.logger.warning(
                "MCP server %s: ignored a line of its output that is not JSON-RPC: %s%s",
                self.label,
                _junk_excerpt(exc),
                last,
            )

        watched = _WatchedRead(
            read, on_listing=self.listing_filter, on_end=connection.mark_lost, on_junk=on_junk
        )
        session = ClientSession(watched, write, message_handler=on_message, client_info=_CLIENT_INFO)
        return await stack.enter_async_context(session)

    async def _serve(self, connection: _Connection, session: ClientSession) -> None:
        while True:
            await connection.wake.wait()
            connection.wake.clear()
            if connection.stop.is_set() or connection.lost:
                return
            if connection.relist:
                connection.relist = False
                try:
                    async with asyncio.timeout(_bound(self.startup_timeout_s)):
                        self._adopt_tools(await self._list_tools(session))
                except Exception as exc:
                    reason = _describe(exc)
                    self.logger.warning("MCP server %s: re-listing tools failed: %s", self.label, reason)

    async def _list_tools(self, session: ClientSession) -> list[types.Tool]:
        """Every page of ``tools/list``, following ``nextCursor`` (a repeated cursor ends the walk)."""
        tools: list[types.Tool] = []
        cursor: str | None = None
        seen: set[str] = set()
        for _ in range(_MAX_PAGES):
            page = await session.list_tools(
                params=types.PaginatedRequestParams(cursor=cursor) if cursor else None
            )
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None or cursor in seen:
                break
            seen.add(cursor)
        return tools

    def _adopt_tools(self, tools: list[types.Tool]) -> None:
        """Keep a new listing; tell ``on_tools_changed`` when it differs from the one before."""
        dump = [tool.model_dump(mode="json") for tool in tools]
        changed = dump != [tool.model_dump(mode="json") for tool in self.tools]
        first, self._listed = not self._listed, True
        self.tools = tuple(tools)
        if changed and not first and self.on_tools_changed is not None:
            try:
                self.on_tools_changed()
            except Exception:
                self.logger.exception("MCP server %s: the tools-changed callback failed", self.label)

    def _report(self, message: str) -> None:
        if self.on_progress is not None:
            self.on_progress(self.label, message)

    def _timeout_error(self, name: str, timeout: float) -> ToolError:
        return ToolError(f"MCP tool {name!r} on server {self.label!r} timed out after {timeout:g} s")

    def _lost_error(self, name: str, connection: _Connection) -> ToolError:
        stderr = _stderr_note(connection.stderr_tail())
        message = f"MCP server {self.label!r} closed the connection during {name!r}{stderr}"
        return ToolError(message, hint="the next call will try to reconnect once")

    def _unavailable_error(self) -> ToolError:
        failure = self._last_failure or McpStartError("not connected")
        stderr = _stderr_note(failure.stderr_tail)
        return ToolError(
            f"MCP server {self.label!r} is unavailable (reconnect failed: {failure.reason}){stderr}"
        )


class _WatchedRead:
    """The transport's read stream as the session sees it: its end noticed, tool listings filtered.

    A result with a ``tools`` list is a ``tools/list`` answer (no other MCP result has that key).
    """

    def __init__(
        self,
        inner: Any,
        *,
        on_listing: ListingFilter | None,
        on_end: Callable[[], None],
        on_junk: Callable[[Exception], None] | None = None,
    ) -> None:
        self._inner = inner
        self._on_listing = on_listing
        self._on_end = on_end
        self._on_junk = on_junk

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        try:
            item: SessionMessage | Exception = await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._on_end()
            raise
        if isinstance(item, Exception) and self._on_junk is not None:
            self._on_junk(item)  # a line the transport could not parse; the session goes on
        message = item.message if isinstance(item, SessionMessage) else None
        listing = isinstance(message, types.JSONRPCResponse) and isinstance(message.result.get("tools"), list)
        if listing and self._on_listing is not None:
            assert isinstance(message, types.JSONRPCResponse)
            self._on_listing(message.result)
        return item

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def _describe(exc: BaseException, *, starting: bool = False) -> str:
    """One line for an exception, looking through exception groups to the first real cause."""
    while isinstance(exc, BaseExceptionGroup):
        causes = [e for e in exc.exceptions if not isinstance(e, asyncio.CancelledError)]
        exc = (causes or list(exc.exceptions))[0]
    if isinstance(exc, McpStartError):
        return exc.reason
    if isinstance(exc, MCPError):
        if exc.code == types.CONNECTION_CLOSED and starting:
            return "the server exited (or closed its output) before answering initialize"
        if exc.code == types.CONNECTION_CLOSED:
            return "the server closed the connection"
        return f"{exc.message} (error {exc.code})"
    if isinstance(exc, httpx2.HTTPStatusError):
        return f"HTTP {exc.response.status_code} from {exc.request.url}"
    if isinstance(exc, httpx2.TransportError):
        return f"cannot reach the server: {exc or type(exc).__name__}"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _junk_excerpt(exc: Exception) -> str:
    """The unparsable line (pydantic keeps it as the error's input) quoted on one line, or the error."""
    errors = getattr(exc, "errors", None)
    line: Any = None
    if callable(errors):
        with contextlib.suppress(Exception):
            line = errors()[0].get("input")
    if isinstance(line, dict | list):  # valid JSON, but no JSON-RPC message
        line = json.dumps(line, ensure_ascii=False)
    if isinstance(line, str | bytes):
        text = line if isinstance(line, str) else line.decode("utf-8", "replace")
        cut = "..." if len(text) > _JUNK_EXCERPT_CHARS else ""
        return repr(text[:_JUNK_EXCERPT_CHARS]) + cut
    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return first[:_JUNK_EXCERPT_CHARS]


def _bound(timeout: float, *, grace: float = 0.0) -> float | None:
    """A timeout for ``asyncio.timeout`` and the SDK: 0 or less means none."""
    return timeout + grace if timeout > 0 else None


def _stderr_note(tail: str, lines: int = 5) -> str:
    return f"; its stderr ended with: {' | '.join(tail.splitlines()[-lines:])}" if tail else ""
