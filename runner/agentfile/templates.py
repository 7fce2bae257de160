"""Jinja templates of an agent: sandboxed, ``StrictUndefined``, errors located in the agent file.

Every template sees the same names: ``input`` (the user input; in the system prompt, the
session's first input or ""), ``vars`` (all variables, also available by their own names),
``tools`` (a list of {name, description, parameters}), ``agent`` (the agent's name) and
``now(fmt)`` (the local time, strftime format, default ISO 8601).
"""

from __future__ import annotations

import datetime as _dt
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import jinja2
from jinja2 import meta
from jinja2.sandbox import SandboxedEnvironment

from runner.agentfile.config import TemplateSource
from runner.errors import ConfigError

__all__ = [
    "BUILTIN_NAMES",
    "HOOK_EVENT_NAMES",
    "TemplateEngine",
    "format_time",
    "frozen_clock",
    "now",
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


def format_time(moment: _dt.datetime, fmt: str | None = None) -> str:
    """``moment`` as ``now(fmt)`` would show it."""
    return moment.strftime(fmt) if fmt else moment.isoformat(timespec="seconds")


def frozen_clock(moment: _dt.datetime) -> Callable[..., str]:
    """A ``now(fmt)`` that always answers ``moment`` (replays render the recording's date)."""

    def frozen_now(fmt: str | None = None) -> str:
        return format_time(moment, fmt)

    return frozen_now


class TemplateEngine:
    """Compiles and renders the templates of one agent directory (cached per source)."""

    def __init__(self, directory: Path) -> None:
        self.env = SandboxedEnvironment(
            undefined=jinja2.StrictUndefined,
            loader=jinja2.FileSystemLoader(str(directory)),
            autoescape=False,
            keep_trailing_newline=True,
        )
        self.env.globals["now"] = now
        self._compiled: dict[TemplateSource, jinja2.Template] = {}

    def _error(self, source: TemplateSource, message: str, lineno: int | None) -> ConfigError:
        line = (source.line + (lineno or 1) - 1) if lineno else source.line
        return ConfigError(f"template: {message}", file=source.name, line=line, column=1 if lineno else 0)

    def parse(self, source: TemplateSource) -> jinja2.nodes.Template:
        """The template's syntax tree; a syntax error becomes a located ``ConfigError``."""
        try:
            return self.env.parse(source.text, name=source.name)
        except jinja2.TemplateSyntaxError as exc:
            raise self._error(source, exc.message or "syntax error", exc.lineno) from None

    def compile(self, source: TemplateSource) -> jinja2.Template:
        """The compiled template (cached)."""
        template = self._compiled.get(source)
        if template is None:
            try:
                template = self.env.from_string(source.text)
            except jinja2.TemplateSyntaxError as exc:
                raise self._error(source, exc.message or "syntax error", exc.lineno) from None
            template.filename = source.name
            self._compiled[source] = template
        return template

    def undeclared(self, source: TemplateSource) -> set[str]:
        """Names the template reads that it does not define itself."""
        return set(meta.find_undeclared_variables(self.parse(source)))

    def first_uses(self, source: TemplateSource, names: set[str]) -> dict[str, int]:
        """For each of ``names``, the template line (1-based) where it is first read."""
        lines: dict[str, int] = {}
        for node in self.parse(source).find_all(jinja2.nodes.Name):
            if node.ctx == "load" and node.name in names:
                lines[node.name] = min(lines.get(node.name, node.lineno), node.lineno)
        return lines

    def missing_includes(self, source: TemplateSource) -> list[str]:
        """Templates named by ``include``/``import``/``extends`` that the loader cannot find."""
        missing = []
        for name in meta.find_referenced_templates(self.parse(source)):
            if name is None:
                continue  # computed at render time
            try:
                self.env.loader.get_source(self.env, name)  # type: ignore[union-attr]
            except jinja2.TemplateNotFound:
                missing.append(name)
        return missing

    def render(self, source: TemplateSource, context: Mapping[str, Any]) -> str:
        """Render with ``context``; undefined names and sandbox violations become ``ConfigError``."""
        template = self.compile(source)
        try:
            return template.render(context)
        except jinja2.UndefinedError as exc:
            raise self._error(source, f"undefined variable: {exc.message}", _template_line(exc)) from None
        except jinja2.TemplateError as exc:
            raise self._error(source, exc.message or type(exc).__name__, _template_line(exc)) from None
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
