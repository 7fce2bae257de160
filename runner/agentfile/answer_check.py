"""The validator an answer is checked with: jsonschema's, each keyword metered, ``uniqueItems`` linear.

- Every keyword evaluation counts one step of the check's ``CheckBudget`` (``schema_budget``), so a
  check that would run long stops with a message instead of holding its thread; ``enum`` counts its
  values, ``uniqueItems`` its items.
- ``uniqueItems`` hashes a canonical form of each item, in time linear in the array (jsonschema
  compares items pairwise when they do not sort: 8,000 mixed items took 104 s). The form follows
  JSON's equality: ``1`` and ``1.0`` are equal, ``true`` and ``1`` are not, an object's key order
  does not matter, an array's order does.
- The root's ``$schema`` chooses the draft and is then left out of what the validator holds:
  jsonschema switches to its own, unmetered validator at any subschema that names a ``$schema``
  (a ``$ref: "#"`` reaches the root), and ``schema_problems`` refuses one below the root.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from runner.agentfile.schema_budget import current_budget

__all__ = ["canonical", "checking_validator", "unique_items"]

Keyword = Callable[[Any, Any, Any, Any], Any]
_LIST, _OBJECT, _BOOL = object(), object(), object()


def canonical(value: Any) -> Any:
    """A hashable form of a JSON value, equal for two values exactly when JSON Schema deems them equal."""
    kind = type(value)
    if kind is str or kind is int or kind is float or value is None:
        return value  # 1 == 1.0, and they hash alike
    if kind is bool:
        return (_BOOL, value)
    if kind is list or kind is tuple:
        return (_LIST, tuple(map(canonical, value)))
    if isinstance(value, Mapping):
        return (_OBJECT, frozenset((key, canonical(item)) for key, item in value.items()))
    if isinstance(value, list | tuple):
        return (_LIST, tuple(map(canonical, value)))
    return value


def unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Iterator[Any]:
    """``uniqueItems`` in linear time: the first repeated item is named."""
    if not unique or not validator.is_type(instance, "array"):
        return
    import jsonschema

    budget = current_budget()
    if budget is not None:
        budget.tick(len(instance))
    seen: dict[Any, int] = {}
    for index, item in enumerate(instance):
        first = seen.setdefault(canonical(item), index)
        if first != index:
            yield jsonschema.ValidationError(
                f"{instance!r} has non-unique elements (item {index} repeats item {first})"
            )
            return


def _metered(keyword: Keyword, name: str) -> Keyword:
    def checked(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        budget = current_budget()
        if budget is not None:
            budget.tick(len(value) if name == "enum" and isinstance(value, list) else 1)
        return keyword(validator, value, instance, schema)

    return checked


def checking_validator(schema: Mapping[str, Any], cls: Any, overrides: Mapping[str, Keyword] = {}) -> Any:
    """A validator of draft ``cls`` for ``schema``: metered keywords, linear ``uniqueItems``, and
    ``overrides`` (a client schema's RE2 ``pattern``)."""
    import jsonschema

    keywords = {**cls.VALIDATORS, "uniqueItems": unique_items, **overrides}
    metered = jsonschema.validators.extend(cls, {k: _metered(f, k) for k, f in keywords.items()})
    body = {key: value for key, value in schema.items() if key != "$schema"}
    return metered(body, format_checker=cls.FORMAT_CHECKER)
