"""``runner run -i``: the interactive prompt and its slash commands (SPEC section 10)."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from runner.errors import RunnerError

if TYPE_CHECKING:
    from runner.cli.output import ConsoleOutput, JsonOutput
    from runner.cli.run import SessionThread
    from runner.loop.session import Session

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


class Repl:
    """Reads lines; a line starting with / is a command and never reaches the model."""

    def __init__(
        self,
        worker: SessionThread,
        output: ConsoleOutput | JsonOutput,
        *,
        read: Callable[[str], str] = input,
        write: Callable[[str], Any] | None = None,
    ) -> None:
        self.worker = worker
        self.output = output
        self.read = read
        self.write = write or (lambda text: sys.stderr.write(text + "\n"))
        with contextlib.suppress(ImportError):
            import readline  # noqa: F401  (line editing and history for input())

    @property
    def session(self) -> Session:
        assert self.worker.session is not None
        return self.worker.session

    def loop(self) -> None:
        """Until /exit or end of input."""
        from runner.cli.run import _drain

        while True:
            try:
                line = self.read(f"{self.session.spec.name}> ")
            except EOFError:
                self.write("")
                return
            except KeyboardInterrupt:
                dropped = len(self.session.queue)
                self.session.queue.clear()
                self.write(f"^C (cleared {dropped} queued message(s); /exit to leave)")
                continue
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
            self.session.enqueue(text)
            try:
                _drain(self.worker, interactive=True)
            except RunnerError as exc:  # the model failed after its retries; the session goes on
                self.write(f"error: {exc}")

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
            for tool in session.registry.tools():
                self.write(f"{tool.name:<28} {tool.source_kind}:{tool.source_id:<16} {tool.description[:70]}")
            if not len(session.registry):
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
                spec = load_agent(
                    s.spec.path, agent=s.spec.name if s.spec.team else None, extra_vars=s.options.variables
                )
                prepared = await s.reloader.prepare(s, spec)
                s.schedule_reload(prepared)
                return str(prepared.changes)

            changes = self.worker.call(reload)  # a ConfigError is shown and the old config stays
            self.write(f"reloaded: {changes} (from the next turn on)")
        elif name == "undo":
            removed = session.undo()
            self.write(f"dropped {removed} message(s)" if removed else "nothing to undo")
        elif name == "model":
            if not rest:
                self.write(f"model: {session.model.name}")
                return None
            from dataclasses import replace

            from runner.agentfile.config import ModelConfig
            from runner.models.factory import make_model

            spec = replace(session.spec.model, id=rest) if session.spec.model else ModelConfig(id=rest)

            async def switch(s: Session) -> None:
                old = s.model
                s.set_model(make_model(spec))
                await old.aclose()

            self.worker.call(switch)
            self.write(f"model: {rest}")
        elif name == "vars":
            from runner.cli.main import parse_vars

            values = parse_vars(rest.split()) if rest else {}
            if values:
                session.set_variables(values)
            self.write(json.dumps(session.renderer.variables, ensure_ascii=False, default=str))
        else:
            self.write(f"unknown command /{name}; /help lists them")
        return None
