"""The schemas a client sends (``response_format``, a forced tool's parameters) as output schemas.

A client's schema is checked like an agent's ``output:`` (a valid JSON Schema, references that
resolve inside it), and one more thing: its regular expressions (``pattern``,
``patternProperties``) are matched by RE2, in time linear in the answer. Python's ``re``
backtracks: ``^(a+)+$`` over an answer of thirty ``a``'s and a ``!`` (which the client can ask the
model to write) would hold the server's event loop, and every other request, for minutes. A
pattern RE2 cannot run (backreferences, look-around) is refused with a 400. An agent's own
``output:`` is the agent author's and keeps Python's patterns.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from typing import Any

from runner.agentfile.answer_check import Keyword
from runner.agentfile.output_schema import OutputSchema, json_path, schema_problems
from runner.agentfile.schema_budget import schema_nodes
from runner.agentfile.yamlsrc import PathKey

__all__ = ["ClientSchema", "SchemaProblem", "client_schema"]


class SchemaProblem(Exception):
    """Why a client's schema cannot be used: the path inside it and the message."""

    def __init__(self, where: PathKey, message: str) -> None:
        super().__init__(message)
        self.where = where
        self.message = message

    def at(self) -> str:
        """The path inside the schema as ``.properties.n`` (empty at the root)."""
        return json_path(self.where).removeprefix("$")


@functools.lru_cache(maxsize=256)
def _compiled(pattern: str) -> Any:
    import re2  # lazy: a C++ extension only client schemas with patterns need

    options = re2.Options()
    options.log_errors = False  # RE2 would print parse errors on stderr
    options.never_capture = True  # only "does it match" is asked
    return re2.compile(pattern, options)


def _re2_reason(exc: BaseException) -> str:
    reason = exc.args[0] if exc.args else exc
    return reason.decode("utf-8", "replace") if isinstance(reason, bytes) else str(reason)


def _patterns(node: Any) -> Iterator[tuple[PathKey, str]]:
    """Every regular expression in a schema, with where it is (no recursion: a deep schema is fine).

    Only in schema position: the values of ``enum``, ``const``, ``default`` and ``examples`` are
    data, but a property named ``enum`` is a schema like any other (``schema_nodes``)."""
    for where, item in schema_nodes(node):
        if isinstance(item.get("pattern"), str):
            yield (*where, "pattern"), item["pattern"]
        names = item.get("patternProperties")
        if isinstance(names, Mapping):
            yield from (((*where, "patternProperties", key), key) for key in names if isinstance(key, str))


def _check_patterns(schema: Any) -> None:
    import re2

    for where, pattern in _patterns(schema):
        try:
            _compiled(pattern)
        except (re2.error, UnicodeEncodeError) as exc:
            reason = _re2_reason(exc) if isinstance(exc, re2.error) else "a lone surrogate"
            raise SchemaProblem(
                where,
                f"the regular expression {pattern[:80]!r} cannot be used ({reason}): patterns from a "
                "request are matched by RE2, without backreferences or look-around",
            ) from None


class ClientSchema(OutputSchema):
    """An ``OutputSchema`` from a request: its patterns are matched by RE2 (linear time)."""

    def keywords(self) -> Mapping[str, Keyword]:
        """``pattern`` and ``patternProperties`` matched by RE2."""
        return {"pattern": _pattern, "patternProperties": _pattern_properties}


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    import jsonschema

    if validator.is_type(instance, "string") and _compiled(pattern).search(instance) is None:
        yield jsonschema.ValidationError(f"{instance[:80]!r} does not match {pattern[:80]!r}")


def _pattern_properties(validator: Any, properties: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in properties.items():
        regexp = _compiled(pattern)
        for key, value in instance.items():
            if regexp.search(key) is not None:
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def client_schema(schema: Any, *, name: str, where: str, strict: bool | None = None) -> ClientSchema:
    """``schema`` from a request as an output schema; ``SchemaProblem`` when it cannot be used."""
    problems = schema_problems(schema)
    if problems:
        raise SchemaProblem(*problems[0])
    _check_patterns(schema)
    return ClientSchema(schema, name=name, where=where, strict=strict)
