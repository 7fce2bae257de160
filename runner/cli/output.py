"""Rendering loop events: the answer on stdout, progress on stderr (rich on a terminal), or JSON lines."""

from __future__ import annotations

import contextlib
import json
import sys
import time
from typing import Any, TextIO

from runner.cli.guard import secrets
from runner.models.base import Usage
from runner.session.events import (
    AnswerDraft,
    AssistantMessage,
    LoopEvent,
    Note,
    OutputReady,
    ReasoningChunk,
    StepStarted,
    TextChunk,
    ToolFinished,
    ToolStarted,
    TurnEnded,
    UsageUpdate,
)
from runner.text import one_line

__all__ = ["TOOL_QUIET_S", "ConsoleOutput", "JsonOutput", "usage_line"]

#: A tool call shows its live ``running NAME 2.1 s`` line once it has run this long (a fast one: none).
TOOL_QUIET_S = 1.0


def _short(text: str) -> str:
    return one_line(text, 160)


def usage_line(usage: Usage) -> str:
    """One line summing a session's usage."""
    line = (
        f"usage: {usage.prompt_tokens} prompt + {usage.completion_tokens} completion = "
        f"{usage.total_tokens} tokens"
    )
    if usage.cost_usd is not None:
        line += f", ${usage.cost_usd:.6f}"
    return line


