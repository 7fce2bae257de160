"""YAML reading that keeps where every value came from.

PyYAML composes the node graph (with line and column marks); this module walks it into plain
Python data while recording a ``SourceMap`` entry for every value and key, refusing duplicate
keys, binary input, complex keys and alias-expansion bombs, and interpolating ``${VAR}`` in
string values (see ``runner.agentfile.interpolate``). Every problem becomes a ``ConfigError`` that
carries the file, line and column.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from runner.agentfile.interpolate import MAX_INT_BITS, Interpolator
from runner.errors import ConfigError, ConfigErrors

__all__ = [
    "MAX_BYTES",
    "MAX_DEPTH",
    "MAX_NODES",
    "MAX_WRITTEN_NODES",
    "Document",
    "NodeInfo",
    "PathKey",
    "SourceMap",
    "compose",
    "error_at",
    "format_path",
    "load_document",
    "read_document",
    "read_text",
]

PathKey = tuple[str | int, ...]

#: Refuse documents whose alias expansion would produce more nodes than this.
MAX_NODES = 100_000
#: Refuse documents that write more keys and values than this (checked before they are composed).
MAX_WRITTEN_NODES = 2 * MAX_NODES
#: Refuse values nested deeper than this (an agent file needs a handful of levels).
MAX_DEPTH = 100
#: Refuse files larger than this many bytes (an agent file is a few KB).
MAX_BYTES = 5_000_000

_MERGE_TAG = "tag:yaml.org,2002:merge"
_STR_TAG = "tag:yaml.org,2002:str"
_COLLECTION_TAGS = frozenset(f"tag:yaml.org,2002:{name}" for name in ("map", "seq", "set", "omap", "pairs"))
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class NodeInfo:
    """Where one value (and its key, for mapping entries) is written; 1-based."""

    file: str
    line: int
    column: int
    key_line: int = 0
    key_column: int = 0
    block_scalar: bool = False


@dataclass
class SourceMap:
    """Positions of the values of a document, keyed by their path (``("tools", 0, "mcp")``)."""

    entries: dict[PathKey, NodeInfo] = field(default_factory=dict)

    def value(self, path: PathKey) -> NodeInfo | None:
        """The position of the value at ``path``, or of its nearest ancestor."""
        for depth in range(len(path), -1, -1):
            info = self.entries.get(path[:depth])
            if info is not None:
                return info
        return None

    def key(self, path: PathKey) -> NodeInfo | None:
        """The position of the key that holds ``path`` (the value's position for list items)."""
        info = self.entries.get(path)
        if info is not None and info.key_line:
            return NodeInfo(info.file, info.key_line, info.key_column)
        return self.value(path)

    def subtree(self, prefix: PathKey) -> dict[PathKey, NodeInfo]:
        """Entries at or under ``prefix``."""
        n = len(prefix)
        return {p: i for p, i in self.entries.items() if p[:n] == prefix}

    def drop_subtree(self, prefix: PathKey) -> None:
        """Forget every entry at or under ``prefix`` (a value that was replaced)."""
        for p in list(self.subtree(prefix)):
            del self.entries[p]


def format_path(path: PathKey) -> str:
    """``("tools", 2, "mcp")`` -> ``tools[2].mcp``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def error_at(
    message: str, info: NodeInfo | None, path: PathKey = (), *, key: bool = False, hint: str | None = None
) -> ConfigError:
    """A ``ConfigError`` located at ``info`` (its key position when ``key`` is true)."""
    if info is None:
        return ConfigError(message, path=format_path(path), hint=hint)
    line, column = (info.key_line, info.key_column) if key and info.key_line else (info.line, info.column)
    return ConfigError(message, file=info.file, line=line, column=column, path=format_path(path), hint=hint)


@dataclass
class Document:
    """One YAML file read into plain data, with its source map and interpolation results."""

    path: Path
    data: Any
    sources: SourceMap
    secrets: set[str] = field(default_factory=set)
    interpolated: set[PathKey] = field(default_factory=set)
    #: Values that stand in for one that could not be read (an unset ``${VAR}``, a bad tag): their
    #: error is already reported, so checks of these paths would only repeat it.
    faulty: set[PathKey] = field(default_factory=set)


def read_text(path: Path) -> str:
    """Read an agent file as UTF-8 text, refusing binary, oversized and empty files clearly."""
    name = str(path)
    try:
        if path.is_dir():
            raise IsADirectoryError(path)
        if path.exists() and not path.is_file():  # a device or a pipe could block or never end
            raise ConfigError("not a regular file", file=name)
        with path.open("rb") as handle:
            raw = handle.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError("file not found", file=name) from None
    except IsADirectoryError:
        raise ConfigError("is a directory, not an agent file", file=name) from None
    except OSError as exc:
        raise ConfigError(f"cannot read file: {exc.strerror or exc}", file=name) from None
    if len(raw) > MAX_BYTES:
        raise ConfigError(f"file is too large (the limit is {MAX_BYTES} bytes)", file=name)
    if b"\x00" in raw:
        raise ConfigError("this is a binary file, not a YAML agent file", file=name)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        line_start = raw.rfind(b"\n", 0, exc.start) + 1
        column = len(raw[line_start : exc.start].decode("utf-8-sig", errors="replace")) + 1
        raise ConfigError(
            f"not valid UTF-8 text (byte 0x{raw[exc.start]:02x})", file=name, line=line, column=column
        ) from None
    if not text.strip() or all(not ln.strip() or ln.lstrip().startswith("#") for ln in text.splitlines()):
        raise ConfigError("file is empty: an agent file needs at least `version` and `name`", file=name)
    return text


def _yaml_error(exc: yaml.YAMLError, name: str, text: str) -> ConfigError:
    if isinstance(exc, yaml.reader.ReaderError):  # a character YAML does not allow, e.g. a control one
        position = max(0, min(int(exc.position), len(text)))
        line = text.count("\n", 0, position) + 1
        column = position - (text.rfind("\n", 0, position) + 1) + 1
        char = exc.character if isinstance(exc.character, int) else ord(str(exc.character)[:1] or "?")
        return ConfigError(
            f"YAML syntax error: character U+{char:04X} is not allowed ({exc.reason})",
            file=name,
            line=line,
            column=column,
            hint="remove it, or write it as an escape in a double-quoted string",
        )
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    line = mark.line + 1 if mark is not None else 0
    column = mark.column + 1 if mark is not None else 0
    problem = getattr(exc, "problem", None) or str(exc)
    context = getattr(exc, "context", None)
    start = getattr(exc, "context_mark", None)
    if (
        context
        and context.startswith("while")
        and start is not None
        and mark is not None
        and start.line != mark.line
    ):
        context += f" that starts at line {start.line + 1}, column {start.column + 1}"
    message = f"YAML syntax error: {problem}" + (f" ({context})" if context else "")
    hint = None
    if "\t" in problem or "'\\t'" in problem or (mark is not None and _tab_at(text, mark.line)):
        message = "YAML syntax error: a tab character is used for indentation"
        hint = "YAML indents with spaces only; replace the tabs with spaces"
    return ConfigError(message, file=name, line=line, column=column, hint=hint)


def _tab_at(text: str, line_index: int) -> bool:
    lines = text.splitlines()
    if 0 <= line_index < len(lines):
        stripped = lines[line_index]
        indent = stripped[: len(stripped) - len(stripped.lstrip())]
        return "\t" in indent
    return False


def compose(text: str, name: str) -> yaml.Node | None:
    """Parse ``text`` into a YAML node graph (aliases shared, not expanded)."""
    try:
        _count_nodes(text, name)
        loader = _Loader(text)
        try:
            node: yaml.Node | None = loader.get_single_node()
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, name, text) from None
    return node


_NODE_EVENTS = (yaml.ScalarEvent, yaml.AliasEvent, yaml.SequenceStartEvent, yaml.MappingStartEvent)


def _count_nodes(text: str, name: str) -> None:
    """Refuse a document of more than ``MAX_WRITTEN_NODES`` nodes before composing it (which is slow)."""
    loader = _Loader(text)
    try:
        count = 0
        while loader.check_event():
            event = loader.get_event()
            if isinstance(event, _NODE_EVENTS):
                count += 1
                if count > MAX_WRITTEN_NODES:
                    mark = event.start_mark
                    line, column = (mark.line + 1, mark.column + 1) if mark is not None else (0, 0)
                    raise ConfigError(
                        f"the file holds more than {MAX_WRITTEN_NODES:,} keys and values "
                        "(an agent file holds a few hundred)",
                        file=name,
                        line=line,
                        column=column,
                    )
    finally:
        loader.dispose()


class _Walker:
    """Turns a node graph into data + a SourceMap, collecting every error it meets."""

    def __init__(self, name: str, interpolator: Interpolator) -> None:
        self.name = name
        self.interpolator = interpolator
        self.sources = SourceMap()
        self.errors: list[ConfigError] = []
        self.faulty: set[PathKey] = set()
        self.visited = 0
        self.active: set[int] = set()  # collections being walked: an alias to one of them recurses
        self.constructor = yaml.SafeLoader("")

    def info(self, node: yaml.Node, key: yaml.Node | None = None) -> NodeInfo:
        return NodeInfo(
            self.name,
            node.start_mark.line + 1,
            node.start_mark.column + 1,
            key.start_mark.line + 1 if key is not None else 0,
            key.start_mark.column + 1 if key is not None else 0,
            isinstance(node, yaml.ScalarNode) and node.style in ("|", ">"),
        )

    def fault(self, error: ConfigError, path: PathKey) -> None:
        """Record ``error`` for the value at ``path``, which is replaced by a stand-in."""
        self.errors.append(error)
        self.faulty.add(path)

    def walk(self, node: yaml.Node, path: PathKey, key: yaml.Node | None = None) -> Any:
        self.visited += 1
        if self.visited > MAX_NODES:
            raise error_at(
                f"the document expands to more than {MAX_NODES} values (an alias expansion bomb?)",
                self.sources.entries.get(path[:1], self.info(node)),
                path[:1],
                hint="agent files do not need deeply repeated anchors and aliases",
            )
        self.sources.entries[path] = self.info(node, key)
        if isinstance(node, yaml.ScalarNode):
            return self.scalar(node, path)
        if node.tag not in _COLLECTION_TAGS:
            tag = node.tag.replace("tag:yaml.org,2002:", "!!")
            self.fault(
                error_at(
                    f"unsupported YAML tag '{tag}'",
                    self.info(node),
                    path,
                    hint="agent files use plain YAML values; remove the tag",
                ),
                path,
            )
            return None
        if isinstance(node, yaml.MappingNode):
            return self.mapping(node, path)
        self.enter(node, path)
        try:
            return [self.walk(item, (*path, i)) for i, item in enumerate(node.value)]
        finally:
            self.active.discard(id(node))

    def enter(self, node: yaml.Node, path: PathKey) -> None:
        """Mark a collection as being walked; refuse recursion through aliases and deep nesting."""
        if id(node) in self.active:
            raise error_at(
                "an alias refers to a value that contains it (a recursive anchor)",
                self.info(node),
                path,
                hint="an agent file cannot hold a value that contains itself",
            )
        if len(path) > MAX_DEPTH:
            raise error_at(f"values are nested more than {MAX_DEPTH} levels deep", self.info(node), path[:1])
        self.active.add(id(node))

    def mapping(self, node: yaml.MappingNode, path: PathKey) -> dict[str, Any]:
        self.enter(node, path)
        try:
            return self.mapping_items(node, path)
        finally:
            self.active.discard(id(node))

    def mapping_items(self, node: yaml.MappingNode, path: PathKey) -> dict[str, Any]:
        result: dict[str, Any] = {}
        merged: dict[str, Any] = {}
        seen: dict[str, yaml.Node] = {}
        # merged values first, so that the positions of the mapping's own keys, which win, are kept
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                merged.update(self.merge_sources(value_node, path))
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                continue
            if not isinstance(key_node, yaml.ScalarNode):
                self.errors.append(
                    error_at("a key must be a plain name, not a list or mapping", self.info(key_node), path)
                )
                continue
            key = str(key_node.value)
            if key in seen:
                first = seen[key].start_mark.line + 1
                self.errors.append(
                    error_at(
                        f"duplicate key '{key}' (first defined on line {first})",
                        self.info(value_node, key_node),
                        (*path, key),
                        key=True,
                        hint="YAML would silently keep only the last one; remove one of them",
                    )
                )
                continue
            seen[key] = key_node
            if key in merged:
                self.sources.drop_subtree((*path, key))
            result[key] = self.walk(value_node, (*path, key), key_node)
        for key, value in merged.items():
            result.setdefault(key, value)
        return result

    def merge_sources(self, node: yaml.Node, path: PathKey) -> dict[str, Any]:
        """Values of a YAML merge key (``<<: *base`` or ``<<: [*a, *b]``); earlier ones win."""
        nodes = node.value if isinstance(node, yaml.SequenceNode) else [node]
        merged: dict[str, Any] = {}
        for item in reversed(nodes):
            if not isinstance(item, yaml.MappingNode):
                self.errors.append(error_at("'<<' must merge a mapping", self.info(item), path))
                continue
            merged.update(self.mapping(item, path))
        return merged

    def scalar(self, node: yaml.ScalarNode, path: PathKey) -> Any:
        if node.tag == _STR_TAG and "$" in node.value:
            try:
                return self.interpolator.expand(node.value, path, plain=not node.style)
            except ConfigError as exc:
                self.fault(error_at(exc.message, self.sources.entries[path], path, hint=exc.hint), path)
                return node.value
        try:
            value = self.constructor.construct_object(node)
        except Exception as exc:  # an unknown tag, or `!!int abc`, `!!bool maybe`, bad `!!binary`
            tag = node.tag.replace("tag:yaml.org,2002:", "!!")
            problem = str(getattr(exc, "problem", "") or "")
            if "could not determine a constructor" in problem:
                message, hint = (
                    f"unsupported YAML tag '{tag}'",
                    "agent files use plain YAML values; remove the tag",
                )
            elif "integer string conversion" in str(exc):
                message, hint = f"integer with more than 4,300 digits: {_describe_scalar(node.value)}", None
            else:
                message, hint = f"invalid {tag} value: {_describe_scalar(node.value)}", None
            self.fault(error_at(message, self.info(node), path, hint=hint), path)
            return None
        if isinstance(value, _dt.datetime | _dt.date):
            return value.isoformat()
        if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > MAX_INT_BITS:
            self.fault(
                error_at(f"integer too large to use: {_describe_scalar(node.value)}", self.info(node), path),
                path,
            )
            return None
        if isinstance(value, bytes):
            self.fault(error_at("binary (!!binary) values are not supported", self.info(node), path), path)
            return None
        return value


def _describe_scalar(text: str) -> str:
    return repr(text) if len(text) <= 40 else repr(text[:37]) + "..."


def load_document(path: Path, *, env: Mapping[str, str]) -> Document:
    """Read one YAML file into a ``Document``; raises ``ConfigError(s)`` with locations."""
    doc, errors = read_document(path, env=env)
    if errors:
        raise ConfigErrors(errors)
    return doc


def read_document(path: Path, *, env: Mapping[str, str]) -> tuple[Document, list[ConfigError]]:
    """Read one YAML file, keeping on past the problems that leave the rest readable.

    An unset ``${VAR}``, a duplicate key or a bad tag is returned with the document (the value is
    replaced by a stand-in recorded in ``Document.faulty``); a problem that leaves nothing to read
    (a syntax error, an alias bomb, a top level that is not a mapping) is raised.
    """
    name = str(path)
    text = read_text(path)
    node = compose(text, name)
    if node is None:
        raise ConfigError("file is empty: an agent file needs at least `version` and `name`", file=name)
    interpolator = Interpolator(env)
    walker = _Walker(name, interpolator)
    data = walker.walk(node, ())
    if not isinstance(data, dict):
        if walker.errors:
            raise ConfigErrors(walker.errors)
        kind = "a list" if isinstance(data, list) else f"a single value ({type(data).__name__})"
        raise error_at(
            f"the top level must be a mapping of keys (version, name, model, ...), not {kind}",
            walker.sources.entries.get(()),
        )
    doc = Document(path, data, walker.sources, interpolator.secrets, interpolator.interpolated, walker.faulty)
    return doc, walker.errors


def parse_data(text: str, name: str) -> tuple[Any, SourceMap]:
    """A YAML (or JSON) document that is not an agent file (an output schema), with where each value
    is; no ``${VAR}`` expansion. ``ConfigError(s)`` with locations when it cannot be read."""
    node = compose(text, name)
    if node is None:
        raise ConfigError("the file is empty", file=name)
    walker = _Walker(name, Interpolator({}, expand=False))
    data = walker.walk(node, ())
    if walker.errors:
        raise ConfigErrors(walker.errors)
    return data, walker.sources
