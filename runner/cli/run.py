"""``runner run`` / ``runner resume``: drive a session from the terminal.

The session lives in an asyncio loop on a background thread (it owns MCP sessions and HTTP clients
for its whole life); the main thread reads the user's input (with readline) and turns Ctrl+C into
``session.interrupt()`` during a step, or into clearing the queue at the prompt.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from runner.agentfile.config import AgentConfig
from runner.cli.common import read_line
from runner.cli.output import ConsoleOutput, JsonOutput
from runner.errors import Interrupted, RunnerError
from runner.runtime.settings import RuntimeSettings
from runner.session import RunOptions, RunResult, Session
from runner.session.gate import ConfirmAnswer
from runner.store.transcript import Transcript
from runner.tools.base import Tool

__all__ = ["RunRequest", "SessionThread", "execute", "make_confirm", "run_inputs", "wait_interruptibly"]

T = TypeVar("T")


@dataclass
class RunRequest:
    """Everything ``runner run`` was asked to do."""

    config: AgentConfig
    prompts: list[str] = field(default_factory=list)
    interactive: bool = False
    options: RunOptions = field(default_factory=RunOptions)
    settings: RuntimeSettings = field(default_factory=RuntimeSettings)
    json_output: bool = False
    thinking: bool = True
    resume: Transcript | None = None
    watch: bool = False


class SessionThread:
    """Runs one session inside an event loop on a background thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run_loop, name="runner-session", daemon=True)
        self.inbox: asyncio.Queue[
            tuple[Callable[[Session], Awaitable[Any]], concurrent.futures.Future[Any]] | None
        ]
        self.session: Session | None = None

    def _run_loop(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def start(self, request: RunRequest, sink: Any) -> concurrent.futures.Future[None]:
        """Open the session in the loop thread; returns the future of its whole life."""
        self.thread.start()
        ready: concurrent.futures.Future[Session] = concurrent.futures.Future()

        async def life() -> None:
            from runner.session.events import Note
            from runner.session.opening import runtime_host

            self.inbox = asyncio.Queue()
            host = runtime_host(
                request.config,
                request.settings,
                on_progress=lambda label, text: sink(Note(f"{label}: {text}")),
                warn=lambda text: sink(Note(text, "warning")),
            )
            try:
                session = await Session.open(host, sink=sink, options=request.options, resume=request.resume)
                try:
                    self.session = session
                    await self._serve(session, ready, watch=request.watch)
                finally:
                    await session.close()
            except BaseException as exc:
                if not ready.done():
                    ready.set_exception(exc)
                raise
            finally:
                await host.aclose()

        lifetime = asyncio.run_coroutine_threadsafe(life(), self.loop)
        wait_interruptibly(ready, on_interrupt=lambda: None)
        return lifetime

    async def _serve(
        self, session: Session, ready: concurrent.futures.Future[Session], *, watch: bool
    ) -> None:
        """Run what the main thread sends (``call``) until it sends None; ``--watch`` meanwhile."""
        stop = asyncio.Event()
        watcher = None
        if watch:
            from runner.watch import watch_session

            watcher = asyncio.create_task(watch_session(session, stop=stop))
        ready.set_result(session)
        try:
            while (item := await self.inbox.get()) is not None:
                fn, future = item
                try:
                    future.set_result(await fn(session))
                except BaseException as exc:  # handed to the main thread
                    future.set_exception(exc)
                    if not isinstance(exc, Exception):
                        raise
        finally:
            stop.set()
            if watcher is not None:
                await watcher

    def call(self, fn: Callable[[Session], Awaitable[T]]) -> T:
        """Run ``fn(session)`` in the loop; Ctrl+C meanwhile interrupts the running step."""
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        self.loop.call_soon_threadsafe(self.inbox.put_nowait, (fn, future))
        return wait_interruptibly(future, on_interrupt=self.interrupt)

    def interrupt(self) -> None:
        """Ask the session to stop its step (thread-safe)."""
        if self.session is not None:
            self.loop.call_soon_threadsafe(self.session.interrupt)

    def stop(self, lifetime: concurrent.futures.Future[None]) -> None:
        """Close the session (session_end hooks, connections) and the loop."""
        if lifetime.done():
            lifetime.result()
        else:
            self.loop.call_soon_threadsafe(self.inbox.put_nowait, None)
            wait_interruptibly(lifetime, on_interrupt=lambda: None)
        asyncio.run_coroutine_threadsafe(self.loop.shutdown_asyncgens(), self.loop).result(timeout=5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)


def wait_interruptibly(future: concurrent.futures.Future[T], *, on_interrupt: Callable[[], None]) -> T:
    """Wait for ``future``; each Ctrl+C calls ``on_interrupt`` and keeps waiting."""
    while True:
        try:
            return future.result()
        except KeyboardInterrupt:
            on_interrupt()


def _ask(prompt: str) -> str:
    try:
        return read_line(prompt)
    except EOFError:
        return "n"


def make_confirm(
    thread_safe_input: Callable[[str], str],
) -> Callable[[Tool, dict[str, Any]], Awaitable[ConfirmAnswer]]:
    """An interactive confirmation: y / n / always."""

    async def confirm(tool: Tool, arguments: dict[str, Any]) -> ConfirmAnswer:
        import json

        text = f"run {tool.name} {json.dumps(arguments, ensure_ascii=False)[:300]}? [y/n/a(lways)] "
        while True:
            answer = (await asyncio.to_thread(thread_safe_input, text)).strip().lower()
            if answer in ("y", "yes"):
                return "yes"
            if answer in ("n", "no", ""):
                return "no"
            if answer in ("a", "always"):
                return "always"

    return confirm


def execute(request: RunRequest) -> int:
    """Run the session as asked; the exit code (0, 3 limit, 130 interrupted)."""
    output: ConsoleOutput | JsonOutput
    if request.json_output:
        output = JsonOutput(thinking=request.thinking)
    else:
        output = ConsoleOutput(thinking=request.thinking)
    if request.interactive and request.options.confirm is None:
        request.options.confirm = make_confirm(_ask)
    worker = SessionThread()
    lifetime = worker.start(request, output)
    if isinstance(output, JsonOutput) and worker.session is not None:
        output.session(worker.session.session_id, resumed=request.resume is not None)
    code = 0
    try:
        result = run_inputs(worker, list(request.prompts))  # session_start, a resumed step, the -p prompts
        code = result.exit_code(interactive=request.interactive)
        if request.interactive and result.ended is None:
            from runner.cli.interactive import Repl

            Repl(worker, output).loop()
    except RunnerError as exc:
        resume_id = _resumable(worker, output, exc)
        if resume_id is None:
            raise
        failure: tuple[RunnerError, str] | None = (exc, resume_id)
    else:
        failure = None
    finally:
        worker.stop(lifetime)
        output.finish()
    if failure is not None:  # reported after the session closed, with how to go on from it
        return _failed(*failure)
    if code == 130:
        raise Interrupted("interrupted")
    return code


def _resumable(worker: SessionThread, output: ConsoleOutput | JsonOutput, error: RunnerError) -> str | None:
    """The id of a session a failed run kept (an ``error`` event with it under ``--json``)."""
    session = worker.session
    if session is None or session.conversation.transcript is None:
        return None
    if isinstance(output, JsonOutput):
        output.error(error, session_id=session.session_id)
    return session.session_id


def _failed(error: RunnerError, session_id: str) -> int:
    """Report a failed run and how to go on from where it stopped; its exit code."""
    import typer

    from runner.cli.common import debug_enabled, echo_error

    if debug_enabled():
        raise error
    echo_error(error)
    typer.echo(f"the session is kept: runner resume {session_id}", err=True)
    return error.exit_code


def run_inputs(worker: SessionThread, inputs: list[str]) -> RunResult:
    """One ``Session.run`` in the session's loop (the REPL's lines)."""
    return worker.call(lambda s: s.run(inputs))
