"""Tools from Python functions: the schema from type hints and docstring, context parameters injected.

``tools_from_module_path("pkg.mod:fn", base_dir=...)`` imports one function, ``"pkg.mod"`` every public
function defined in that module (source order). Parameters typed ``RunContext``, or named with double
underscores as in Open WebUI (``__ctx__``, ``__user__``, ...), are filled by the runner and never reach
the schema (Open WebUI freezes them with ``functools.partial``; here the call wrapper adds them).
Sync functions run in a worker thread, async ones are awaited.
"""

from __future__ import annotations

import contextlib
import difflib
import enum
import inspect
import json
import sys
import types
import typing
import warnings
from collections.abc import Callable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import typing_extensions
from pydantic import TypeAdapter, ValidationError

from runner.agentfile.config import ToolSourceConfig
from runner.agentfile.imports import import_module
from runner.errors import ConfigError, ToolError
from runner.tools.base import RunContext, Tool
from runner.tools.docstrings import parse_docstring
from runner.tools.schema import clean_schema, inline_refs
from runner.tools.sources import LoadedSource, SourceContext
from runner.tools.threads import run_in_thread

__all__ = [
    "CONTEXT_PARAMETERS",
    "json_default",
    "load_source",
    "parameter_schema",
    "tool_from_function",
    "tools_from_module_path",
]

_Injector = Callable[[RunContext], Any]

CONTEXT_PARAMETERS: Mapping[str, _Injector] = {
    "__ctx__": lambda ctx: ctx,
    "__context__": lambda ctx: ctx,
    "__session_id__": lambda ctx: ctx.session_id,
    "__agent__": lambda ctx: ctx.agent,
    "__vars__": lambda ctx: ctx.vars,
    "__workspace__": lambda ctx: ctx.workspace,
    "__logger__": lambda ctx: ctx.logger,
    # Open WebUI passes a user dict; a runner session has no user account, so it gets who runs what.
    "__user__": lambda ctx: {"session_id": ctx.session_id, "agent": ctx.agent, "vars": dict(ctx.vars)},
}
"""Double-underscore parameter names the runner fills, and how."""


async def load_source(spec: ToolSourceConfig, ctx: SourceContext, stack: AsyncExitStack) -> LoadedSource:
    """The ``python:`` loader of ``runner.tools.sources``; ``ctx.refresh`` re-imports edited modules."""
    return LoadedSource(tools_from_module_path(spec.target, base_dir=spec.base_dir, reload=ctx.refresh))


def tools_from_module_path(target: str, *, base_dir: Path, reload: bool = False) -> list[Tool]:
    """Import ``module:function`` (one tool) or ``module`` (its public functions), ``base_dir`` first.

    ``reload=True`` re-executes an already imported module (hot reload of edited tool files).
    """
    module_name, _, function_name = target.partition(":")
    module_name = module_name.strip()
    function_name = function_name.strip()
    if not module_name or (":" in target and not function_name):
        raise ConfigError(
            f"python tool {target!r} is not a valid import path",
            hint="write 'package.module:function' or 'package.module'",
        )
    module = import_module(module_name, base_dir=base_dir, reload=reload)
    source_id = module_name.rsplit(".", 1)[-1]
    if function_name:
        fn = getattr(module, function_name, None)
        if fn is None or not callable(fn):
            public = _public_functions(module)
            close = difflib.get_close_matches(function_name, [f.__name__ for f in public], n=1)
            hint = f"did you mean {close[0]!r}?" if close else None
            what = "has no function" if fn is None else "has a non-callable attribute"
            raise ConfigError(
                f"python tool {target!r}: module {module_name!r} {what} {function_name!r}", hint=hint
            )
        return [tool_from_function(fn, source_id=source_id)]
    functions = _public_functions(module)
    if not functions:
        raise ConfigError(
            f"python tool {target!r}: module {module_name!r} defines no public functions",
            hint="functions whose names start with '_' and imported functions are skipped",
        )
    return [tool_from_function(fn, source_id=source_id) for fn in functions]


def tool_from_function(fn: Callable[..., Any], *, source_id: str = "python") -> Tool:
    """Build a ``Tool`` from a function's signature, type hints and docstring.

    A runtime builds its tools once and keeps them for every session it serves.
    """
    return _build_tool(fn, source_id=source_id)


