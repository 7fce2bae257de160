"""Jinja templates of an agent: sandboxed, ``StrictUndefined``, errors located in the agent file.

Every template sees the same names: ``input`` (the user input; in the system prompt, the
session's first input or ""), ``vars`` (all variables, also available by their own names),
``tools`` (a list of {name, description, parameters}), ``agent`` (the agent's name) and
``now(fmt)`` (the local time, strftime format, default ISO 8601).
"""

from __future__ import annotations

import datetime as _dt
import difflib
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import jinja2
from jinja2 import meta, nodes

from runner.agentfile.config import TemplateSource
from runner.agentfile.sandbox import (
    LIMITS,
    BoundedLoader,
    BoundedSandbox,
    InvalidTemplateName,
    TemplateLimitError,
    TemplateLimits,
    metered,
)
from runner.errors import ConfigError

__all__ = [
    "BUILTIN_NAMES",
    "HOOK_EVENT_NAMES",
    "TemplateEngine",
    "format_time",
    "frozen_clock",
    "now",
    "read_template_file",
    "shown_path",
    "template_context",
]

BUILTIN_NAMES = frozenset({"input", "vars", "tools", "agent", "now"})
#: The fields of a hook event (SPEC section 6), which a ``message:`` hook's template also sees.
HOOK_EVENT_NAMES = frozenset(
    {"event", "session_id", "turn", "step", "messages", "message", "tool_call", "output", "is_error"}
)


def now(fmt: str | None = None) -> str:
    """The current local time, formatted with ``strftime`` (ISO 8601 without a format)."""
    return format_time(_dt.datetime.now().astimezone(), fmt)


#: ``now(fmt)`` refuses longer formats (``%c`` alone writes 24 characters: a format could multiply text).
MAX_TIME_FORMAT = 200


def format_time(moment: _dt.datetime, fmt: str | None = None) -> str:
    """``moment`` as ``now(fmt)`` would show it."""
    if fmt and len(fmt) > MAX_TIME_FORMAT:
        raise ValueError(f"now(): the format has {len(fmt):,} characters (the limit is {MAX_TIME_FORMAT})")
    return moment.strftime(fmt) if fmt else moment.isoformat(timespec="seconds")


def frozen_clock(moment: _dt.datetime) -> Callable[..., str]:
    """A ``now(fmt)`` that always answers ``moment`` (replays render the recording's date)."""

    def frozen_now(fmt: str | None = None) -> str:
        return format_time(moment, fmt)

    return frozen_now


def shown_path(text: str) -> str:
    """A path as an error message shows it: quoted when it has control characters or is long."""
    if text.isprintable() and len(text) <= 120:
        return text
    return repr(text[:117]) + ("..." if len(text) > 117 else "")


def read_template_file(file: Path, *, shown: str | None = None, limits: TemplateLimits = LIMITS) -> str:
    """The text of a template file, refused before reading when it is over the source limit."""
    name = shown_path(shown or file.name)
    try:
        if file.is_dir():
            raise ConfigError(f"template file {name} is a directory")
        if not file.is_file():
            raise ConfigError(f"template file not found: {name}", hint=f"looked for {file}")
        size = file.stat().st_size
        if size > limits.source_chars:
            raise ConfigError(
                f"template file {name} is too large: {size:,} bytes (the limit is {limits.source_chars:,})",
                hint="a prompt that long does not fit a model's context; split it or trim it",
            )
        with file.open("rb") as handle:
            raw = handle.read(limits.source_chars + 1)
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"cannot read template file {name}: not UTF-8 text ({exc.reason} at byte {exc.start})"
        ) from None
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(f"cannot read template file {name}: {reason}") from None


