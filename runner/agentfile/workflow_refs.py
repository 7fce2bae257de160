"""The step references of a parsed workflow expression or template (``runner validate``, issue 17).

A reference is a chain of constant attributes and indexes rooted at a name, read from Jinja's syntax
tree: ``steps.plan.output.tasks[0]['topic']`` is ``("steps", ["plan", "output", "tasks", 0, "topic"])``.
"""

from __future__ import annotations

from collections.abc import Iterator

from jinja2 import nodes

__all__ = ["chain", "guards", "references"]


def chain(node: nodes.Node) -> tuple[str, list[str | int]] | None:
    """``("steps", ["plan", "output", "tasks"])`` for ``steps.plan.output.tasks``; None if no chain."""
    parts: list[str | int] = []
    while True:
        if isinstance(node, nodes.Getattr):
            parts.append(node.attr)
        elif isinstance(node, nodes.Getitem):
            key = node.arg
            if (
                not isinstance(key, nodes.Const)
                or not isinstance(key.value, str | int)
                or isinstance(key.value, bool)
            ):
                parts = []  # a computed key: only the part after it is unknown
            else:
                parts.append(key.value)
        elif isinstance(node, nodes.Name):
            return node.name, parts[::-1]
        else:
            return None
        node = node.node


def guards(tree: nodes.Node | None) -> frozenset[str]:
    """The step ids ``tree`` tests with ``steps.ID is defined`` (or ``is undefined``)."""
    found = set()
    for test in tree.find_all(nodes.Test) if tree is not None else ():
        tested = chain(test.node) if test.name in ("defined", "undefined") else None
        if tested is not None and tested[0] == "steps" and len(tested[1]) == 1:
            found.add(str(tested[1][0]))
    return frozenset(found)


def references(tree: nodes.Node) -> Iterator[tuple[nodes.Node, str, list[str | int]]]:
    """Every outermost attribute/item chain of ``tree`` (a method call drops its method name)."""
    inner: set[int] = set()
    called: set[int] = set()
    for node in tree.find_all((nodes.Getattr, nodes.Getitem, nodes.Call)):
        target = node.node  # type: ignore[attr-defined]  # the three all have .node
        (called if isinstance(node, nodes.Call) else inner).add(id(target))
    for node in tree.find_all((nodes.Getattr, nodes.Getitem, nodes.Name)):
        if id(node) in inner or (isinstance(node, nodes.Name) and node.ctx != "load"):
            continue
        found = chain(node)
        if found is None:
            continue
        root, parts = found
        if id(node) in called and parts and isinstance(node, nodes.Getattr):
            parts = parts[:-1]
        yield node, root, parts
