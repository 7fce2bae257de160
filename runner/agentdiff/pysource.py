"""Python tools and output models read from their source, for ``runner diff``: none of it runs.

A ``python:`` source's module is located as ``runner audit`` locates it (no parent package is
imported), parsed with ``ast``, and each public function becomes the ``Tool`` that
``runner.tools.python`` would build from the imported function: its description and parameter
descriptions from the docstring, each parameter's schema from its type hint through the same
``parameter_schema``. A hint is rebuilt only when it is plain (built-in types, ``typing``'s generics,
``Literal`` of constants, ``X | None``, ``Annotated`` with constant metadata), from a fixed table and
never by evaluating the source. Any other hint (a class of the module, a pydantic ``Field``) leaves
that parameter's schema empty, and the tool's note says "signature not read" and why. The tools
built here refuse to be called.
"""

from __future__ import annotations

import ast
import collections.abc
import difflib
import inspect
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.agentfile.config import ToolSourceConfig
from runner.audit.modules import locate_module
from runner.errors import ConfigError, ToolError
from runner.tools.base import RunContext, Tool
from runner.tools.docstrings import parse_docstring
from runner.tools.python import CONTEXT_PARAMETERS, json_default, parameter_schema
from runner.tools.schema import clean_schema

__all__ = ["model_from_source", "note_of", "tools_from_source"]

_TYPING = ("Any", "Optional", "Union", "List", "Dict", "Tuple", "Set", "FrozenSet", "Sequence", "Mapping")
_ABC = ("Sequence", "Mapping", "MutableSequence", "MutableMapping", "Iterable", "Collection")
#: Every type a hint may name to be read without the code (qualified name -> the object).
_PLAIN: dict[str, Any] = {
    **{
        f"builtins.{t.__name__}": t for t in (str, int, float, bool, bytes, list, dict, tuple, set, frozenset)
    },
    **{f"typing.{name}": getattr(typing, name) for name in (*_TYPING, "Iterable", "Literal", "Annotated")},
    **{f"collections.abc.{name}": getattr(collections.abc, name) for name in _ABC},
}
_UNREAD: Any = object()
_NO_VALUE: Any = object()
_MAX_DEPTH = 20
#: A module's source is read up to this size (a tool module is a few kB).
_MAX_SOURCE_BYTES = 5_000_000


class _NotPlain(Exception):
    """This hint or value cannot be known without running the module."""


@dataclass(frozen=True)
class _NotRun:
    """The call of a tool read from its source: what was not read exactly, and a refusal to run."""

    note: str | None

    async def __call__(self, arguments: dict[str, Any], ctx: RunContext) -> Any:
        raise ToolError("this tool was read from its source by runner diff: it cannot be called")


def note_of(tool: Tool) -> str | None:
    """What of a tool built here was not read exactly (None: all of it was, or it was imported)."""
    return tool.call.note if isinstance(tool.call, _NotRun) else None


def _top_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The module's statements, into ``if`` / ``try`` / ``with`` blocks but not into definitions."""
    for node in body:
        yield node
        if isinstance(node, (ast.If, ast.Try, ast.With)):
            for block in ("body", "orelse", "finalbody"):
                yield from _top_level(getattr(node, block, []))
            for handler in getattr(node, "handlers", []):
                yield from _top_level(handler.body)


