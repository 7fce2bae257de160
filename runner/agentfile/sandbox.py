"""The bounded Jinja sandbox every template runs in: a hostile template cannot stall or exhaust the process.

Jinja's ``SandboxedEnvironment`` stops templates from reaching Python's internals, but not from asking
for ``' '|center(10**9)``, ``range(99999)`` inside ``range(99999)`` or a macro that calls itself twice.
``BoundedSandbox`` adds a budget per render (and per compile: Jinja folds constant expressions while
compiling) whose limits are ``TemplateLimits``:

- the source: at most ``source_chars`` characters (bytes for a file) and ``source_tokens`` tokens,
  checked before it is parsed (``preprocess`` sees every template: inline, file, include, extends);
- ``steps``: loop iterations, calls, filters and items put into lists and dicts, counted together;
- ``built_chars``: the characters of the strings a render builds (``*``, ``+``, ``~``, ``%``,
  ``format``, filters, string methods), checked *before* a string is built; ``output_chars``: what
  the render returns;
- ``range_items`` per ``range()``, ``depth`` nested calls (macros, recursive loops), ``int_bits`` bits
  for the results of ``*`` and ``**`` on integers, and ``seconds`` of wall-clock time, a backstop.

Going over a limit raises ``TemplateLimitError`` (a Jinja ``SecurityError``), which the template
engine turns into a located ``ConfigError``.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.compiler import CodeGenerator, Frame
from jinja2.loaders import split_template_path
from jinja2.runtime import LoopContext, markup_join, str_join
from jinja2.sandbox import SandboxedEnvironment, SandboxedEscapeFormatter, SandboxedFormatter
from markupsafe import Markup

from runner.agentfile.template_budget import (
    LIMITS,
    Budget,
    TemplateLimitError,
    TemplateLimits,
    current_budget,
    metered,
)
from runner.agentfile.template_costs import (
    COPIES,
    check_binop,
    check_method,
    metered_filter,
    need_format_field,
)

__all__ = [
    "LIMITS",
    "BoundedLoader",
    "BoundedSandbox",
    "Budget",
    "InvalidTemplateName",
    "TemplateLimitError",
    "TemplateLimits",
    "metered",
]


class _BoundedFormatter(SandboxedFormatter):
    """``str.format``'s formatter: a field's width or precision counts before the field is built."""

    def format_field(self, value: Any, format_spec: str) -> Any:
        need_format_field(current_budget(self._env.limits), format_spec)  # type: ignore[attr-defined]
        return super().format_field(value, format_spec)


class _BoundedEscapeFormatter(SandboxedEscapeFormatter):
    """The formatter of ``Markup.format``, with the same bound on field widths."""

    def format_field(self, value: Any, format_spec: str) -> Any:
        need_format_field(current_budget(self._env.limits), format_spec)  # type: ignore[attr-defined]
        return super().format_field(value, format_spec)


# --- the generated code: loops and ``~`` go through the budget ------------------------------------


class _MeteredCodeGenerator(CodeGenerator):
    """Jinja's code generator, with every ``for`` loop's items counted and ``~`` checked."""

    def visit_Template(self, node: nodes.Template, frame: Frame | None = None) -> None:
        for loop in list(node.find_all(nodes.For)):
            loop.iter = nodes.Call(
                nodes.EnvironmentAttribute("metered_iter"), [loop.iter], [], None, None, lineno=loop.lineno
            )
        super().visit_Template(node, frame)

    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        self.write("environment.metered_concat(context.eval_ctx, (")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


class BoundedTemplate(jinja2.Template):
    """A template whose every render runs on one budget, its output counted as it is made."""

    environment: BoundedSandbox

    def render(self, *args: Any, **kwargs: Any) -> str:
        """Render like Jinja, within the environment's ``TemplateLimits``."""
        with metered(self.environment.limits) as budget:
            parts = []
            for chunk in self.generate(*args, **kwargs):
                budget.emit(len(chunk))
                parts.append(chunk)
            return "".join(parts)


class InvalidTemplateName(jinja2.TemplateNotFound):
    """An include names something that cannot be a template (a NUL, a huge name, not UTF-8)."""


class BoundedLoader(jinja2.FileSystemLoader):
    """A file loader that refuses names no file can have and files larger than the source limit."""

    def __init__(self, searchpath: str, *, limits: TemplateLimits = LIMITS) -> None:
        super().__init__(searchpath)
        self.limits = limits

    def get_source(
        self, environment: jinja2.Environment, template: str
    ) -> tuple[str, str, Callable[[], bool]]:
        """The template's text; a bad name is "not found", an oversized file a limit error."""
        if not isinstance(template, str) or "\x00" in template or len(template) > 1024:
            shown = repr(template)[:80]
            raise InvalidTemplateName(shown, message=f"{shown}, which is not a valid template name")
        pieces = split_template_path(template)
        for folder in self.searchpath:
            try:
                size = os.stat(os.path.join(folder, *pieces)).st_size
            except (OSError, ValueError):
                continue
            if size > self.limits.source_chars:
                raise TemplateLimitError(
                    f"template file {template} is {size:,} bytes: the limit is {self.limits.source_chars:,}",
                    limit="source_chars",
                )
        try:
            return super().get_source(environment, template)
        except UnicodeDecodeError as exc:
            message = f"'{template}', which is not UTF-8 text ({exc.reason})"
            raise InvalidTemplateName(template, message=message) from None