class ConsoleOutput:
    """Human output: streamed text to stdout, steps/tools/notes to stderr."""

    def __init__(
        self,
        *,
        stdout: TextIO | None = None,
        stderr: TextIO | None = None,
        thinking: bool = True,
        color: bool | None = None,
    ) -> None:
        self.out = stdout or sys.stdout
        self.err = stderr or sys.stderr
        self.thinking = thinking
        self.color = self.err.isatty() if color is None else color
        self._console: Any = None
        self._open_line = False
        self._in_reasoning = False
        self.usage = Usage()
        self._used = False  # whether any model call reported its usage
        self._spinner: Any = None  # on a terminal: what the run is waiting for, with the time spent
        self._model_since: float | None = None  # when the step began waiting for the model
        self._running: dict[str, tuple[str, float]] = {}  # call id -> tool name, start, while it runs
        self._started: set[str] = set()  # calls whose ToolStarted was shown
        #: The chat's prompt while it waits for a line: a note printed meanwhile redraws it.
        self.reading: str | None = None
        self._sent: dict[str, str] = {}  # the raw arguments of each call, as the model sent them

    def _rich(self) -> Any:
        if self._console is None:
            from rich.console import Console

            self._console = Console(file=self.err, highlight=False, soft_wrap=True)
        return self._console

    def _wait(self) -> None:
        """On a terminal, a spinner with the elapsed time until the next output (off one: nothing).

        What it shows: the oldest tool call still running, once it ran ``TOOL_QUIET_S`` (a tool
        runs on after the reply that called it streamed to its end); else the model's answer.
        """
        if self._spinner is not None or not (self.color and self.err.isatty()):
            return
        if self._running:
            name, since = min(self._running.values(), key=lambda running: running[1])
            more = len(self._running) - 1
            label = f"running {name}" + (f" (and {more} more)" if more else "")
            self._spinner = _Waiting(self._rich(), label, since=since, quiet_s=TOOL_QUIET_S)
        elif self._model_since is not None:
            self._spinner = _Waiting(self._rich(), "waiting for the model", since=self._model_since)

    def _stop_waiting(self) -> None:
        if self._spinner is not None:
            self._spinner.stop()
            self._spinner = None

    def _line(self, text: str, style: str = "") -> None:
        self._stop_waiting()
        if self._in_reasoning:  # the model's thinking ends its own line (stderr off a terminal too)
            self._in_reasoning = False
            self.err.write("\n")
        if self._open_line:
            self.out.write("\n")
            self.out.flush()
            self._open_line = False
        reading = self.reading
        if reading is not None:
            self.err.write("\n")  # off the half-typed line
        if self.color:
            self._rich().print(text, style=style or None, markup=False)
        else:
            self.err.write(text + "\n")
            self.err.flush()
        if reading is not None:
            self._redraw(reading)

    def _redraw(self, prompt: str) -> None:
        """The chat's prompt again, with what the user has typed so far."""
        typed = ""
        with contextlib.suppress(ImportError):
            import readline

            typed = readline.get_line_buffer()
        stream = self.out if self.out.isatty() else self.err
        stream.write(prompt + typed)
        stream.flush()

    def __call__(self, event: LoopEvent) -> None:
        if isinstance(event, AnswerDraft):
            return  # a structured answer is printed once it matched its schema (OutputReady)
        if not isinstance(event, UsageUpdate):
            self._stop_waiting()
        if not isinstance(event, StepStarted | ToolFinished | Note | UsageUpdate):
            self._model_since = None  # the model answered (text, reasoning, a call, the message)
        self._show(event)
        if isinstance(event, StepStarted | ToolStarted | ToolFinished | AssistantMessage | Note):
            self._wait()  # quiet until the next event: show what the run waits for

    def _show(self, event: LoopEvent) -> None:
        if isinstance(event, OutputReady):
            self._print_output(event.value)
        elif isinstance(event, TextChunk):
            if self._in_reasoning:
                self._in_reasoning = False
                self.err.write("\n")
            self.out.write(event.text)
            self.out.flush()
            self._open_line = not event.text.endswith("\n")
        elif isinstance(event, ReasoningChunk):
            if self.thinking:
                self._in_reasoning = True
                self.err.write(f"\x1b[2m{event.text}\x1b[0m" if self.color else event.text)
                self.err.flush()
        elif isinstance(event, StepStarted):
            self._line(f"· turn {event.turn} step {event.step}", "dim")
            self._model_since = time.monotonic()
        elif isinstance(event, AssistantMessage):
            for call in event.message.get("tool_calls") or ():
                self._sent[call["id"]] = str(call["function"].get("arguments") or "")
        elif isinstance(event, ToolStarted):
            self._started.add(event.call_id)
            args = json.dumps(event.arguments, ensure_ascii=False)
            self._line(f"→ {event.name} {_short(args)}", "cyan")
            self._running[event.call_id] = (event.name, time.monotonic())
        elif isinstance(event, ToolFinished):
            r = event.result
            if r.call_id not in self._started:  # refused before it ran: show what the model sent
                sent = json.dumps(r.arguments, ensure_ascii=False) if r.arguments is not None else None
                self._line(f"→ {r.name} {_short(sent or self._sent.get(r.call_id, ''))}", "cyan")
            self._started.discard(r.call_id)
            self._running.pop(r.call_id, None)
            mark = "✗" if r.is_error else "←"
            self._line(
                f"{mark} {r.name} ({r.duration_s * 1000:.0f} ms) {_short(r.content)}",
                "red" if r.is_error else "green",
            )
        elif isinstance(event, Note):
            prefix = {"info": "note", "warning": "warning", "error": "error"}[event.level]
            self._line(
                f"{prefix}: {event.text}", {"info": "dim", "warning": "yellow", "error": "red"}[event.level]
            )
        elif isinstance(event, UsageUpdate):
            self.usage = event.session
            self._used = True
        elif isinstance(event, TurnEnded):
            self._running.clear()
            if self._open_line:
                self.out.write("\n")
                self.out.flush()
                self._open_line = False

    def _print_output(self, value: Any) -> None:
        """The structured answer as JSON on stdout: indented on a terminal, one line otherwise."""
        if self._in_reasoning:
            self._in_reasoning = False
            self.err.write("\n")
        if self._open_line:
            self.out.write("\n")
            self._open_line = False
        if self.out.isatty():
            text = json.dumps(value, ensure_ascii=False, indent=2)
        else:  # compact, for a pipe: one line without spaces, as tool results are sent
            text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        self.out.write(text + "\n")
        self.out.flush()

    def finish(self) -> None:
        """Print the session's usage on stderr (nothing when no model call reported any)."""
        self._stop_waiting()
        if self._used:
            self._line(usage_line(self.usage), "dim")