class TemplateEngine:
    """Compiles and renders the templates of one agent directory (cached per source), within limits."""

    def __init__(self, directory: Path, *, limits: TemplateLimits = LIMITS) -> None:
        self.env = BoundedSandbox(
            limits=limits,
            undefined=jinja2.StrictUndefined,
            loader=BoundedLoader(str(directory), limits=limits),
            autoescape=False,
            keep_trailing_newline=True,
        )
        self.env.globals["now"] = now
        self._compiled: dict[TemplateSource, jinja2.Template] = {}
        self._parsed: dict[TemplateSource, nodes.Template] = {}

    def _error(self, source: TemplateSource, message: str, lineno: int | None) -> ConfigError:
        line = (source.line + (lineno or 1) - 1) if lineno else source.line
        return ConfigError(f"template: {message}", file=source.name, line=line, column=1 if lineno else 0)

    def _compile_error(self, source: TemplateSource, exc: Exception) -> ConfigError:
        """A ``ConfigError`` for what went wrong while parsing or compiling ``source``."""
        if isinstance(exc, TemplateLimitError):
            return self._error(source, str(exc.message), exc.lineno)
        if isinstance(exc, jinja2.TemplateSyntaxError):
            return self._error(source, exc.message or "syntax error", exc.lineno)
        if isinstance(exc, RecursionError):
            return self._error(source, "the template nests too deeply (brackets, tags or expressions)", None)
        return self._error(source, f"{type(exc).__name__}: {exc}", None)

    def parse(self, source: TemplateSource) -> nodes.Template:
        """The template's syntax tree (cached); a syntax error becomes a located ``ConfigError``."""
        tree = self._parsed.get(source)
        if tree is None:
            try:
                with metered(self.env.limits):
                    tree = self.env.parse(source.text, name=source.name)
            except (jinja2.TemplateSyntaxError, TemplateLimitError, RecursionError, MemoryError) as exc:
                raise self._compile_error(source, exc) from None
            self._parsed[source] = tree
        return tree

    def compile(self, source: TemplateSource) -> jinja2.Template:
        """The compiled template (cached)."""
        template = self._compiled.get(source)
        if template is None:
            try:
                with metered(self.env.limits):
                    template = self.env.from_string(source.text)
            except (jinja2.TemplateSyntaxError, TemplateLimitError, RecursionError, MemoryError) as exc:
                raise self._compile_error(source, exc) from None
            template.filename = source.name
            self._compiled[source] = template
        return template

    def undeclared(self, source: TemplateSource) -> set[str]:
        """Names the template reads that it does not define itself."""
        tree = self.parse(source)
        try:
            with metered(self.env.limits):
                return set(meta.find_undeclared_variables(tree))
        except (jinja2.TemplateSyntaxError, TemplateLimitError, RecursionError, MemoryError) as exc:
            raise self._compile_error(source, exc) from None

    def static_errors(self, source: TemplateSource) -> list[ConfigError]:
        """What is wrong before any render: unknown filters and tests, constants over a limit."""
        tree = self.parse(source)
        errors = []
        for kind, node_type, known in (
            ("filter", nodes.Filter, self.env.filters),
            ("test", nodes.Test, self.env.tests),
        ):
            for node in tree.find_all(node_type):
                if node.name not in known:
                    close = difflib.get_close_matches(node.name, list(known), n=1, cutoff=0.6)
                    message = f"unknown {kind} '{node.name}'" + (
                        f" (did you mean '{close[0]}'?)" if close else ""
                    )
                    errors.append(self._error(source, message, node.lineno))
        from runner.agentfile.template_static import constant_limit_errors  # validate-time only

        for message, lineno in constant_limit_errors(self.env, tree):
            errors.append(self._error(source, message, lineno))
        return errors

    def first_uses(self, source: TemplateSource, names: set[str]) -> dict[str, int]:
        """For each of ``names``, the template line (1-based) where it is first read."""
        lines: dict[str, int] = {}
        for node in self.parse(source).find_all(nodes.Name):
            if node.ctx == "load" and node.name in names:
                lines[node.name] = min(lines.get(node.name, node.lineno), node.lineno)
        return lines

    def missing_includes(self, source: TemplateSource) -> list[str]:
        """Why each template named by ``include``/``import``/``extends`` cannot be loaded."""
        problems = []
        for name in meta.find_referenced_templates(self.parse(source)):
            if name is None:
                continue  # computed at render time
            try:
                self.env.loader.get_source(self.env, name)  # type: ignore[union-attr]
            except InvalidTemplateName as exc:
                problems.append(f"template includes {exc.message}")
            except jinja2.TemplateNotFound:
                problems.append(f"template includes '{name}', which does not exist")
            except TemplateLimitError as exc:
                problems.append(f"template includes '{name}': {exc.message}")
        return problems

    def render(self, source: TemplateSource, context: Mapping[str, Any]) -> str:
        """Render with ``context``; undefined names, limits and failures become ``ConfigError``."""
        template = self.compile(source)
        try:
            return template.render(context)
        except jinja2.UndefinedError as exc:
            raise self._error(source, f"undefined variable: {exc.message}", _template_line(exc)) from None
        except jinja2.TemplateError as exc:
            raise self._error(source, exc.message or type(exc).__name__, _template_line(exc)) from None
        except RecursionError as exc:
            message = "calls or values nest too deeply (a macro that calls itself?)"
            raise self._error(source, message, _template_line(exc)) from None
        except Exception as exc:  # a filter or call inside the template failed
            raise self._error(source, f"{type(exc).__name__}: {exc}", _template_line(exc)) from None


def _template_line(exc: BaseException) -> int | None:
    """The template line of the innermost frame that belongs to a Jinja template."""
    line = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.name in ("top-level template code", "template") or frame.name.startswith("block "):
            line = frame.lineno
    return line


def template_context(
    *,
    input: str,
    variables: Mapping[str, Any],
    tools: list[dict[str, Any]] | None = None,
    agent: str = "",
    clock: Callable[..., str] | None = None,
) -> dict[str, Any]:
    """The names every template sees (``clock`` replaces ``now``, e.g. frozen during a replay)."""
    context: dict[str, Any] = dict(variables)
    context.update(input=input, vars=dict(variables), tools=tools or [], agent=agent)
    if clock is not None:
        context["now"] = clock
    return context