class _Module:
    """A parsed module: what its top-level names are, its functions and classes, its constants."""

    def __init__(self, tree: ast.Module) -> None:
        #: A name -> the qualified name it imports, or None when the module defines it itself.
        self.names: dict[str, str | None] = {}
        self.functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        self.classes: dict[str, ast.ClassDef] = {}
        self.constants: dict[str, Any] = {}
        for node in _top_level(tree.body):
            self._bind(node)

    def _bind(self, node: ast.stmt) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                self.names[alias.asname or top] = alias.name if alias.asname else top
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                module = node.module if not node.level else None  # a relative import: the package's own
                self.names[alias.asname or alias.name] = f"{module}.{alias.name}" if module else None
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.names[node.name] = None
            self.functions.pop(node.name, None)  # the last definition wins, where it is
            self.functions[node.name] = node
        elif isinstance(node, ast.ClassDef):
            self.names[node.name] = None
            self.classes[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    self.names[target.id] = None
                    self.constants[target.id] = _literal(node.value)

    def qualified(self, node: ast.expr) -> str:
        """The qualified name a ``Name`` or ``a.b.c`` refers to; a name of the module is not plain."""
        if isinstance(node, ast.Name):
            if node.id not in self.names:
                return f"builtins.{node.id}"
            known = self.names[node.id]
            if known is None:
                raise _NotPlain
            return known.replace("typing_extensions.", "typing.", 1)
        if isinstance(node, ast.Attribute):
            base = self.qualified(node.value)
            return f"{base}.{node.attr}".replace("typing_extensions.", "typing.", 1)
        raise _NotPlain

    def hint(self, node: ast.expr | None, depth: int = 0) -> Any:
        """The type a hint names, built from ``_PLAIN``; ``_NotPlain`` for anything else."""
        if node is None:
            return inspect.Parameter.empty
        if depth > _MAX_DEPTH:
            raise _NotPlain
        if isinstance(node, ast.Constant) and node.value is None:
            return None
        if isinstance(node, ast.Constant) and isinstance(node.value, str):  # a quoted hint
            try:
                return self.hint(ast.parse(node.value.strip(), mode="eval").body, depth + 1)
            except SyntaxError:
                raise _NotPlain from None
        if isinstance(node, (ast.Name, ast.Attribute)):
            qualified = self.qualified(node)
            if qualified.rsplit(".", 1)[-1] == "RunContext":
                return RunContext
            if qualified not in _PLAIN:
                raise _NotPlain
            return _PLAIN[qualified]
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return typing.Union[self.hint(node.left, depth + 1), self.hint(node.right, depth + 1)]  # noqa: UP007
        if isinstance(node, ast.Subscript):
            return self._subscript(node, depth)
        raise _NotPlain

    def _subscript(self, node: ast.Subscript, depth: int) -> Any:
        origin = self.hint(node.value, depth + 1)
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if origin is typing.Literal:
            args: tuple[Any, ...] = tuple(_constant(item) for item in items)
        elif origin is typing.Annotated:
            args = (self.hint(items[0], depth + 1), *(_constant(item) for item in items[1:]))
        else:
            args = tuple(
                ... if isinstance(i, ast.Constant) and i.value is ... else self.hint(i, depth + 1)
                for i in items
            )
        try:
            return origin[args if len(args) > 1 else args[0]]
        except (TypeError, IndexError):
            raise _NotPlain from None

    def value(self, node: ast.expr) -> Any:
        """A default's value: a literal, or a module constant bound to one (else ``_NO_VALUE``)."""
        if isinstance(node, ast.Name) and self.names.get(node.id, "") is None:
            return self.constants.get(node.id, _NO_VALUE)
        return _literal(node)


def _literal(node: ast.expr | None) -> Any:
    if node is None:
        return _NO_VALUE
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _NO_VALUE


def _constant(node: ast.expr) -> Any:
    value = _literal(node)
    if value is _NO_VALUE or not isinstance(value, (str, int, float, bool, bytes, type(None))):
        raise _NotPlain
    return value


def _is_run_context(hint: Any) -> bool:
    if hint is RunContext:
        return True
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Annotated:
        return _is_run_context(args[0])
    return origin is typing.Union and [a for a in args if a is not type(None)] == [RunContext]


def _parameters(args: ast.arguments) -> Iterator[tuple[ast.arg, ast.expr | None]]:
    """Each parameter the model may fill or the runner injects, with its default (``*args`` and
    ``**kwargs`` give the schema nothing)."""
    positional = [*args.posonlyargs, *args.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults))
    yield from zip(positional, [*defaults, *args.defaults], strict=True)
    yield from zip(args.kwonlyargs, args.kw_defaults, strict=True)


def _tool(fn: ast.FunctionDef | ast.AsyncFunctionDef, module: _Module, *, source_id: str) -> Tool:
    """The tool ``runner.tools.python`` builds from this function, read from its definition."""
    name, doc = fn.name, parse_docstring(ast.get_docstring(fn))
    unread: list[str] = []
    properties: dict[str, Any] = {}
    required: list[str] = []
    for param, default in _parameters(fn.args):
        try:
            hint = module.hint(param.annotation)
        except _NotPlain:
            hint = _UNREAD
        if _is_run_context(hint):
            continue
        if param.arg.startswith("__"):
            if param.arg in CONTEXT_PARAMETERS or default is not None:
                continue
            raise ConfigError(
                f"python tool {name!r}: parameter {param.arg!r} looks like a runner-filled context "
                "parameter (double underscore) but the runner does not know it"
            )
        value = module.value(default) if default is not None else _NO_VALUE
        if hint is inspect.Parameter.empty and default is not None:
            hint = (
                _UNREAD if value is _NO_VALUE else (inspect.Parameter.empty if value is None else type(value))
            )
        if hint is _UNREAD:
            shown = ast.unparse(param.annotation or default or param)
            unread.append(
                f"parameter {param.arg!r} is {'typed' if param.annotation else 'defaulted to'} {shown}"
            )
            schema: dict[str, Any] = {}
        else:
            schema = parameter_schema(hint, param_name=param.arg, tool_name=name)
        if doc.params.get(param.arg):
            schema["description"] = doc.params[param.arg]
        if default is None:
            required.append(param.arg)
        elif value is _NO_VALUE:
            unread.append(f"the default of {param.arg!r} is {ast.unparse(default)}")
        else:
            has_default, shown_default = json_default(value)
            if has_default:
                schema["default"] = shown_default
        properties[param.arg] = schema
    notes = [f"signature not read: {'; '.join(unread)}"] if unread else []
    if fn.decorator_list:
        decorators = ", ".join("@" + ast.unparse(d) for d in fn.decorator_list)
        notes.append(f"read as written, without its decorators ({decorators})")
    return Tool(
        name=name,
        description=doc.description,
        parameters=clean_schema({"type": "object", "properties": properties, "required": required}),
        source_kind="python",
        source_id=source_id,
        call=_NotRun("; ".join(notes) or None),
    )


