"""The ``files`` toolset: read, write, list and search files inside one ``root`` folder.

Tools: ``files_read``, ``files_write`` (left out when ``allow_write: false``), ``files_list`` and
``files_search``. Options: ``root`` (required; relative to the agent file; created, with its parents,
when missing), ``max_read_chars`` (default 50000), ``allow_write`` (default true) and ``max_results``
(entries listed / matches found per call, default 200).

Confinement: every path is joined to the root and resolved (``..`` collapsed, symlinks followed) and
must land inside the resolved root, so ``../x``, absolute paths elsewhere and symlinks pointing out of
the root are refused with a tool error. Listing and searching never follow directory symlinks and
skip files whose symlinks lead outside. (A symlink swapped in between the check and the open is not
guarded against: the toolset confines a model, not a hostile local user.)
"""

from __future__ import annotations

import asyncio
import fnmatch
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner.errors import ToolError
from runner.tools.base import RunContext, Tool, ToolCallable
from runner.tools.builtin import builtin_tool

if TYPE_CHECKING:
    from runner.tools.builtin import ToolsetContext

__all__ = ["OPTIONS_SCHEMA", "build"]

OPTIONS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "root": {
            "type": "string",
            "minLength": 1,
            "description": "the folder the tools may use (relative to the agent file; created if missing)",
        },
        "max_read_chars": {
            "type": "integer",
            "minimum": 1,
            "default": 50_000,
            "description": "the most characters files_read returns per call",
        },
        "allow_write": {
            "type": "boolean",
            "default": True,
            "description": "offer files_write (false: read-only)",
        },
        "max_results": {
            "type": "integer",
            "minimum": 1,
            "default": 200,
            "description": "the most entries files_list and matches files_search return per call",
        },
    },
    "required": ["root"],
    "additionalProperties": False,
}

_SKIPPED_DIRS = frozenset(
    {".git", ".hg", ".svn", ".venv", "node_modules", "__pycache__"}
    | {".mypy_cache", ".ruff_cache", ".pytest_cache"}
)
_SNIFF_BYTES = 8192
_MAX_SEARCH_FILE_BYTES = 5_000_000
_MAX_MATCH_LINE_CHARS = 200


def build(options: dict[str, Any], ctx: ToolsetContext) -> list[Tool]:
    """The file tools, confined to the ``root`` option (created when missing)."""
    root = ctx.folder(str(options["root"]), option="root", what="the root folder")
    files = _Files(
        root, max_read_chars=int(options["max_read_chars"]), max_results=int(options["max_results"])
    )
    tools = [files.read_tool()]
    if options["allow_write"]:
        tools.append(files.write_tool())
    tools += [files.list_tool(), files.search_tool()]
    return tools


def _tool(
    name: str, description: str, properties: dict[str, Any], required: list[str], call: ToolCallable
) -> Tool:
    return builtin_tool("files", name, description, properties, required, call)


_PATH_NOTE = "Paths are relative to the workspace root ('.' is the root); nothing outside it is reachable."


