"""The one exception tree of the runner.

Every error a user can cause is a ``RunnerError``; the CLI catches it and prints one clean
line (a traceback only with ``--debug`` / ``RUNNER_DEBUG=1``). This module imports nothing
internal.

    RunnerError                 .message, .hint
    ├── ConfigError             one problem in an agent file: .file, .line, .column, .path
    │   └── ConfigErrors        several ConfigErrors of one or more files, reported together
    ├── ToolError               a tool failed; becomes a tool result, never ends a session
    ├── ModelError              the model could not be reached or answered badly
    ├── OutputError             the final answer never matched ``output:`` (exit code 1)
    ├── LimitReached            a limit or budget ended the turn (exit code 3)
    ├── StorageError            a file the runner writes could not be written (disk full, read-only): .path
    └── Interrupted             Ctrl+C (exit code 130)
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

__all__ = [
    "ConfigError",
    "ConfigErrors",
    "Interrupted",
    "LimitReached",
    "Location",
    "ModelError",
    "OutputError",
    "RunnerError",
    "StorageError",
    "ToolError",
]


class RunnerError(Exception):
    """Base of every error the runner reports to a user."""

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message} (hint: {self.hint})"
        return self.message


@dataclass(frozen=True)
class Location:
    """Where something is in an agent file: 1-based line and column."""

    file: str
    line: int = 0
    column: int = 0

    def __str__(self) -> str:
        if self.line:
            return f"{self.file}:{self.line}:{self.column}"
        return self.file


class ConfigError(RunnerError):
    """One problem in an agent file, with its location and the dotted path of the value."""

    exit_code = 2

    def __init__(
        self,
        message: str,
        *,
        file: str = "",
        line: int = 0,
        column: int = 0,
        path: str = "",
        hint: str | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.file = file
        self.line = line
        self.column = column
        self.path = path

    @property
    def location(self) -> Location:
        return Location(self.file, self.line, self.column)

    def __str__(self) -> str:
        parts = [str(self.location)] if self.file else []
        if self.path:
            parts.append(self.path)
        parts.append(RunnerError.__str__(self))
        return ": ".join(parts)

    def as_dict(self) -> dict[str, object]:
        """The machine-readable form used by ``runner validate --json``."""
        return {
            "file": self.file,
            "line": self.line,
            "column": self.column,
            "path": self.path,
            "message": self.message,
            "hint": self.hint,
        }


class ConfigErrors(ConfigError):
    """Several problems found in one pass; iterating yields each ``ConfigError``."""

    def __init__(self, errors: Iterable[ConfigError]) -> None:
        self.errors = list(errors)
        first = self.errors[0] if self.errors else ConfigError("invalid configuration")
        super().__init__(
            first.message,
            file=first.file,
            line=first.line,
            column=first.column,
            path=first.path,
            hint=first.hint,
        )

    def __iter__(self) -> Iterator[ConfigError]:
        return iter(self.errors)

    def __str__(self) -> str:
        return "\n".join(ConfigError.__str__(e) for e in self.errors)


class ToolError(RunnerError):
    """A tool call failed; the message is what the model reads as the tool result."""


class ModelError(RunnerError):
    """The model could not be reached, or answered with something unusable."""

    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        status: int | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.status = status  # the HTTP status the server sent; None when there was none
        self.retryable = retryable
        self.retry_after = retry_after  # seconds the server asked to wait (``Retry-After``)

    @property
    def transient(self) -> bool:
        """Whether the same request may pass later (429, 5xx, network, timeout)."""
        return self.retryable or self.status == 429 or (self.status is not None and self.status >= 500)


class OutputError(RunnerError):
    """The model's final answer did not match the agent's ``output:`` schema, after every retry."""

    def __init__(self, message: str, *, problems: Iterable[str] = (), hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.problems = list(problems)


class LimitReached(RunnerError):
    """A limit or budget of section 9 ended the turn."""

    exit_code = 3

    def __init__(self, message: str, *, limit: str, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.limit = limit


class Interrupted(RunnerError):
    """The user pressed Ctrl+C."""

    exit_code = 130


class StorageError(RunnerError):
    """A file the runner writes (a transcript, a batch's output) could not be written: a full disk,
    a read-only folder, no permission. The message names the path; nothing half-written is left."""

    def __init__(self, message: str, *, path: str = "", hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.path = path
