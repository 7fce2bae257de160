"""Constant expressions of a template that are over a limit, found before any render (``runner validate``).

``' '|center(10**9)`` needs no variable to be refused: its operands are written in the template. This
module folds every constant subexpression (literals, operators, filters without context, ``range`` and
``lipsum``, methods of constant strings and numbers) through the bounded sandbox itself, so the
limits it reports are exactly the ones a render would hit. Anything else (a variable, an error that
is not a limit) is left for the render to report.
"""

from __future__ import annotations

from typing import Any

from jinja2 import nodes

from runner.agentfile.sandbox import BoundedSandbox, TemplateLimitError, metered

__all__ = ["constant_limit_errors"]


class _Unknown(Exception):
    """The value of this expression is not known before a render."""


_UNKNOWN = object()
_METHOD_OWNERS = (str, bytes, int, float)


class _PlainCall:
    """Stands in for a render's context when a constant call is folded: calls the object."""

    @staticmethod
    def call(obj: Any, *args: Any, **kwargs: Any) -> Any:
        return obj(*args, **kwargs)


class _NoEscape:
    autoescape = False


class _Folder:
    def __init__(self, env: BoundedSandbox) -> None:
        self.env = env
        self.values: dict[int, Any] = {}
        self.errors: list[tuple[str, int]] = []

    def value(self, node: nodes.Node) -> Any:
        """The constant value of ``node``, or raise ``_Unknown``."""
        known = self.values.get(id(node))
        if known is None:
            try:
                known = self.evaluate(node)
            except TemplateLimitError as exc:
                self.errors.append((str(exc.message), node.lineno))
                known = _UNKNOWN
            except Exception:  # not constant, or an ordinary error the render will report
                known = _UNKNOWN
            self.values[id(node)] = (known,)
        else:
            known = known[0]
        if known is _UNKNOWN:
            raise _Unknown
        return known

    def evaluate(self, node: nodes.Node) -> Any:
        env = self.env
        if isinstance(node, nodes.Const):
            return node.value
        if isinstance(node, nodes.List | nodes.Tuple):
            items = [self.value(item) for item in node.items]
            return items if isinstance(node, nodes.List) else tuple(items)
        if isinstance(node, nodes.BinExpr):
            left, right = self.value(node.left), self.value(node.right)
            if node.operator in env.intercepted_binops:
                return env.call_binop(None, node.operator, left, right)
            return env.binop_table[node.operator](left, right)
        if isinstance(node, nodes.UnaryExpr):
            return env.unop_table[node.operator](self.value(node.node))
        if isinstance(node, nodes.Concat):
            return env.metered_concat(_NoEscape, tuple(self.value(piece) for piece in node.nodes))
        if isinstance(node, nodes.Filter) and node.node is not None:
            return self.filter(node)
        if isinstance(node, nodes.Call):
            return self.call(node)
        raise _Unknown

    def arguments(self, node: nodes.Call | nodes.Filter) -> tuple[list[Any], dict[str, Any]]:
        if node.dyn_args is not None or node.dyn_kwargs is not None:
            raise _Unknown
        args = [self.value(arg) for arg in node.args]
        kwargs = {str(kw.key): self.value(kw.value) for kw in node.kwargs}
        return args, kwargs

    def filter(self, node: nodes.Filter) -> Any:
        func = self.env.filters.get(node.name)
        if func is None or getattr(func, "jinja_pass_arg", None) is not None:
            raise _Unknown  # unknown (reported apart) or needs a context
        args, kwargs = self.arguments(node)
        return func(self.value(node.node), *args, **kwargs)  # type: ignore[arg-type]

    def call(self, node: nodes.Call) -> Any:
        target = node.node
        if isinstance(target, nodes.Name) and target.name in ("range", "lipsum"):
            func = self.env.globals[target.name]
        elif isinstance(target, nodes.Getattr):
            owner = self.value(target.node)
            if not isinstance(owner, _METHOD_OWNERS):
                raise _Unknown
            func = self.env.getattr(owner, target.attr)
        else:
            raise _Unknown
        args, kwargs = self.arguments(node)
        return self.env.call(_PlainCall, func, *args, **kwargs)


def constant_limit_errors(env: BoundedSandbox, tree: nodes.Template) -> list[tuple[str, int]]:
    """``(message, template line)`` for each constant expression of ``tree`` that is over a limit."""
    folder = _Folder(env)
    with metered(env.limits):
        for node in tree.find_all(nodes.Expr):
            try:
                folder.value(node)
            except _Unknown:
                continue
            except RecursionError:
                break
    return folder.errors
