"""Tools of the calculator example: every public function becomes a tool."""

from __future__ import annotations

import ast
import math
import operator

_OPERATORS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
    ast.Mod: operator.mod,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}


def _evaluate(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_evaluate(node.left), _evaluate(node.right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_evaluate(node.operand))
    raise ValueError(f"unsupported expression: {ast.dump(node)[:60]}")


def calculate(expression: str) -> float:
    """Evaluate an arithmetic expression (+ - * / ** % and parentheses).

    :param expression: The expression, e.g. "(2 + 3) * 4".
    """
    return _evaluate(ast.parse(expression, mode="eval"))


def square_root(x: float) -> float:
    """The square root of a non-negative number.

    :param x: The number.
    """
    if x < 0:
        raise ValueError("square_root needs a non-negative number")
    return math.sqrt(x)