class BoundedSandbox(SandboxedEnvironment):
    """Jinja's sandbox within ``TemplateLimits``: sizes, steps, depth and time are all bounded."""

    intercepted_binops = frozenset({"*", "**", "+", "%"})
    code_generator_class = _MeteredCodeGenerator
    template_class = BoundedTemplate

    def __init__(self, *, limits: TemplateLimits = LIMITS, **options: Any) -> None:
        super().__init__(**options)
        self.limits = limits
        self.filters = {name: metered_filter(limits, func, name) for name, func in self.filters.items()}
        self.globals["range"] = self.bounded_range
        self.globals["lipsum"] = self.bounded_lipsum

    def preprocess(self, source: str, name: str | None = None, filename: str | None = None) -> str:
        """Refuse a source over the size or token limit before Jinja parses it."""
        if len(source) > self.limits.source_chars:
            raise TemplateLimitError(
                f"the template is {len(source):,} characters long: the limit is {self.limits.source_chars:,}",
                limit="source_chars",
            )
        for count, (lineno, _, _) in enumerate(self.lexer.tokeniter(source, name, filename), 1):
            if count > self.limits.source_tokens:
                raise TemplateLimitError(
                    f"the template has more than {self.limits.source_tokens:,} tokens (tags, names, "
                    "operators): split it, or move text out of the tags",
                    limit="source_tokens",
                    lineno=lineno,
                )
        return super().preprocess(source, name, filename)

    def bounded_range(self, *args: int) -> range:
        """``range`` of at most ``range_items`` items."""
        items = range(*args)
        if len(items) > self.limits.range_items:
            raise TemplateLimitError(
                f"range of {len(items):,} items: the limit is {self.limits.range_items:,}",
                limit="range_items",
            )
        return items

    def bounded_lipsum(self, n: int = 5, html: bool = True, min: int = 20, max: int = 100) -> str:
        """Jinja's ``lipsum``, refused when it would build too much."""
        current_budget(self.limits).need_chars(n * max * 12, "lipsum")
        return str(jinja2.utils.generate_lorem_ipsum(n=n, html=html, min=min, max=max))

    def metered_iter(self, iterable: Iterable[Any]) -> Iterator[Any]:
        """The items of a ``for`` loop, each counted as a step."""
        budget = current_budget(self.limits)
        for item in iterable:
            budget.step()
            yield item

    def metered_concat(self, eval_ctx: Any, pieces: tuple[Any, ...]) -> str:
        """``a ~ b``: the length of the result is checked before it is built."""
        budget = current_budget(self.limits)
        texts = [str(piece) for piece in pieces]
        budget.need_chars(sum(map(len, texts)), "~")
        result: str = markup_join(pieces) if eval_ctx.autoescape else str_join(texts)
        budget.charge(result)
        return result

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        """Call from a template: a step, one level deeper, built values checked and counted."""
        budget = current_budget(__self.limits)
        budget.step()
        owner = getattr(__obj, "__self__", None)
        if owner is not None and not callable(owner) and hasattr(__obj, "__name__"):
            args = check_method(budget, owner, __obj.__name__, args)
        if isinstance(__obj, LoopContext) and args:  # a recursive loop's next level
            args = (__self.metered_iter(args[0]), *args[1:])
        try:
            budget.enter()
            result = super().call(__context, __obj, *args, **kwargs)
        finally:
            budget.depth -= 1
        if owner is None or isinstance(owner, str | bytes | int) or getattr(__obj, "__name__", "") in COPIES:
            budget.charge(result, unless=(owner, *args))
        return result

    def call_binop(self, context: Any, operator_name: str, left: Any, right: Any) -> Any:
        """``*``, ``**``, ``+`` and ``%`` with their results bounded before they are computed."""
        budget = current_budget(self.limits)
        check_binop(budget, operator_name, left, right)
        result = self.binop_table[operator_name](left, right)
        budget.charge(result, unless=(left, right))
        return result

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        """``str.format`` / ``format_map`` (of text or ``Markup``) through a formatter bounding widths."""
        if super().wrap_str_format(value) is None:
            return None
        text: str = value.__self__
        formatter: SandboxedFormatter
        if isinstance(text, Markup):
            formatter = _BoundedEscapeFormatter(self, escape=text.escape)
        else:
            formatter = _BoundedFormatter(self)
        kind = type(text)

        @functools.wraps(value)
        def bounded_format(*args: Any, **kwargs: Any) -> str:
            if value.__name__ == "format_map":
                if kwargs or len(args) != 1:
                    raise TypeError("format_map() takes exactly one argument")
                kwargs, args = args[0], ()
            return kind(formatter.vformat(text, args, kwargs))

        return bounded_format
