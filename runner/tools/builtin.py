"""Built-in tool sources: ``builtin: <name>`` loads the toolset module ``toolsets.<name>``.

A toolset module defines ``OPTIONS_SCHEMA`` (the JSON Schema of its ``with:`` mapping, defaults
included, ``additionalProperties: false``) and ``build(options, ctx) -> list[Tool]``, and may define
``instructions(options, ctx) -> str | None`` (text for the system prompt: the ``skills`` list). It
validates ``with:`` against the schema (each problem becomes a ``ConfigError`` naming the toolset and
the option), fills the defaults and calls ``build`` with a ``ToolsetContext``: the agent file's folder
(relative paths in options start there), the session's exit stack (for clients and processes to
close) and the source's ``confirm``. Toolsets import heavy libraries inside ``build`` only, so
checking options stays cheap. What a toolset imports of the runner (``ToolsetContext``,
``builtin_tool``) is in ``runner/tools/toolset.py``, which knows nothing of ``toolsets``.
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil
import re
from contextlib import AsyncExitStack
from pathlib import Path
from types import ModuleType
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

import toolsets
from runner.agentfile.config import ToolSourceConfig
from runner.errors import ConfigError, ConfigErrors
from runner.tools.base import Tool
from runner.tools.sources import LoadedSource, SourceContext
from runner.tools.toolset import ToolsetContext, builtin_tool

__all__ = [
    "ToolsetContext",
    "available_toolsets",
    "builtin_tool",
    "load_source",
    "load_toolset",
    "validate_options",
]

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


def available_toolsets() -> list[str]:
    """The names ``builtin:`` accepts: the public modules of the ``toolsets`` package, sorted."""
    return sorted(
        info.name
        for info in pkgutil.iter_modules(toolsets.__path__)
        if not info.name.startswith("_") and _NAME.match(info.name)
    )


def load_toolset(name: str) -> ModuleType:
    """Import ``toolsets.<name>``; an unknown name is a ``ConfigError`` listing the known ones."""
    known = available_toolsets()
    if name not in known:
        close = difflib.get_close_matches(name, known, n=1)
        raise ConfigError(
            f"unknown builtin toolset {name!r}",
            hint=f"did you mean {close[0]!r}?" if close else f"choose one of: {', '.join(known)}",
        )
    module = importlib.import_module(f"toolsets.{name}")
    if not isinstance(getattr(module, "OPTIONS_SCHEMA", None), dict) or not callable(
        getattr(module, "build", None)
    ):
        raise ConfigError(f"builtin toolset {name!r} does not define OPTIONS_SCHEMA and build()")
    return module


def validate_options(
    name: str, options: dict[str, Any], schema: dict[str, Any], *, file: str = "", path: str = ""
) -> dict[str, Any]:
    """Check ``with:`` options against the toolset's schema; return them with defaults filled in.

    ``path`` is where the ``with:`` mapping sits in the agent file (``tools[2].with``); each problem
    is reported at the option's own path below it.
    """
    validator = Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(options), key=lambda e: [str(p) for p in e.absolute_path])
    problems = [
        problem for error in errors for problem in _describe(name, error, schema, file=file, path=path)
    ]
    if len(problems) == 1:
        raise problems[0]
    if problems:
        raise ConfigErrors(problems)
    defaults = {
        key: prop["default"] for key, prop in schema.get("properties", {}).items() if "default" in prop
    }
    return {**defaults, **options}


def check_source(spec: ToolSourceConfig, agent_path: Path) -> list[ConfigError]:
    """What ``runner validate`` can say about a ``builtin:`` source without opening it."""
    where = f"tools[{spec.index}].with"
    try:
        module = load_toolset(spec.target)
        validate_options(spec.target, spec.options, module.OPTIONS_SCHEMA, file=str(agent_path), path=where)
    except ConfigErrors as exc:
        return [_at_source(e, spec) for e in exc]
    except ConfigError as exc:
        return [_at_source(exc, spec)]
    return []


def _at_source(error: ConfigError, spec: ToolSourceConfig) -> ConfigError:
    """``error`` located at the source's entry when it has no line of its own."""
    if error.line:
        return error
    return ConfigError(
        error.message, file=error.file, line=spec.line, column=spec.column, path=error.path, hint=error.hint
    )


async def load_source(spec: ToolSourceConfig, ctx: SourceContext, stack: AsyncExitStack) -> LoadedSource:
    """Open a ``builtin:`` source: check its ``with:`` options and build the toolset's tools."""
    file = str(ctx.agent.path)
    where = f"tools[{spec.index}].with"
    try:
        module = load_toolset(spec.target)
    except ConfigError as exc:
        raise ConfigError(
            exc.message, file=file, path=f"tools[{spec.index}].builtin", hint=exc.hint
        ) from None
    options = validate_options(spec.target, spec.options, module.OPTIONS_SCHEMA, file=file, path=where)
    toolset_ctx = ToolsetContext(base_dir=spec.base_dir, stack=stack, confirm=spec.confirm, logger=ctx.logger)
    extra = getattr(module, "instructions", None)  # a toolset's text for the system prompt (skills)
    try:
        tools: list[Tool] = module.build(options, toolset_ctx)
        instructions = extra(options, toolset_ctx) if callable(extra) else None
    except ConfigError as exc:
        option_path = f"{where}.{exc.path}" if exc.path else where
        raise ConfigError(
            f"builtin toolset {spec.target!r}: {exc.message}", file=file, path=option_path, hint=exc.hint
        ) from None
    return LoadedSource(tools=tools, instructions=instructions)


def _describe(
    name: str, error: ValidationError, schema: dict[str, Any], *, file: str, path: str
) -> list[ConfigError]:
    """One jsonschema error as ConfigErrors that name the toolset, the option and what is wrong."""
    known = list(schema.get("properties", {}))
    option = ".".join(str(part) for part in error.absolute_path)

    def at(key: str) -> str:
        return ".".join(part for part in (path, key) if part)

    if error.validator == "additionalProperties" and not error.absolute_path:
        extra = [key for key in error.instance if key not in known]
        out = []
        for key in extra:
            close = difflib.get_close_matches(key, known, n=1)
            hint = f"did you mean {close[0]!r}?" if close else None
            if hint is None:
                hint = f"known options: {', '.join(known)}" if known else "this toolset takes no options"
            out.append(
                ConfigError(
                    f"builtin toolset {name!r}: unknown option {key!r}", file=file, path=at(key), hint=hint
                )
            )
        return out
    if error.validator == "required":
        missing = [key for key in error.validator_value if key not in error.instance]
        return [
            ConfigError(
                f"builtin toolset {name!r}: missing required option {key!r}",
                file=file,
                path=at(".".join(filter(None, (option, key)))),
                hint=_description(schema, key),
            )
            for key in missing
        ]
    return [
        ConfigError(
            f"builtin toolset {name!r}: option {option or 'with'!r}: {error.message}",
            file=file,
            path=at(option),
            hint=_description(schema, option.split(".", 1)[0]) if option else None,
        )
    ]


def _description(schema: dict[str, Any], key: str) -> str | None:
    prop = schema.get("properties", {}).get(key)
    return str(prop["description"]) if isinstance(prop, dict) and "description" in prop else None
