"""``runner run -i``: the interactive prompt and its slash commands (SPEC section 10)."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from runner.cli.common import parse_vars, read_line
from runner.cli.output import ConsoleOutput
from runner.errors import RunnerError
from runner.text import counted

if TYPE_CHECKING:
    from runner.cli.output import JsonOutput
    from runner.session import Session

__all__ = ["HELP", "Repl", "Worker"]

T = TypeVar("T")

HELP = """\
/exit            leave (Ctrl+D too)
/tools           the tools this agent can call
/history         the conversation so far
/undo            drop the last turn
/reload          read the agent's files again (as --watch does on every save)
/model ID        switch the model (any litellm model id)
/vars K=V ...    set template variables
/help            this text
Ctrl+C stops the running step; at the prompt it clears queued messages."""


class Worker(Protocol):
    """The thread a session runs on (``run.SessionThread``): the REPL hands it work, never runs it."""

    @property
    def session(self) -> Session | None: ...
    def call(self, fn: Callable[[Session], Awaitable[T]]) -> T: ...


class Repl:
    """Reads lines; a line starting with / is a command and never reaches the model."""

    def __init__(
        self,
        worker: Worker,
        output: ConsoleOutput | JsonOutput,
        *,
        read: Callable[[str], str] | None = None,
        write: Callable[[str], Any] | None = None,
    ) -> None:
        self.worker = worker
        self.output = output
        self.read = read or read_line
        self.write = write or (lambda text: sys.stderr.write(text + "\n"))
        with contextlib.suppress(ImportError):
            import readline  # noqa: F401  (line editing and history for input())

    @property
    def session(self) -> Session:
        assert self.worker.session is not None
        return self.worker.session

    def do(self, fn: Callable[[Session], T]) -> T:
        """Run ``fn(session)`` in the session's own thread (the session is never changed from here)."""

        async def call(session: Session) -> T:
            return fn(session)

        return self.worker.call(call)

    def loop(self) -> None:
        """Until /exit, end of input, or a hook that ends the session."""
        self.write(
            f"chatting with {self.session.config.name} ({self.session.model.name}): "
            "/help lists the commands, /exit or Ctrl+D leaves"
        )
        while True:
            prompt = f"{self.session.config.name}> "
            if isinstance(self.output, ConsoleOutput):
                self.output.reading = prompt  # a note printed meanwhile (a reload) redraws it
            try:
                line = self.read(prompt)
            except EOFError:
                self.write("")
                return
            except KeyboardInterrupt:
                dropped = self.do(lambda s: s.clear_queue())
                self.write(f"^C (cleared {counted(dropped, 'queued message')}; /exit to leave)")
                continue
            if isinstance(self.output, ConsoleOutput):
                self.output.reading = None
            text = line.strip()
            if not text:
                continue
            if text.startswith("/"):
                try:
                    if self.command(text) == "exit":
                        return
                except RunnerError as exc:
                    self.write(f"error: {exc}")
                continue
            try:
                self.say(text)
            except RunnerError as exc:  # the model failed after its retries; the session goes on
                self.write(f"error: {exc}")
            if self.session.ended is not None:
                return

    def say(self, text: str) -> None:
        """One line to the model: a ``Session.run`` in the session's own loop."""
        self.worker.call(lambda s: s.run([text]))

    def command(self, text: str) -> str | None:
        """Run one slash command; "exit" to leave."""
        name, _, rest = text[1:].partition(" ")
        rest = rest.strip()
        session = self.session
        if name in ("exit", "quit"):
            return "exit"
        if name == "help":
            self.write(HELP)
        elif name == "tools":
            registry = session.runtime.registry
            for tool in registry.tools():
                self.write(f"{tool.name:<28} {tool.source_kind}:{tool.source_id:<16} {tool.description[:70]}")
            if not len(registry):
                self.write("(no tools)")
        elif name == "history":
            for message in session.history:
                content = message.get("content") or ""
                calls = [c["function"]["name"] for c in message.get("tool_calls") or ()]
                suffix = f" -> {', '.join(calls)}" if calls else ""
                self.write(f"[{message['role']}] {' '.join(str(content).split())[:100]}{suffix}")
        elif name == "reload":
            from runner.agentfile import load_agent

            async def reload(s: Session) -> str:
                config = load_agent(
                    s.config.path,
                    agent=s.config.name if s.config.team else None,
                    extra_vars=s.options.variables,
                )
                from runner.cli.guard import note_secrets

                note_secrets(config)
                return await s.reload(config)

            changes = self.worker.call(reload)  # a ConfigError is shown and the old config stays
            self.write(f"reloaded: {changes} (from the next turn on)")
        elif name == "undo":
            removed = self.do(lambda s: s.undo())
            self.write(f"dropped {counted(removed, 'message')}" if removed else "nothing to undo")
        elif name == "model":
            if not rest:
                self.write(f"model: {session.model.name}")
                return None
            self.worker.call(lambda s: s.switch_model(rest))
            self.write(f"model: {rest}")
        elif name == "vars":
            values = parse_vars(rest.split()) if rest else {}
            if values:
                self.do(lambda s: s.set_variables(values))
            self.write(json.dumps(session.variables, ensure_ascii=False, default=str))
        else:
            self.write(f"unknown command /{name}; /help lists them")
        return None
