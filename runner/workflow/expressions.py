"""Workflow templates and expressions, rendered in the agent file's sandbox (``TemplateEngine``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2

from runner.agentfile.config import TemplateSource
from runner.agentfile.sandbox import TemplateLimitError, metered
from runner.agentfile.templates import TemplateEngine
from runner.errors import ConfigError

__all__ = ["Evaluator", "plain"]


def plain(value: Any) -> Any:
    """A step's output as templates and transcripts see it: pydantic instances as their JSON value."""
    dump = getattr(value, "model_dump", None)
    return dump(mode="json") if callable(dump) else value


class Evaluator:
    """Renders a workflow's templates and evaluates its expressions (``when``, ``for_each``, ``until``)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.engine = TemplateEngine(path.parent)
        self._expressions: dict[str, Any] = {}

    def render(self, text: str, context: dict[str, Any], *, where: str) -> str:
        """``text`` rendered with ``context``; a failure is a ``ConfigError`` naming ``where``."""
        try:
            return self.engine.render(TemplateSource(text, self.path), context)
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc.message}", file=str(self.path)) from None

    def evaluate(self, expression: str, context: dict[str, Any], *, where: str) -> Any:
        """The value of a Jinja expression; a syntax error or an undefined name is a ``ConfigError``."""
        env = self.engine.env
        try:
            with metered(env.limits):
                compiled = self._expressions.get(expression)
                if compiled is None:
                    compiled = env.compile_expression(expression, undefined_to_none=False)
                    self._expressions[expression] = compiled
                value = compiled(**context)
                if isinstance(value, jinja2.Undefined):
                    value._fail_with_undefined_error()
                return value
        except jinja2.TemplateSyntaxError as exc:
            message = f"syntax error in {expression!r}: {exc.message}"
        except jinja2.UndefinedError as exc:
            message = f"undefined in {expression!r}: {exc.message}"
        except TemplateLimitError as exc:
            message = f"{expression!r}: {exc.message}"
        except Exception as exc:  # a filter or call inside the expression failed
            message = f"{expression!r}: {type(exc).__name__}: {exc}"
        raise ConfigError(f"{where}: {message}", file=str(self.path))

    def truth(self, expression: str, context: dict[str, Any], *, where: str) -> bool:
        """Whether the expression holds (an undefined value is an error, not false)."""
        value = self.evaluate(expression, context, where=where)
        try:
            return bool(value)
        except jinja2.UndefinedError as exc:
            raise ConfigError(f"{where}: undefined in {expression!r}: {exc.message}") from None