def _build_tool(fn: Callable[..., Any], *, source_id: str) -> Tool:
    name = getattr(fn, "__name__", type(fn).__name__)
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"python tool {name!r}: cannot read its signature ({exc})") from exc
    hints = _type_hints(fn, signature, name)
    doc = parse_docstring(inspect.getdoc(fn))
    plan = _CallPlan(fn=fn)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for param in signature.parameters.values():
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            plan.accepts_kwargs = True
            continue
        if param.kind is inspect.Parameter.VAR_POSITIONAL:
            continue
        hint = hints.get(param.name, inspect.Parameter.empty)
        injector = _context_injector(param, hint, tool_name=name)
        if injector is not None:
            plan.injected[param.name] = injector
            continue
        if hint is inspect.Parameter.empty and not (
            param.default is inspect.Parameter.empty or param.default is None
        ):
            hint = type(param.default)
        adapter, schema = _parameter_schema(hint, param_name=param.name, tool_name=name)
        if doc.params.get(param.name):
            schema["description"] = doc.params[param.name]
        if param.default is inspect.Parameter.empty:
            required.append(param.name)
        else:
            default = _json_default(param.default)
            if default is not _NO_DEFAULT:
                schema["default"] = default
        properties[param.name] = schema
        plan.arguments.append(_Argument(param.name, param.kind, param.default, adapter))
    parameters = clean_schema({"type": "object", "properties": properties, "required": required})
    return Tool(
        name=name,
        description=doc.description,
        parameters=parameters,
        source_kind="python",
        source_id=source_id,
        call=plan.call,
        # a plain sync function runs in a worker thread; anything else may await on the event loop
        isolated=plan.is_async or not (inspect.isfunction(fn) or inspect.ismethod(fn)),
    )


_NO_DEFAULT: Any = object()


@dataclass(frozen=True)
class _Argument:
    name: str
    kind: inspect._ParameterKind
    default: Any
    adapter: TypeAdapter[Any] | None


@dataclass
class _CallPlan:
    """How to turn validated JSON arguments into a call of ``fn``."""

    fn: Callable[..., Any]
    accepts_kwargs: bool = False
    arguments: list[_Argument] = field(default_factory=list)
    injected: dict[str, _Injector] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.is_async = inspect.iscoroutinefunction(self.fn)

    async def call(self, arguments: dict[str, Any], ctx: RunContext) -> Any:
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        for arg in self.arguments:
            if arg.name in arguments:
                value = _convert(arg, arguments[arg.name])
            elif arg.default is not inspect.Parameter.empty:
                value = arg.default
            else:
                raise ToolError(f"missing required argument {arg.name!r}")
            if arg.kind is inspect.Parameter.POSITIONAL_ONLY:
                args.append(value)
            else:
                kwargs[arg.name] = value
        if self.accepts_kwargs:
            known = {arg.name for arg in self.arguments}
            kwargs.update((k, v) for k, v in arguments.items() if k not in known and not k.startswith("__"))
        for name, inject in self.injected.items():
            kwargs[name] = inject(ctx)
        if self.is_async:
            result = await self.fn(*args, **kwargs)
        else:
            result = await run_in_thread(self.fn, *args, **kwargs)
        if inspect.isawaitable(result):
            result = await result
        return result


def _convert(arg: _Argument, value: Any) -> Any:
    """Turn a JSON value into the declared type (Enum member, dataclass, model ...)."""
    if arg.adapter is None:
        return value
    try:
        return arg.adapter.validate_python(value)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in (arg.name, *err['loc']))}: {err['msg']}" for err in exc.errors()
        )
        raise ToolError(f"invalid arguments: {problems}") from None


def _public_functions(module: types.ModuleType) -> list[Callable[..., Any]]:
    """Functions defined in ``module`` (not imported, no lambdas, no leading ``_``), in source order."""
    found: dict[int, Callable[..., Any]] = {}
    for attr, obj in vars(module).items():
        if attr.startswith("_") or not inspect.isfunction(obj) or obj.__module__ != module.__name__:
            continue
        if not obj.__name__.isidentifier():  # lambdas have no name a model could call
            continue
        found.setdefault(id(obj), obj)

    def line(fn: Callable[..., Any]) -> int:
        code = getattr(inspect.unwrap(fn), "__code__", None)
        return code.co_firstlineno if code is not None else 0

    return sorted(found.values(), key=line)


def _type_hints(fn: Callable[..., Any], signature: inspect.Signature, tool_name: str) -> dict[str, Any]:
    """Resolved type hints; when some cannot be resolved, resolve per parameter to say which."""
    with contextlib.suppress(Exception):
        return typing.get_type_hints(fn, include_extras=True)
    globalns = getattr(inspect.unwrap(fn), "__globals__", {})
    hints: dict[str, Any] = {}
    for param in signature.parameters.values():
        annotation = param.annotation
        if not isinstance(annotation, str):
            hints[param.name] = annotation
            continue
        try:
            hints[param.name] = eval(annotation, globalns)
        except Exception as exc:
            if annotation.rsplit(".", 1)[-1] == "RunContext":
                hints[param.name] = RunContext  # imported under TYPE_CHECKING only
            elif param.name.startswith("__"):
                hints[param.name] = Any
            else:
                raise ConfigError(
                    f"python tool {tool_name!r}: cannot resolve the type hint {annotation!r} of "
                    f"parameter {param.name!r} ({type(exc).__name__}: {exc})"
                ) from None
    return hints