def _parse(module_name: str, base_dir: Path, *, folder: Path, what: str) -> _Module:
    """The parsed source of ``module_name`` as the import would find it, ``base_dir`` first."""
    found = locate_module(module_name, base_dir, folder=folder, repository=None)
    if found.where == "missing":
        raise ConfigError(f"{what}: {found.problem}")
    if found.file is None or found.file.suffix != ".py":
        raise ConfigError(
            f"{what}: module {module_name!r} has no Python source to read"
            + (f" ({found.file})" if found.file else " (it is built into Python)"),
            hint="runner diff --import-code imports it to read its tools",
        )
    try:
        size = found.file.stat().st_size
        if size > _MAX_SOURCE_BYTES:
            raise ConfigError(
                f"{what}: {found.file} is {size:,} bytes (the limit for reading a source: "
                f"{_MAX_SOURCE_BYTES:,})",
                hint="runner diff --import-code imports it to read its tools",
            )
        return _Module(ast.parse(found.file.read_bytes(), filename=str(found.file)))
    except (SyntaxError, ValueError, OSError, RecursionError, MemoryError) as exc:
        raise ConfigError(f"{what}: cannot read {found.file}: {type(exc).__name__}: {exc}") from None


def tools_from_source(spec: ToolSourceConfig, *, folder: Path) -> list[Tool]:
    """The tools of a ``python:`` source, read from its module's source (``folder``: the agent's)."""
    target = spec.target
    module_name, _, function_name = (part.strip() for part in target.partition(":"))
    if not module_name or (":" in target and not function_name):
        raise ConfigError(
            f"python tool {target!r} is not a valid import path",
            hint="write 'package.module:function' or 'package.module'",
        )
    module = _parse(module_name, spec.base_dir, folder=folder, what=f"python tool {target!r}")
    source_id = module_name.rsplit(".", 1)[-1]
    if function_name:
        fn = module.functions.get(function_name)
        if fn is not None:
            return [_tool(fn, module, source_id=source_id)]
        if function_name in module.names:  # imported or assigned: only the code knows what it is
            note = f"signature not read: {function_name!r} is not defined by a def in {module_name!r}"
            return [Tool(function_name, "", clean_schema(None), "python", source_id, _NotRun(note))]
        close = difflib.get_close_matches(function_name, list(module.functions), n=1)
        raise ConfigError(
            f"python tool {target!r}: module {module_name!r} has no function {function_name!r}",
            hint=f"did you mean {close[0]!r}?" if close else None,
        )
    public = [fn for name, fn in module.functions.items() if not name.startswith("_")]
    if not public:
        raise ConfigError(
            f"python tool {target!r}: module {module_name!r} defines no public functions",
            hint="functions whose names start with '_' and imported functions are skipped",
        )
    return [_tool(fn, module, source_id=source_id) for fn in sorted(public, key=lambda f: f.lineno)]


def model_from_source(target: str, base_dir: Path, *, folder: Path) -> dict[str, Any]:
    """An ``output: {python: module:Class}`` model as written: its bases, docstring and fields."""
    module_name, _, class_name = target.partition(":")
    try:
        module = _parse(module_name, base_dir, folder=folder, what=f"output model {target!r}")
    except ConfigError as exc:
        return {"python": target, "not read": exc.message}
    node = module.classes.get(class_name)
    if node is None:
        return {"python": target, "not read": f"no class {class_name!r} defined in {module_name!r}"}
    fields = {
        item.target.id: ast.unparse(item.annotation) + (f" = {ast.unparse(item.value)}" if item.value else "")
        for item in node.body
        if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
    }
    return {
        "python": target,
        "bases": [ast.unparse(b) for b in node.bases],
        "description": ast.get_docstring(node) or "",
        "fields": fields,
    }
