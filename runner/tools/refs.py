"""Inline the local ``$ref`` s of a JSON Schema: the one inliner every tool source uses.

``RefInliner(root).inline(schema)`` returns a copy of ``schema`` with each ``#/...`` reference replaced
by its target. Python tool schemas, MCP input schemas and structured-output schemas go through it via
``tools/schema.py``; OpenAPI documents via ``tools/openapi_spec.py`` (which passes its own ``resolve``,
raising a ``ConfigError`` for an external or dangling reference, and a ``finish`` step per node).

The limits are the same for every source:

- a reference back into one being expanded (a recursive schema) becomes ``recursive_placeholder(ref)``,
  ``{"type": "object", "description": "(recursive: Name)"}``;
- references nest at most ``MAX_REF_DEPTH`` deep along one path, and one ``inline`` call builds at most
  ``MAX_INLINED_NODES`` schema nodes (about twice that in the worst case); past either, a reference
  becomes ``{"type": "object", "description": "(too deeply nested: Name)"}``. The node budget is what
  keeps many mutually referencing schemas (each expansion doubling the next) from growing exponentially;
- a reference that resolves to nothing becomes ``{"type": "object", "description": "(unresolved
  reference: ...)"}`` unless ``resolve`` raises.

With ``memoize=True`` (OpenAPI: thousands of operations over shared components) an expansion reached
without any cut is kept and shared by later ``inline`` calls, and still charged to each call's budget
by its size; without it every expansion is built afresh and plain values are deep-copied, so the
result shares nothing with the input.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

from runner.agentfile.validate import resolve_pointer

__all__ = [
    "MAX_INLINED_NODES",
    "MAX_REF_DEPTH",
    "SUBSCHEMA_KEYS",
    "SUBSCHEMA_LIST_KEYS",
    "RefInliner",
    "recursive_placeholder",
]

#: Keywords whose value is one subschema (JSON Schema 2020-12 and earlier drafts).
SUBSCHEMA_KEYS = frozenset(
    {
        "items",
        "additionalProperties",
        "not",
        "contains",
        "propertyNames",
        "if",
        "then",
        "else",
        "additionalItems",
        "unevaluatedItems",
        "unevaluatedProperties",
    }
)
#: Keywords whose value is a list of subschemas.
SUBSCHEMA_LIST_KEYS = frozenset({"anyOf", "oneOf", "allOf", "prefixItems"})
#: Keywords whose value maps names to subschemas.
SUBSCHEMA_MAP_KEYS = frozenset({"properties", "patternProperties", "dependentSchemas"})
_DEFINITION_KEYS = frozenset({"$defs", "definitions"})  # reached through references, never inlined whole
MAX_REF_DEPTH = 32  # references expanded along one path
MAX_INLINED_NODES = 20_000  # schema nodes built per inline() before references become placeholders


def _name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1] or ref


def recursive_placeholder(ref: str) -> dict[str, Any]:
    """What a reference back into a schema being expanded becomes."""
    return {"type": "object", "description": f"(recursive: {_name(ref)})"}


def _too_deep_placeholder(ref: str) -> dict[str, Any]:
    return {"type": "object", "description": f"(too deeply nested: {_name(ref)})"}


def _unresolved_placeholder(ref: str) -> dict[str, Any]:
    return {"type": "object", "description": f"(unresolved reference: {ref})"}


class RefInliner:
    """Inlines references against one root document, with a cycle guard, a depth limit and a budget."""

    def __init__(
        self,
        root: Mapping[str, Any],
        *,
        resolve: Callable[[str], Any] | None = None,
        finish: Callable[[dict[str, Any]], None] | None = None,
        memoize: bool = False,
    ) -> None:
        self.root = root
        self._resolve = resolve or self._resolve_local
        self._finish = finish
        self._memoize = memoize
        self._memo: dict[str, tuple[dict[str, Any], int]] = {}  # ref -> (expansion, nodes it holds)
        self._cuts = 0
        self._left = MAX_INLINED_NODES

    def inline(self, node: Any) -> Any:
        """A copy of ``node`` with every reference inlined, within a fresh node budget."""
        self._left = MAX_INLINED_NODES
        return self._walk(node, ())

    def _walk(self, node: Any, stack: tuple[str, ...]) -> Any:
        if isinstance(node, list):
            return [self._walk(item, stack) for item in node]
        if not isinstance(node, Mapping):
            return node if self._memoize else copy.deepcopy(node)
        ref = node.get("$ref")
        if isinstance(ref, str):
            return self._expand(node, ref, stack)
        self._left -= 1
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in _DEFINITION_KEYS:
                continue
            if key in SUBSCHEMA_KEYS or (key in SUBSCHEMA_LIST_KEYS and isinstance(value, list)):
                out[key] = self._walk(value, stack)
            elif key in SUBSCHEMA_MAP_KEYS and isinstance(value, Mapping):
                out[key] = {name: self._walk(sub, stack) for name, sub in value.items()}
            else:
                out[key] = value if self._memoize else copy.deepcopy(value)
        if self._finish is not None:
            self._finish(out)
        return out

    def _expand(self, node: Mapping[str, Any], ref: str, stack: tuple[str, ...]) -> dict[str, Any]:
        target = self._target(ref, stack)
        siblings = {key: value for key, value in node.items() if key != "$ref"}
        if not siblings and self._memoize:
            return target
        merged = dict(target)
        merged.update(self._walk(siblings, stack))
        return merged

    def _target(self, ref: str, stack: tuple[str, ...]) -> dict[str, Any]:
        if ref in stack:
            self._cuts += 1
            return recursive_placeholder(ref)
        if len(stack) >= MAX_REF_DEPTH or self._left <= 0:
            self._cuts += 1
            return _too_deep_placeholder(ref)
        if ref in self._memo:
            expansion, size = self._memo[ref]
            self._left -= size  # shared, but each use still counts against this schema's size
            return expansion
        found = self._resolve(ref)
        if isinstance(found, bool):
            return {} if found else {"not": {}}
        if not isinstance(found, Mapping):
            return _unresolved_placeholder(ref)
        cuts, left = self._cuts, self._left
        expansion = self._walk(found, (*stack, ref))
        if self._memoize and self._cuts == cuts:  # without cuts it does not depend on where it was reached
            self._memo[ref] = (expansion, left - self._left)
        return expansion

    def _resolve_local(self, ref: str) -> Any:
        if not ref.startswith("#"):
            return None
        try:
            return resolve_pointer(self.root, ref)
        except LookupError:
            return None