def _context_injector(param: inspect.Parameter, hint: Any, *, tool_name: str) -> _Injector | None:
    """How the runner fills this parameter, or None when the model does."""
    if _is_run_context(hint):
        return CONTEXT_PARAMETERS["__ctx__"]
    if not param.name.startswith("__"):
        return None
    known = CONTEXT_PARAMETERS.get(param.name)
    if known is not None:
        return known
    if param.default is not inspect.Parameter.empty:
        default = param.default
        return lambda ctx: default
    raise ConfigError(
        f"python tool {tool_name!r}: parameter {param.name!r} looks like a runner-filled context "
        "parameter (double underscore) but the runner does not know it",
        hint=f"use one of {', '.join(CONTEXT_PARAMETERS)}, a RunContext parameter, or give it a default",
    )


def _is_run_context(hint: Any) -> bool:
    if typing.get_origin(hint) is typing.Annotated:
        return _is_run_context(typing.get_args(hint)[0])
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        return len(options) == 1 and _is_run_context(options[0])
    return isinstance(hint, type) and issubclass(hint, RunContext)


def _parameter_schema(
    hint: Any, *, param_name: str, tool_name: str
) -> tuple[TypeAdapter[Any] | None, dict[str, Any]]:
    """The JSON Schema of one parameter (self-contained) and the adapter that converts its values."""
    if hint is str:
        return None, {"type": "string"}
    if hint is Any or hint is inspect.Parameter.empty:
        return None, {}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # pydantic warns about defaults it cannot serialize
            adapter: TypeAdapter[Any] = TypeAdapter(_compat_typeddicts(hint, {}))
            schema = adapter.json_schema()
    except Exception as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(
            f"python tool {tool_name!r}: the type of parameter {param_name!r} ({_type_name(hint)}) "
            f"cannot be described as JSON Schema: {reason}",
            hint="use JSON-like types: str, int, float, bool, list, dict, Literal, Enum, TypedDict, "
            "dataclasses or pydantic models",
        ) from None
    return adapter, inline_refs(schema)


def parameter_schema(hint: Any, *, param_name: str, tool_name: str) -> dict[str, Any]:
    """The JSON Schema a parameter typed ``hint`` gets in a tool built from a function.

    ``runner diff`` builds the same schema from type hints it reads out of the source."""
    return _parameter_schema(hint, param_name=param_name, tool_name=tool_name)[1]


def json_default(value: Any) -> tuple[bool, Any]:
    """Whether a parameter default appears in the schema (not None, has a JSON form), and as what."""
    default = _json_default(value)
    return default is not _NO_DEFAULT, default


def _compat_typeddicts(tp: Any, seen: dict[int, Any]) -> Any:
    """Rebuild ``typing.TypedDict`` classes as ``typing_extensions`` ones (pydantic refuses them < 3.12)."""
    if sys.version_info >= (3, 12):
        return tp
    origin = typing.get_origin(tp)
    if origin is typing.Literal:
        return tp
    if origin is typing.Annotated:
        inner = typing.get_args(tp)[0]
        new_inner = _compat_typeddicts(inner, seen)
        return tp if new_inner is inner else typing.Annotated[(new_inner, *tp.__metadata__)]
    if isinstance(tp, type) and typing.is_typeddict(tp) and type(tp).__module__ == "typing":
        if id(tp) in seen:
            return seen[id(tp)] or dict[str, Any]  # a recursive TypedDict: its inner level is a plain dict
        seen[id(tp)] = None
        fields: dict[str, Any] = {}
        required_keys: frozenset[str] = getattr(tp, "__required_keys__", frozenset())
        for key, value in typing.get_type_hints(tp, include_extras=True).items():
            # An explicit Required/NotRequired wins: with string annotations Python 3.11 cannot see
            # it when it computes __required_keys__.
            required = key in required_keys
            if typing.get_origin(value) in (typing.Required, typing.NotRequired):
                required = typing.get_origin(value) is typing.Required
                value = typing.get_args(value)[0]
            wrapper = typing_extensions.Required if required else typing_extensions.NotRequired
            fields[key] = wrapper[_compat_typeddicts(value, seen)]
        rebuilt: Any = typing_extensions.TypedDict(tp.__name__, fields)  # type: ignore[misc]
        rebuilt.__doc__ = tp.__doc__
        rebuilt.__module__ = tp.__module__
        seen[id(tp)] = rebuilt
        return rebuilt
    args = typing.get_args(tp)
    if origin is None or not args:
        return tp
    new_args = tuple(_compat_typeddicts(arg, seen) for arg in args)
    if all(new is old for new, old in zip(new_args, args, strict=True)):
        return tp
    if origin in (typing.Union, types.UnionType):
        return typing.Union[new_args]  # noqa: UP007
    copy_with = getattr(tp, "copy_with", None)
    return copy_with(new_args) if copy_with is not None else origin[new_args]


def _json_default(value: Any) -> Any:
    """A parameter default as JSON, or ``_NO_DEFAULT`` when it has no JSON form (or is None)."""
    if value is None:
        return _NO_DEFAULT
    if isinstance(value, enum.Enum):
        value = value.value
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return _NO_DEFAULT
    return value


def _type_name(hint: Any) -> str:
    return getattr(hint, "__qualname__", None) or repr(hint)
