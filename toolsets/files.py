"""The ``files`` toolset: read, write, list and search files inside one ``root`` folder.

Tools: ``files_read``, ``files_write`` (left out when ``allow_write: false``), ``files_list`` and
``files_search``. Options: ``root`` (required; relative to the agent file; created, with its parents,
when missing), ``max_read_chars`` (default 50000), ``allow_write`` (default true), ``max_results``
(entries listed / matches found per call, default 200) and ``search_timeout_s`` (default 20).

Bounded work: ``files_read`` keeps at most ``max_read_chars`` characters, and no more than the run's
``limits.tool_output_chars`` leaves room for (so its own note, saying how to read on, is never cut
off); the file is read in chunks (``_files_read``), so a huge single line costs one chunk of memory.
``files_search`` matches with RE2, in linear time and without holding the GIL, over lines read in
bounded pieces, and stops at ``search_timeout_s`` with a tool error naming the limit
(``_files_search`` has the syntax and the bounds). A folder search skips files over 5 MB (a note
names them); a file named as ``path`` is searched whatever its size. Both tools run on the runner's
worker threads and stop early when their call is abandoned (a tool timeout, Ctrl+C).

Confinement: every path is stripped of surrounding spaces, joined to the root and resolved (``..``
collapsed, symlinks followed) and must land inside the resolved root, so ``../x``, absolute paths
elsewhere and symlinks pointing out of the root are refused with a tool error. Permission rules see
that resolved path relative to the root too (``Tool.path_view``), so ``" secrets/key.txt"``,
``/abs/root/secrets/key.txt`` and a symlink to ``secrets/`` all meet ``files_read(path=secrets/*)``.
``files_write`` refuses any path inside the runner's cache of revisions (``$RUNNER_HOME/git``,
any materialized tree), even when the root covers it. Listing and searching never follow directory
symlinks and skip files whose symlinks lead outside. (A symlink swapped in between the check and the
open is not guarded against: the toolset confines a model, not a hostile local user.)
"""

from __future__ import annotations

import dataclasses
import fnmatch
import os
import threading
import time
from collections.abc import Callable, Iterator, MutableSequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from runner.agentfile.revisions import in_cache
from runner.errors import ToolError
from runner.tools.base import RunContext, Tool, ToolCallable
from runner.tools.threads import run_in_thread
from runner.tools.toolset import builtin_tool
from toolsets._files_read import read_excerpt
from toolsets._files_search import Matcher, SearchStopped, compile_query