class _Files:
    """The tool implementations, sharing one resolved root and the limits."""

    def __init__(self, root: Path, *, max_read_chars: int, max_results: int) -> None:
        self.root = root
        self.max_read_chars = max_read_chars
        self.max_results = max_results

    def read_tool(self) -> Tool:
        """``files_read``: a text file, whole or a line range."""

        async def call(arguments: dict[str, Any], run: RunContext) -> str:
            start = arguments.get("start_line")
            end = arguments.get("end_line")
            return await asyncio.to_thread(self.read, str(arguments["path"]), start, end)

        return _tool(
            "files_read",
            f"Read a text file, optionally only lines start_line..end_line (1-based, inclusive). "
            f"At most {self.max_read_chars} characters are returned; a note says how to read on. "
            + _PATH_NOTE,
            {
                "path": {"type": "string", "description": "the file to read"},
                "start_line": {"type": "integer", "minimum": 1, "description": "first line to return"},
                "end_line": {"type": "integer", "minimum": 1, "description": "last line to return"},
            },
            ["path"],
            call,
        )

    def write_tool(self) -> Tool:
        """``files_write``: create or replace (or append to) a text file."""

        async def call(arguments: dict[str, Any], run: RunContext) -> str:
            path, content = str(arguments["path"]), str(arguments["content"])
            return await asyncio.to_thread(self.write, path, content, bool(arguments.get("append", False)))

        return _tool(
            "files_write",
            "Write text to a file, replacing its content (or appending with append=true). Missing "
            "parent folders are created. " + _PATH_NOTE,
            {
                "path": {"type": "string", "description": "the file to write"},
                "content": {"type": "string", "description": "the complete text to write"},
                "append": {"type": "boolean", "description": "add to the end instead of replacing"},
            },
            ["path", "content"],
            call,
        )

    def list_tool(self) -> Tool:
        """``files_list``: the entries of a folder, a few levels deep."""

        async def call(arguments: dict[str, Any], run: RunContext) -> str:
            path = str(arguments.get("path") or ".")
            pattern = arguments.get("pattern")
            depth = int(arguments.get("depth", 2))
            return await asyncio.to_thread(self.list, path, pattern, depth)

        return _tool(
            "files_list",
            "List files and folders (folders end with '/', files show their size) under a folder, "
            f"up to `depth` levels deep. Version-control and cache folders are not expanded. {_PATH_NOTE}",
            {
                "path": {"type": "string", "description": "the folder to list (default: the root)"},
                "pattern": {"type": "string", "description": "only entries matching this glob, e.g. '*.py'"},
                "depth": {"type": "integer", "minimum": 1, "maximum": 20, "description": "default 2"},
            },
            [],
            call,
        )

    def search_tool(self) -> Tool:
        """``files_search``: lines containing a text or matching a regex."""

        async def call(arguments: dict[str, Any], run: RunContext) -> str:
            return await asyncio.to_thread(
                self.search,
                str(arguments["query"]),
                str(arguments.get("path") or "."),
                regex=bool(arguments.get("regex", False)),
                pattern=arguments.get("pattern"),
                case_sensitive=bool(arguments.get("case_sensitive", False)),
            )

        return _tool(
            "files_search",
            "Search text files for lines containing `query` (or matching it as a Python regex with "
            f"regex=true); returns 'path:line: text' for at most {self.max_results} matches. {_PATH_NOTE}",
            {
                "query": {"type": "string", "minLength": 1, "description": "the text or regex to find"},
                "path": {"type": "string", "description": "a folder or file to search (default: the root)"},
                "regex": {"type": "boolean", "description": "treat query as a regular expression"},
                "pattern": {"type": "string", "description": "only files whose name matches this glob"},
                "case_sensitive": {"type": "boolean", "description": "match case (default: ignore case)"},
            },
            ["query"],
            call,
        )

    def resolve(self, raw: str) -> Path:
        """The real path of ``raw`` below the root; anything resolving outside it is a ToolError."""
        text = raw.strip() or "."
        try:
            target = (self.root / text).resolve()
        except (OSError, ValueError, RuntimeError) as exc:
            raise ToolError(f"Invalid path {raw!r}: {exc}") from None
        if target != self.root and not target.is_relative_to(self.root):
            raise ToolError(
                f"Path {raw!r} is outside the root folder and cannot be used; give a path inside the "
                "root, relative to it (e.g. 'notes/todo.md')."
            )
        return target

    def read(self, raw: str, start_line: int | None, end_line: int | None) -> str:
        """The text of a file (or of lines start..end), cut at ``max_read_chars`` with a note."""
        target = self._existing(raw, want_file=True)
        if _is_binary(target):
            raise ToolError(
                f"{raw!r} is a binary file ({target.stat().st_size} bytes); only text can be read."
            )
        start = start_line or 1
        if end_line is not None and end_line < start:
            raise ToolError(f"end_line ({end_line}) is before start_line ({start}).")
        shown: list[str] = []
        size, last, total, cut = 0, 0, 0, False
        with target.open(encoding="utf-8", errors="replace", newline="") as handle:
            for total, line in enumerate(handle, 1):  # ``total`` ends as the line count
                if total < start or (end_line is not None and total > end_line) or cut:
                    continue
                if size + len(line) > self.max_read_chars:
                    cut = True
                    if not shown:  # one line longer than the limit: show its beginning
                        shown.append(line[: self.max_read_chars])
                        last = total
                    continue
                shown.append(line)
                size += len(line)
                last = total
        if total == 0:
            return "[empty file]"
        if start > total:
            raise ToolError(f"{raw!r} has only {total} lines; start_line {start} is past the end.")
        text = "".join(shown)
        if cut:
            more = f"start_line={last + 1}" if last < total else "a narrower range"
            return (
                f"{text}\n[cut at {self.max_read_chars} characters: showing lines {start}-{last} "
                f"of {total}; read on with {more}]"
            )
        if start_line is not None or end_line is not None:
            return f"{text}\n[lines {start}-{last} of {total}]"
        return text

    def write(self, raw: str, content: str, append: bool) -> str:
        """Write (or append) ``content``; parent folders inside the root are created."""
        target = self.resolve(raw)
        if target.is_dir():
            raise ToolError(f"{raw!r} is a folder; give a file path.")
        existed = target.exists()
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            with target.open("a" if append else "w", encoding="utf-8", newline="") as handle:
                handle.write(content)
        except OSError as exc:
            raise ToolError(f"Cannot write {raw!r}: {exc.strerror}") from None
        verb = "Appended" if append else ("Replaced the content of" if existed else "Created")
        return f"{verb} {self._relative(target)} ({len(content)} characters written)."

    def list(self, raw: str, pattern: str | None, depth: int) -> str:
        """Folder entries up to ``depth`` levels, optionally filtered by a glob, capped with a note."""
        base = self._existing(raw, want_file=False)
        lines: list[str] = []
        more = 0
        for path, is_dir in _walk(base, depth=depth, skip=_SKIPPED_DIRS):
            relative = path.relative_to(base).as_posix()
            if pattern and not (fnmatch.fnmatch(path.name, pattern) or fnmatch.fnmatch(relative, pattern)):
                continue
            if len(lines) >= self.max_results:
                more += 1
                continue
            lines.append(self._entry(path, relative, is_dir))
        where = self._relative(base)
        if not lines:
            return f"No entries in {where}" + (f" match {pattern!r}." if pattern else ".")
        header = f"{where}/ ({len(lines) + more} entries{f' matching {pattern!r}' if pattern else ''}):"
        note = [f"[{more} more entries not shown; narrow with path, pattern or depth]"] if more else []
        return "\n".join([header, *lines, *note])

    def search(self, query: str, raw: str, *, regex: bool, pattern: str | None, case_sensitive: bool) -> str:
        """Matching lines as ``path:line: text``, at most ``max_results``."""
        flags = 0 if case_sensitive else re.IGNORECASE
        try:
            compiled = re.compile(query if regex else re.escape(query), flags)
        except re.error as exc:
            raise ToolError(f"Invalid regular expression {query!r}: {exc}") from None
        base = self.resolve(raw)
        if not base.exists():
            raise ToolError(f"No such file or folder: {raw!r}.")
        candidates = [(base, False)] if base.is_file() else _walk(base, depth=None, skip=_SKIPPED_DIRS)
        matches: list[str] = []
        more = 0
        for path, is_dir in candidates:
            if is_dir or (pattern and not fnmatch.fnmatch(path.name, pattern)):
                continue
            for number, line in self._matching_lines(path, compiled):
                if len(matches) >= self.max_results:
                    more += 1
                    continue
                text = line.strip()
                if len(text) > _MAX_MATCH_LINE_CHARS:
                    text = text[:_MAX_MATCH_LINE_CHARS] + "..."
                matches.append(f"{self._relative(path)}:{number}: {text}")
        if not matches:
            return f"No matches for {query!r} in {self._relative(base)}."
        note = (
            [f"[{more} more matches not shown; narrow with path, pattern or a longer query]"] if more else []
        )
        return "\n".join([*matches, *note])

    def _existing(self, raw: str, *, want_file: bool) -> Path:
        target = self.resolve(raw)
        if not target.exists():
            raise ToolError(f"No such {'file' if want_file else 'folder'}: {raw!r}.")
        if want_file and target.is_dir():
            raise ToolError(f"{raw!r} is a folder; use files_list to see what it holds.")
        if not want_file and not target.is_dir():
            raise ToolError(f"{raw!r} is a file, not a folder; use files_read to read it.")
        return target

    def _matching_lines(self, path: Path, compiled: re.Pattern[str]) -> Iterator[tuple[int, str]]:
        """Lines of one text file that match; files outside the root, binary or huge are skipped."""
        try:
            real = path.resolve()
            if not real.is_relative_to(self.root) or not real.is_file():
                return
            if real.stat().st_size > _MAX_SEARCH_FILE_BYTES or _is_binary(real):
                return
            with real.open(encoding="utf-8", errors="replace") as handle:
                for number, line in enumerate(handle, 1):
                    if compiled.search(line):
                        yield number, line
        except OSError:
            return

    def _relative(self, path: Path) -> str:
        return "." if path == self.root else path.relative_to(self.root).as_posix()

    @staticmethod
    def _entry(path: Path, relative: str, is_dir: bool) -> str:
        if path.is_symlink():
            return f"{relative} (symlink)"
        if is_dir:
            return f"{relative}/"
        try:
            return f"{relative} ({_size(path.stat().st_size)})"
        except OSError:
            return relative


def _walk(base: Path, *, depth: int | None, skip: frozenset[str]) -> Iterator[tuple[Path, bool]]:
    """Entries under ``base`` (sorted, folders descended in place), never following symlinks."""
    try:
        entries = sorted(os.scandir(base), key=lambda entry: entry.name)
    except OSError:
        return
    for entry in entries:
        is_dir = entry.is_dir(follow_symlinks=False)
        path = Path(entry.path)
        yield path, is_dir
        if is_dir and entry.name not in skip and (depth is None or depth > 1):
            yield from _walk(path, depth=None if depth is None else depth - 1, skip=skip)


def _is_binary(path: Path) -> bool:
    with path.open("rb") as handle:
        return b"\0" in handle.read(_SNIFF_BYTES)


def _size(count: int) -> str:
    if count < 1024:
        return f"{count} B"
    if count < 1024 * 1024:
        return f"{count / 1024:.1f} KB"
    return f"{count / (1024 * 1024):.1f} MB"