class _Waiting:
    """A rich spinner on stderr: ``label 3.2 s`` (the time since ``since``), refreshed until ``stop``.

    Nothing shows until ``quiet_s`` have passed since ``since``.
    """

    def __init__(self, console: Any, label: str, *, since: float, quiet_s: float = 0.0) -> None:
        from rich.console import Group
        from rich.live import Live
        from rich.spinner import Spinner

        self._label, self._since, self._quiet_s = label, since, quiet_s
        self._spinner = Spinner("dots", text=label, style="dim")
        self._nothing = Group()
        self._live = Live(self, console=console, refresh_per_second=8, transient=True)
        self._live.start()

    def __rich__(self) -> Any:
        elapsed = time.monotonic() - self._since
        if elapsed < self._quiet_s:
            return self._nothing
        self._spinner.update(text=f"{self._label} {elapsed:.1f} s")
        return self._spinner

    def stop(self) -> None:
        self._live.stop()


class JsonOutput:
    """``--json``: one JSON object per line on stdout (message, tool_call, tool_result, output, usage,
    end...)."""

    def __init__(self, *, stdout: TextIO | None = None, thinking: bool = True) -> None:
        self.out = stdout or sys.stdout
        self.thinking = thinking
        self.usage = Usage()
        self._reasoning = ""  # the end of a reasoning chunk that could begin a secret (cli.guard)
        self.session_id: str | None = None

    def _emit(self, record: dict[str, Any]) -> None:
        self.out.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
        self.out.flush()

    def _emit_reasoning(self, text: str, *, final: bool = False) -> None:
        """Reasoning comes in pieces, one record each: a secret split between two is redacted too."""
        text = secrets.redactor(self._reasoning + text)
        keep = 0 if final else secrets.held_back(text)
        self._reasoning = text[len(text) - keep :] if keep else ""
        if text[: len(text) - keep]:
            self._emit({"type": "reasoning", "text": text[: len(text) - keep]})

    def __call__(self, event: LoopEvent) -> None:
        if isinstance(event, ReasoningChunk):
            if self.thinking:
                self._emit_reasoning(event.text)
            return
        if self._reasoning:
            self._emit_reasoning("", final=True)
        if isinstance(event, AssistantMessage):
            self._emit({"type": "message", "message": event.message})
        elif isinstance(event, ToolStarted):
            self._emit(
                {"type": "tool_call", "id": event.call_id, "name": event.name, "arguments": event.arguments}
            )
        elif isinstance(event, ToolFinished):
            r = event.result
            self._emit(
                {
                    "type": "tool_result",
                    "id": r.call_id,
                    "name": r.name,
                    "content": r.content,
                    "is_error": r.is_error,
                    "duration_s": round(r.duration_s, 4),
                }
            )
        elif isinstance(event, UsageUpdate):
            self.usage = event.session
            self._emit({"type": "usage", "call": _usage(event.call), "session": _usage(event.session)})
        elif isinstance(event, Note):
            self._emit({"type": "note", "level": event.level, "text": event.text})
        elif isinstance(event, OutputReady):
            self._emit({"type": "output", "output": event.value})
        elif isinstance(event, TurnEnded):
            self._emit({"type": "turn_end", "output": event.output, "reason": event.reason})

    def session(self, session_id: str, *, resumed: bool = False) -> None:
        """The first record: the session's id (``runner resume ID`` goes on with it)."""
        self.session_id = session_id
        self._emit({"type": "session", "session_id": session_id, "resumed": resumed})

    def error(self, error: BaseException, *, session_id: str | None = None) -> None:
        """An ``error`` record: what went wrong, and the session to resume."""
        record: dict[str, Any] = {"type": "error", "message": str(error)}
        if session_id is not None:
            record["session_id"] = session_id
        self._emit(record)

    def finish(self) -> None:
        """The closing ``end`` record."""
        record: dict[str, Any] = {"type": "end", "usage": _usage(self.usage)}
        if self.session_id is not None:
            record["session_id"] = self.session_id
        self._emit(record)


def _usage(usage: Usage) -> dict[str, Any]:
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
        "cost_usd": usage.cost_usd,
    }