if TYPE_CHECKING:
    from runner.tools.toolset import ToolsetContext

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
        "search_timeout_s": {
            "type": "number",
            "exclusiveMinimum": 0,
            "default": 20,
            "description": "the longest a files_search call may run; past it, it stops with an error",
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
_NOTE_ROOM = 300  # characters kept free for a cut note under limits.tool_output_chars
_LISTED_SKIPS = 5

T = TypeVar("T")


def build(options: dict[str, Any], ctx: ToolsetContext) -> list[Tool]:
    """The file tools, confined to the ``root`` option (created when missing)."""
    root = ctx.folder(str(options["root"]), option="root", what="the root folder")
    files = _Files(
        root,
        max_read_chars=int(options["max_read_chars"]),
        max_results=int(options["max_results"]),
        search_timeout_s=float(options["search_timeout_s"]),
    )
    tools = [files.read_tool()]
    if options["allow_write"]:
        tools.append(files.write_tool())
    tools += [files.list_tool(), files.search_tool()]
    return [dataclasses.replace(tool, path_view=files.view) for tool in tools]


def _tool(
    name: str, description: str, properties: dict[str, Any], required: list[str], call: ToolCallable
) -> Tool:
    return builtin_tool("files", name, description, properties, required, call)


_PATH_NOTE = "Paths are relative to the workspace root ('.' is the root); nothing outside it is reachable."


async def _abandonable(work: Callable[[threading.Event], T]) -> T:
    """``work(stop)`` on a worker thread; ``stop`` is set when this call ends (a timeout, Ctrl+C)."""
    stop = threading.Event()
    try:
        return await run_in_thread(work, stop)
    finally:
        stop.set()


def _room(output_chars: int) -> int | None:
    """The characters a result may use under ``tool_output_chars`` with its note kept (None: no limit)."""
    if output_chars <= 0:
        return None
    return output_chars - _NOTE_ROOM if output_chars > 2 * _NOTE_ROOM else max(1, output_chars // 2)


class _Files:
    """The tool implementations, sharing one resolved root and the limits."""

    def __init__(self, root: Path, *, max_read_chars: int, max_results: int, search_timeout_s: float) -> None:
        self.root = root
        self.max_read_chars = max_read_chars
        self.max_results = max_results
        self.search_timeout_s = search_timeout_s

    def read_tool(self) -> Tool:
        """``files_read``: a text file, whole or a line range."""

        async def call(arguments: dict[str, Any], run: RunContext) -> str:
            path, start, end = str(arguments["path"]), arguments.get("start_line"), arguments.get("end_line")
            room = _room(run.output_chars)
            limit = self.max_read_chars if room is None else min(self.max_read_chars, room)
            return await _abandonable(lambda stop: self.read(path, start, end, limit=limit, stop=stop))

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
            return await run_in_thread(self.write, path, content, bool(arguments.get("append", False)))

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
            return await run_in_thread(self.list, path, pattern, depth)

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
            query, path = str(arguments["query"]), str(arguments.get("path") or ".")
            regex = bool(arguments.get("regex", False))
            pattern, case_sensitive = arguments.get("pattern"), bool(arguments.get("case_sensitive", False))
            room = _room(run.output_chars)
            return await _abandonable(
                lambda stop: self.search(
                    query,
                    path,
                    regex=regex,
                    pattern=pattern,
                    case_sensitive=case_sensitive,
                    room=room,
                    stop=stop,
                )
            )

        return _tool(
            "files_search",
            "Search text files for lines containing `query` (or matching it as a regular expression with "
            "regex=true: RE2 syntax, i.e. Python's without backreferences or look-around); returns "
            f"'path:line: text' for at most {self.max_results} matches. A search stops after "
            f"{self.search_timeout_s:g} s. {_PATH_NOTE}",
            {
                "query": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 4096,
                    "description": "the text or regex to find",
                },
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

    def view(self, raw: str) -> str | None:
        """The path ``raw`` names as these tools use it, relative to the root (None: refused), for
        permission rules to match."""
        try:
            return self._relative(self.resolve(raw))
        except ToolError:
            return None

    def read(
        self, raw: str, start_line: int | None, end_line: int | None, *, limit: int, stop: threading.Event
    ) -> str:
        """The text of a file (or of lines start..end), cut at ``limit`` characters with a note."""
        target = self._existing(raw, want_file=True)
        if _is_binary(target):
            raise ToolError(
                f"{raw!r} is a binary file ({target.stat().st_size} bytes); only text can be read."
            )
        start = start_line or 1
        if end_line is not None and end_line < start:
            raise ToolError(f"end_line ({end_line}) is before start_line ({start}).")
        part = read_excerpt(target, start=start, end=end_line, limit=limit, stop=stop)
        if part.total == 0:
            return "[empty file]"
        if start > part.total:
            raise ToolError(f"{raw!r} has only {part.total} lines; start_line {start} is past the end.")
        if part.partial_line:
            onward = f"; read on with start_line={part.last + 1}" if part.last < part.total else ""
            return (
                f"{part.text}\n[cut at {limit} characters (the file is {part.size} bytes): line {part.last} "
                f"alone is longer, only its beginning is shown (files_search finds text in the rest)"
                f"{onward}]"
            )
        if part.cut:
            return (
                f"{part.text}\n[cut at {limit} characters (the file is {part.size} bytes): showing lines "
                f"{start}-{part.last} of {part.total}; read on with start_line={part.last + 1}]"
            )
        if start_line is not None or end_line is not None:
            return f"{part.text}\n[lines {start}-{part.last} of {part.total}]"
        return part.text

    def write(self, raw: str, content: str, append: bool) -> str:
        """Write (or append) ``content``; parent folders inside the root are created."""
        target = self.resolve(raw)
        if in_cache(target):
            raise ToolError(
                f"{raw!r} is inside the runner's own cache of revisions ({target.parent}), which no tool "
                "may write; write somewhere else in the root."
            )
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

    def search(
        self,
        query: str,
        raw: str,
        *,
        regex: bool,
        pattern: str | None,
        case_sensitive: bool,
        room: int | None,
        stop: threading.Event,
    ) -> str:
        """Matching lines as ``path:line: text``, at most ``max_results`` (and ``room`` characters)."""
        matcher = compile_query(query, regex=regex, case_sensitive=case_sensitive)
        deadline = time.monotonic() + self.search_timeout_s
        base = self.resolve(raw)
        if not base.exists():
            raise ToolError(f"No such file or folder: {raw!r}.")
        named = base.is_file()
        candidates = [(base, False)] if named else _walk(base, depth=None, skip=_SKIPPED_DIRS)
        matches: list[str] = []
        skipped: list[str] = []
        size, more = 0, 0
        try:
            for path, is_dir in candidates:
                if is_dir or (pattern and not fnmatch.fnmatch(path.name, pattern)):
                    continue
                for number, text in self._matching_lines(
                    path, matcher, whole=named, skipped=skipped, deadline=deadline, stop=stop
                ):
                    if len(text) > _MAX_MATCH_LINE_CHARS:
                        text = text[:_MAX_MATCH_LINE_CHARS] + "..."
                    entry = f"{self._relative(path)}:{number}: {text}"
                    if len(matches) >= self.max_results or (room is not None and size + len(entry) > room):
                        more += 1
                        continue
                    matches.append(entry)
                    size += len(entry) + 1
        except SearchStopped as stopped:
            if stopped.abandoned or not more:
                where = self._relative(stopped.where)
                raise _stopped_error(stopped, self.search_timeout_s, where, matches) from None
            more = -more  # the results were full: only the counting of the rest was stopped
        return _search_report(f"No matches for {query!r} in {self._relative(base)}.", matches, more, skipped)

    def _existing(self, raw: str, *, want_file: bool) -> Path:
        target = self.resolve(raw)
        if not target.exists():
            raise ToolError(f"No such {'file' if want_file else 'folder'}: {raw!r}.")
        if want_file and target.is_dir():
            raise ToolError(f"{raw!r} is a folder; use files_list to see what it holds.")
        if not want_file and not target.is_dir():
            raise ToolError(f"{raw!r} is a file, not a folder; use files_read to read it.")
        return target

    def _matching_lines(
        self,
        path: Path,
        matcher: Matcher,
        *,
        whole: bool,
        skipped: MutableSequence[str],
        deadline: float,
        stop: threading.Event,
    ) -> Iterator[tuple[int, str]]:
        """Matching lines of one file; files outside the root or binary are skipped, so are files
        over 5 MB unless ``whole`` (the file was named): those are added to ``skipped``."""
        try:
            real = path.resolve()
            if not real.is_relative_to(self.root) or not real.is_file():
                return
            if not whole and real.stat().st_size > _MAX_SEARCH_FILE_BYTES:
                skipped.append(self._relative(path))
                return
            if _is_binary(real):
                return
            yield from matcher.matching_lines(real, deadline=deadline, stop=stop)
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


def _stopped_error(stopped: SearchStopped, limit_s: float, where: str, matches: list[str]) -> ToolError:
    """The error of a search that reached ``search_timeout_s`` (with what it had found) or was abandoned."""
    if stopped.abandoned:
        return ToolError("files_search was abandoned before it finished.")
    found = "\n".join(["Matches found before it stopped:", *matches]) if matches else "No matches so far."
    return ToolError(
        f"files_search stopped after {limit_s:g} s (the files toolset's search_timeout_s limit) while "
        f"searching {where}; narrow it with path or pattern. {found}"
    )


def _search_report(nothing: str, matches: list[str], more: int, skipped: list[str]) -> str:
    """The matches with notes on those left out and on big files not searched (``nothing``: none).

    A negative ``more``: at least that many more, the search stopped counting them at its time limit.
    """
    notes: list[str] = []
    if more:
        count = f"{more}" if more > 0 else f"at least {-more}"
        notes.append(f"[{count} more matches not shown; narrow with path, pattern or a longer query]")
    if skipped:
        listed = ", ".join(skipped[:_LISTED_SKIPS]) + (" ..." if len(skipped) > _LISTED_SKIPS else "")
        files = "1 file" if len(skipped) == 1 else f"{len(skipped)} files"
        notes.append(
            f"[{files} over {_MAX_SEARCH_FILE_BYTES} bytes not searched: {listed}; "
            "give one as path to search it]"
        )
    return "\n".join([*(matches or [nothing]), *notes])


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
