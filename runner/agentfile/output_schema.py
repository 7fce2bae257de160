"""An agent's ``output:``: the JSON Schema its final answer must match, and checking answers against it.

- ``read_schema_file(path)``: a schema kept in a JSON or YAML file, with where each value is.
- ``schema_problems(schema)``: what makes a schema unusable (its meta-schema, a ``$ref`` that does
  not resolve or points outside it), each with the path inside the schema; ``runner validate``
  locates them in the agent file or the schema file.
- ``OutputSchema``: a usable schema: ``problems(value)`` (the validator's messages, path and reason,
  bounded whatever the value), ``instance(value)`` (a pydantic instance for ``python:`` models).
- ``load_output(config)``: the ``OutputSchema`` of ``output:``, importing a ``python:`` model.

Only references inside the schema (``#/...``) are followed: a schema that reaches for other files
or URLs would make validation depend on the network or on files the agent does not list.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import itertools
import json
import re
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.agentfile.answer_check import Keyword, checking_validator
from runner.agentfile.config import OutputConfig
from runner.agentfile.imports import import_module
from runner.agentfile.schema_budget import (
    MAX_ANSWER_DEPTH,
    REF_KEYWORDS,
    CheckBudget,
    CheckOverrun,
    answer_depth,
    budget_problem,
    current_budget,
    schema_nodes,
)
from runner.agentfile.validate import resolve_pointer
from runner.agentfile.yamlsrc import PathKey, SourceMap, format_path, parse_data
from runner.errors import ConfigError
from runner.text import one_line

__all__ = [
    "MAX_SCHEMA_BYTES",
    "OutputSchema",
    "json_path",
    "load_model",
    "load_output",
    "output_form",
    "read_schema_file",
    "schema_problems",
]

#: A schema file larger than this is refused (a real one is a few KB).
MAX_SCHEMA_BYTES = 1_000_000
#: How many of the validator's messages an answer's problems list.
MAX_PROBLEMS = 5
#: How long one problem's message may be (the validator quotes the value, which may be huge).
MAX_PROBLEM_CHARS = 240
#: How many of the validator's errors are read at all (the first ones; the count past it is "more").
MAX_ERRORS_READ = 50
_JSON_TYPES = ("array", "boolean", "integer", "null", "number", "object", "string")
_NAME = re.compile(r"[^A-Za-z0-9_-]+")


def json_path(path: Iterator[str | int] | tuple[str | int, ...] | list[str | int]) -> str:
    """``$.temps[0].high`` for the path ``("temps", 0, "high")``."""
    text = "$"
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", part):
            text += f".{part}"
        else:
            text += f"[{part!r}]"
    return text


def output_form(value: Any) -> str:
    """Which form of ``output:`` a mapping is, as the agent schema reads it: "file", "python" or "inline"."""
    if isinstance(value, Mapping) and "file" in value:
        return "file"
    if isinstance(value, Mapping) and "python" in value:
        return "python"
    return "inline"


def read_schema_file(path: Path, shown: str) -> tuple[Any, SourceMap]:
    """The schema in ``path`` (JSON or YAML) and its source map; ``ConfigError`` when unreadable."""
    name = str(path)
    try:
        if path.is_dir():
            raise ConfigError(f"output schema file {shown} is a directory")
        if not path.is_file():
            raise ConfigError(f"output schema file not found: {shown}", hint=f"looked for {path}")
        with path.open("rb") as handle:
            raw = handle.read(MAX_SCHEMA_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"cannot read output schema file {shown}: {exc.strerror or exc}") from None
    if len(raw) > MAX_SCHEMA_BYTES:
        raise ConfigError(
            f"output schema file {shown} is too large (the limit is {MAX_SCHEMA_BYTES:,} bytes)", file=name
        )
    if b"\x00" in raw:
        raise ConfigError(f"output schema file {shown} is a binary file, not JSON or YAML", file=name)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise ConfigError(
            f"output schema file {shown} is not UTF-8 text (byte 0x{raw[exc.start]:02x})",
            file=name,
            line=line,
            column=column,
        ) from None
    return parse_data(text, name)


def _refs(node: Any) -> Iterator[tuple[PathKey, str, str]]:
    """Every reference in ``node`` (``$ref``, ``$dynamicRef``, ``$recursiveRef``): the path of the
    mapping that holds it, the keyword and the reference. The values of ``enum``, ``const``... are
    data and skipped, but not a property that has such a name."""
    for where, mapping in schema_nodes(node):
        for keyword in REF_KEYWORDS:
            ref = mapping.get(keyword)
            if isinstance(ref, str):
                yield where, keyword, ref


def _ref_problem(schema: Mapping[str, Any], keyword: str, ref: str) -> str | None:
    if not ref.startswith("#"):
        return (
            f"{keyword} '{one_line(ref, 80)}' points outside the schema; only references inside it "
            "(#/$defs/...) are followed"
        )
    try:
        resolve_pointer(schema, ref)
    except LookupError:
        message = (
            f"{keyword} '{one_line(ref, 80)}' does not resolve: the schema has nothing at {ref[1:] or '/'}"
        )
        defs = [f"#/{key}/{name}" for key in ("$defs", "definitions") for name in schema.get(key) or {}]
        close = difflib.get_close_matches(ref, defs, n=1)
        return message + (f" (did you mean '{close[0]}'?)" if close else "")
    return None


def _meta_message(error: Any) -> str:
    """The meta-schema's complaint, said plainly where it can be (an unknown type name, a value of the
    wrong type written as JSON: ``required: yes`` is "expected an array, got true", not "True")."""
    if error.path and error.path[-1] == "type" and isinstance(error.instance, str):
        close = difflib.get_close_matches(error.instance, _JSON_TYPES, n=1)
        return f"unknown type '{one_line(error.instance, 40)}'" + (
            f" (did you mean '{close[0]}'?)" if close else f" (one of {', '.join(_JSON_TYPES)})"
        )
    if error.validator == "format" and error.validator_value == "regex":
        try:
            re.compile(error.instance)
        except (re.error, TypeError) as exc:
            return f"{_glimpse(error.instance)} is not a valid regular expression ({exc})"
    if error.validator == "type":
        expected = error.validator_value
        names = [expected] if isinstance(expected, str) else list(expected)
        return f"expected {' or '.join(map(str, names))}, got {_glimpse(error.instance)}"
    return _clip(error)


def _glimpse(value: Any) -> str:
    """``value`` in a few words, as JSON (a long string or a big container is described, not quoted)."""
    if isinstance(value, str) and len(value) > 60:
        return f"a string of {len(value):,} characters ({json.dumps(value[:20], ensure_ascii=False)[:-1]}...)"
    if isinstance(value, list) and len(value) > 5:
        return f"an array of {len(value):,} items"
    if isinstance(value, dict) and len(value) > 5:
        return f"an object with {len(value):,} keys"
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (ValueError, RecursionError):
        text = type(value).__name__
    return one_line(text, 80)


def _clip(error: Any) -> str:
    """A validator's message, one line: a long value it quotes (``repr``) is replaced by a glimpse of it,
    so that the reason after it (``is not of type 'number'``) survives the cut."""
    message = str(error.message)
    if isinstance(error.instance, (str, list, dict)):
        try:
            quoted = repr(error.instance)
        except RecursionError:
            quoted = ""
        if len(quoted) > 80 and quoted in message:
            message = message.replace(quoted, _glimpse(error.instance))
    return one_line(message, MAX_PROBLEM_CHARS)


def _dialect(schema: Mapping[str, Any]) -> tuple[Any, str | None]:
    """The validator class of the draft ``$schema`` names (2020-12 without one), and what is wrong
    with ``$schema`` if anything (then 2020-12 is used)."""
    import jsonschema

    default = jsonschema.Draft202012Validator
    declared = schema.get("$schema")
    if declared is None:
        return default, None
    if not isinstance(declared, str):  # jsonschema itself would raise on it (it hashes and parses it)
        return default, f"$schema must be the URI of a JSON Schema draft, not {_glimpse(declared)}"
    try:
        cls = jsonschema.validators.validator_for(schema, default=None)
    except (ValueError, TypeError):
        cls = None
    if cls is not None:
        return cls, None
    known = [
        str(v.META_SCHEMA.get("$id") or v.META_SCHEMA.get("id") or "")
        for v in (
            jsonschema.Draft202012Validator,
            jsonschema.Draft201909Validator,
            jsonschema.Draft7Validator,
            jsonschema.Draft6Validator,
            jsonschema.Draft4Validator,
        )
    ]
    close = difflib.get_close_matches(declared, known, n=1)
    return default, f"unknown $schema '{one_line(declared, 80)}'" + (
        f" (did you mean '{close[0]}'?)" if close else f" (one of: {', '.join(known)})"
    )


def schema_problems(schema: Any) -> list[tuple[PathKey, str]]:
    """Why ``schema`` cannot be used as an output schema: (path inside it, message) pairs."""
    if not isinstance(schema, Mapping):
        return [
            ((), f"an output schema must be a mapping (a JSON Schema object), not {type(schema).__name__}")
        ]
    over = budget_problem(schema)  # first: the checks below cost time in proportion to the schema
    if over is not None:
        return [over]
    cls, dialect_problem = _dialect(schema)
    problems: list[tuple[PathKey, str]] = [
        ((*where, "$schema"), "only the root of the schema may name a $schema (the draft of all of it)")
        for where, node in schema_nodes(schema)
        if where and "$schema" in node
    ][:1]
    if dialect_problem is not None:
        problems.append((("$schema",), dialect_problem))
        # the default draft's meta-schema would refuse the non-string `$schema` again
        schema = {key: value for key, value in schema.items() if key != "$schema"}
    # with formats checked: a `pattern` that is no regular expression would fail every answer's check
    checker = cls(cls.META_SCHEMA, format_checker=cls.FORMAT_CHECKER)
    meta = sorted(checker.iter_errors(schema), key=lambda e: [str(p) for p in e.path])
    for error in meta[:MAX_PROBLEMS]:
        problems.append((tuple(error.path), f"not a valid JSON Schema: {_meta_message(error)}"))
    for where, keyword, ref in sorted(_refs(schema), key=lambda item: [str(p) for p in item[0]]):
        problem = _ref_problem(schema, keyword, ref)
        if problem:
            problems.append(((*where, keyword), problem))
    return problems


@dataclass(frozen=True, eq=False)
class OutputSchema:
    """A JSON Schema an answer must match; ``model`` is the pydantic class it came from, if any."""

    schema: Mapping[str, Any]
    #: A name for the schema (``response_format.json_schema.name``): ``[A-Za-z0-9_-]``, up to 64.
    name: str = "output"
    model: Any = None
    #: Where the schema comes from, for messages ("the output schema", "the request's response_format").
    where: str = "the output schema"
    #: What the provider is asked for: strict adherence (None: decided from the schema's shape).
    strict: bool | None = None
    #: What is derived from the schema once per runtime, not per session (the wire schema).
    derived: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def named(cls, schema: Mapping[str, Any], name: str | None, **kwargs: Any) -> OutputSchema:
        """An ``OutputSchema`` whose name is ``name`` (or the schema's ``title``) made safe for APIs."""
        raw = name or str(schema.get("title") or "") or "output"
        safe = _NAME.sub("_", raw).strip("_")[:64] or "output"
        return cls(schema, name=safe, **kwargs)

    def keywords(self) -> Mapping[str, Keyword]:
        """Keywords checked otherwise than jsonschema does (a client schema's patterns: RE2)."""
        return {}

    @functools.cached_property
    def _validator(self) -> Any:
        cls, _ = _dialect(self.schema)
        return checking_validator(self.schema, cls, self.keywords())

    def problems(self, value: Any) -> list[str]:
        """Why ``value`` does not match (at most ``MAX_PROBLEMS``, "at $.path: reason"); [] if it does.

        The check runs within the budget of the caller's context (``check_off_loop``'s), else a new
        ``CheckBudget``; past it, the answer's one problem says so."""
        if answer_depth(value) > MAX_ANSWER_DEPTH:
            return [f"the answer nests arrays and objects more than {MAX_ANSWER_DEPTH} levels deep"]
        with contextlib.ExitStack() as stack:
            if current_budget() is None:
                stack.enter_context(CheckBudget().active())
            try:
                # the first errors only: an answer of a million wrong items makes a million errors
                found = list(itertools.islice(self._validator.iter_errors(value), MAX_ERRORS_READ))
                problems = self._messages(found) or self._model_problems(value)
            except CheckOverrun as exc:
                if exc.budget.inline:
                    raise  # not the answer's fault: the caller checks again in a worker thread
                return [exc.message]
            except RecursionError:
                return ["the answer is nested too deeply to check"]
            except re.error as exc:  # a schema that skipped ``runner validate`` (a client's, a built one)
                return [f"the schema cannot be used: a pattern is not a regular expression ({exc})"]
            except Exception as exc:  # the same: an unknown type, a reference jsonschema cannot follow
                if not _is_schema_error(exc):
                    raise
                return [f"the schema cannot be used: {type(exc).__name__}: {one_line(str(exc), 200)}"]
        if len(problems) > MAX_PROBLEMS:
            more = len(problems) - MAX_PROBLEMS
            counted_all = len(found) < MAX_ERRORS_READ
            problems = [*problems[:MAX_PROBLEMS], f"and {more} more" if counted_all else "and more"]
        return problems

    @staticmethod
    def _messages(found: list[Any]) -> list[str]:
        errors = sorted(found, key=lambda e: [str(p) for p in e.path])
        return [f"at {json_path(tuple(e.absolute_path))}: {_clip(e)}" for e in errors]

    def _model_problems(self, value: Any) -> list[str]:
        """What the pydantic model's own validators say (beyond its JSON Schema); [] without a model."""
        if self.model is None:
            return []
        import pydantic

        try:
            self.model.model_validate(value)
        except pydantic.ValidationError as exc:
            return [
                f"at {json_path(tuple(e['loc']))}: {one_line(e['msg'], MAX_PROBLEM_CHARS)}"
                for e in exc.errors()[:MAX_ERRORS_READ]
            ]
        return []

    def instance(self, value: Any) -> Any:
        """``value`` as Python callers get it: a pydantic instance for a model, else the value itself."""
        return self.model.model_validate(value) if self.model is not None else value


def _is_schema_error(exc: Exception) -> bool:
    """Whether jsonschema (or referencing, under it) raised because the schema itself is broken."""
    return type(exc).__module__.split(".")[0] in ("jsonschema", "referencing")


def _is_model(obj: Any) -> bool:
    import pydantic

    return isinstance(obj, type) and issubclass(obj, pydantic.BaseModel)


def load_model(target: str, base_dir: Path, *, reload: bool = False) -> Any:
    """The pydantic model class named ``module:Class``; ``ConfigError`` when it is not one.

    ``reload`` imports its module again (a hot reload: an edited model takes effect)."""
    module_name, _, attribute = target.partition(":")
    # what the module prints as it loads goes to stderr: stdout carries the answer (or JSON lines)
    with contextlib.redirect_stdout(sys.stderr):
        module = import_module(module_name, base_dir, reload=reload)
    if not hasattr(module, attribute):
        classes = [n for n in dir(module) if not n.startswith("_") and _is_model(getattr(module, n))]
        close = difflib.get_close_matches(attribute, classes, n=1)
        raise ConfigError(
            f"module '{module_name}' has no class '{attribute}'"
            + (f" (did you mean '{close[0]}'?)" if close else "")
        )
    obj = getattr(module, attribute)
    if not _is_model(obj):
        kind = "a class" if isinstance(obj, type) else f"a {type(obj).__name__}"
        raise ConfigError(
            f"'{target}' is not a pydantic model (it is {kind})",
            hint="name a class that subclasses pydantic.BaseModel",
        )
    return obj


def load_output(config: OutputConfig, *, name: str | None = None, reload: bool = False) -> OutputSchema:
    """The ``OutputSchema`` of ``output:``; a ``python:`` model is imported (``ConfigError`` if not)."""
    if config.python is not None:
        model = load_model(config.python, config.base_dir, reload=reload)
        try:
            schema = model.model_json_schema()
        except Exception as exc:  # pydantic cannot describe some types (a callable field, ...)
            raise ConfigError(
                f"the JSON Schema of {config.python} cannot be made: "
                f"{type(exc).__name__}: {one_line(str(exc), 200)}"
            ) from None
        problems = schema_problems(schema)  # json_schema_extra and custom types can make any schema
        if problems:
            where, message = problems[0]
            at = f" at {format_path(where)}" if where else ""
            raise ConfigError(f"the JSON Schema of {config.python} is not usable{at}: {message}")
        return OutputSchema.named(schema, model.__name__, model=model, where=config.where)
    assert config.schema is not None
    title = config.schema.get("title")
    return OutputSchema.named(config.schema, title if isinstance(title, str) else name, where=config.where)
