"""Agent Skills (agentskills.io): reading and checking ``SKILL.md`` folders for ``skills:``.

A skill is a folder holding a ``SKILL.md``: YAML frontmatter between ``---`` lines (``name``,
``description``, optional ``license``, ``compatibility``, ``metadata``, ``allowed-tools``; nothing
else), then a Markdown body. A ``skills:`` folder holds skill folders (or is one itself). Every
problem is a ``ConfigError`` located in the ``SKILL.md`` (file and line), so ``runner validate``
reports them like the agent file's own. Only the name and description are needed until the model
asks for a skill (``read_body``); the files a skill ships are listed, never read, here.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from runner.errors import ConfigError

__all__ = [
    "CONVENTIONAL_FOLDERS",
    "MAX_FILES_LISTED",
    "MAX_SKILL_BYTES",
    "SKILL_FILE",
    "Skill",
    "discover_skills",
    "parse_skill",
    "read_body",
    "skill_folders",
]

SKILL_FILE = "SKILL.md"
#: What ``skills: true`` means: these folders beside the agent file, those that exist. The first is
#: the cross-client convention of the specification, the second Claude Code's project folder.
CONVENTIONAL_FOLDERS: tuple[str, ...] = (".agents/skills", ".claude/skills", "skills")
#: The largest ``SKILL.md`` read (the specification asks for bodies under 500 lines).
MAX_SKILL_BYTES = 256 * 1024
#: The most files of a skill listed (in ``runner tools``, ``runner audit`` and ``skills_load``).
MAX_FILES_LISTED = 200

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
#: Checked skills by (SKILL.md, its mtime and size): ``runner validate`` and the build read each once.
_CACHE: dict[tuple[Path, int, int], Skill] = {}
_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
_KNOWN = ("name", "description", "license", "compatibility", "metadata", "allowed-tools")


@dataclass(frozen=True)
class Skill:
    """One checked skill: its frontmatter, where it is, and the files it ships (relative paths)."""

    name: str
    description: str
    folder: Path
    license: str | None = None
    compatibility: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    allowed_tools: tuple[str, ...] = ()
    #: The other files of its folder (``scripts/``, ``references/``, ``assets/`` ...), relative to it.
    files: tuple[str, ...] = ()
    #: The line of ``name:`` in the ``SKILL.md`` (where a clash with another skill is reported).
    name_line: int = 2

    @property
    def file(self) -> Path:
        """The skill's ``SKILL.md``."""
        return self.folder / SKILL_FILE

    @property
    def scripts(self) -> tuple[str, ...]:
        """The files under ``scripts/`` (run only through the ``shell`` tool)."""
        return tuple(f for f in self.files if f.startswith("scripts/"))


def skill_folders(value: Any, base: Path) -> list[tuple[Path, bool]]:
    """The folders ``skills:`` names, each with whether it must exist (``true``: the conventional
    folders, optional; a list: each path, relative to ``base``, required)."""
    if value is True:
        return [((base / name).resolve(), False) for name in CONVENTIONAL_FOLDERS]
    if isinstance(value, list):
        return [((base / Path(str(p)).expanduser()).resolve(), True) for p in value]
    return []


def _error(message: str, file: Path, line: int = 0, *, hint: str | None = None, key: str = "") -> ConfigError:
    return ConfigError(message, file=str(file), line=line, column=1 if line else 0, path=key, hint=hint)


def _read(file: Path) -> str:
    try:
        size = file.stat().st_size
        if size > MAX_SKILL_BYTES:
            raise _error(
                f"SKILL.md is {size:,} bytes, more than the {MAX_SKILL_BYTES:,} a skill may have",
                file,
                hint="keep the body short and move details into references/ files the model reads on demand",
            )
        data = file.read_bytes()
    except OSError as exc:
        raise _error(f"cannot read SKILL.md: {exc.strerror}", file) from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _error(f"SKILL.md is not UTF-8 text (byte {exc.start})", file) from None


def _split(text: str, file: Path) -> tuple[str, int, str]:
    """The frontmatter, the line its first key is on, and the body."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise _error(
            "SKILL.md has no frontmatter: its first line must be ---",
            file,
            1,
            hint="start with ---, then name: and description:, then --- and the instructions",
        )
    for i, line in enumerate(lines[1:], start=1):
        if line.strip() == "---":
            return "".join(lines[1:i]), 2, "".join(lines[i + 1 :])
    raise _error("SKILL.md frontmatter is not closed: no --- line after it", file, 1)


def _alias_line(node: yaml.Node | None) -> int | None:
    """The line (0-based) of the first alias in ``node``: a node met twice (composing keeps them shared)."""
    seen: set[int] = set()
    stack = [node] if node is not None else []
    while stack:
        current = stack.pop()
        if id(current) in seen:
            return int(current.start_mark.line)
        seen.add(id(current))
        if isinstance(current, yaml.MappingNode):
            stack += [part for pair in reversed(current.value) for part in reversed(pair)]
        elif isinstance(current, yaml.SequenceNode):
            stack += reversed(current.value)
    return None


def _mapping(front: str, file: Path, first_line: int) -> tuple[dict[str, Any], dict[str, int]]:
    """The frontmatter as data, and each top-level key's line; aliases and non-mappings refused."""
    try:
        loader = _Loader(front)
        try:
            node = loader.get_single_node()
            alias = _alias_line(node)
            if alias is not None:
                message = "SKILL.md frontmatter may not use YAML aliases (&anchor and *alias)"
                raise _error(message, file, first_line + alias)
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = first_line + mark.line if mark is not None else first_line
        problem = getattr(exc, "problem", None) or str(exc)
        raise _error(f"SKILL.md frontmatter is not valid YAML: {problem}", file, line) from None
    if not isinstance(data, dict) or not isinstance(node, yaml.MappingNode):
        raise _error("SKILL.md frontmatter must be a mapping of keys (name:, description:)", file, first_line)
    lines = {str(k.value): first_line + k.start_mark.line for k, _ in node.value}
    return data, lines


def _text(data: dict[str, Any], key: str, file: Path, lines: dict[str, int], *, most: int) -> str | None:
    if key not in data or data[key] is None:
        return None
    value = data[key]
    line = lines.get(key, 1)
    if not isinstance(value, str):
        raise _error(f"{key} must be a string, not {type(value).__name__}", file, line, key=key)
    if not value.strip():
        raise _error(f"{key} is empty", file, line, key=key)
    if len(value) > most:
        raise _error(f"{key} is {len(value)} characters, more than {most}", file, line, key=key)
    return value


def _check_name(name: str | None, file: Path, lines: dict[str, int]) -> str:
    line = lines.get("name", 2)
    if name is None:
        raise _error("SKILL.md frontmatter has no name:", file, 2, hint="name: the skill folder's name")
    if len(name) > 64 or not _NAME.match(name):
        raise _error(
            f"name {name!r} is not a skill name",
            file,
            line,
            key="name",
            hint="1 to 64 lowercase letters, digits and single hyphens, not starting or ending with one",
        )
    folder = file.parent.name
    if name != folder:
        raise _error(
            f"name {name!r} does not match its folder {folder!r}",
            file,
            line,
            key="name",
            hint=f"rename the folder to {name} or write name: {folder}",
        )
    return name


def _extras(
    data: dict[str, Any], file: Path, lines: dict[str, int]
) -> tuple[dict[str, str], tuple[str, ...]]:
    """``metadata`` (a map of strings) and ``allowed-tools`` (a space-separated string or a list)."""
    metadata = data.get("metadata") or {}
    if not isinstance(metadata, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()
    ):
        raise _error(
            "metadata must map strings to strings",
            file,
            lines.get("metadata", 2),
            key="metadata",
            hint='quote numbers and versions: version: "1.0"',
        )
    tools = data.get("allowed-tools") or ()
    if isinstance(tools, str):
        tools = tools.split()
    if not isinstance(tools, list | tuple) or not all(isinstance(t, str) for t in tools):
        raise _error(
            "allowed-tools must be a space-separated string or a list of strings",
            file,
            lines.get("allowed-tools", 2),
            key="allowed-tools",
        )
    return dict(metadata), tuple(tools)


def _files(folder: Path) -> tuple[str, ...]:
    """The files a skill ships besides its ``SKILL.md`` (relative, sorted, at most ``MAX_FILES_LISTED``).

    Hidden folders (``.git``) are passed over, linked folders are not entered, and a linked file that
    leads out of the skill's folder is left out.
    """
    root = folder.resolve()
    found: list[str] = []
    for current, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        here = Path(current)
        for name in sorted(names):
            path = here / name
            relative = path.relative_to(folder).as_posix()
            if relative == SKILL_FILE or not path.resolve().is_relative_to(root):
                continue
            found.append(relative)
            if len(found) >= MAX_FILES_LISTED:
                return tuple(found)
    return tuple(found)


def parse_skill(folder: Path) -> Skill:
    """The checked ``Skill`` of ``folder``; a ``ConfigError`` at the ``SKILL.md`` line that is wrong."""
    file = folder / SKILL_FILE
    try:
        stat = file.stat()
    except OSError as exc:
        raise _error(f"cannot read SKILL.md: {exc.strerror}", file) from None
    key = (file, stat.st_mtime_ns, stat.st_size)
    cached = _CACHE.get(key)
    if cached is None or cached.files != _files(folder):
        cached = _CACHE[key] = _parse(folder, file)
        if len(_CACHE) > 4096:
            _CACHE.clear()
    return cached


def _parse(folder: Path, file: Path) -> Skill:
    front, first_line, _ = _split(_read(file), file)
    data, lines = _mapping(front, file, first_line)
    unknown = [k for k in data if k not in _KNOWN]
    if unknown:
        key = str(unknown[0])
        raise _error(
            f"unknown frontmatter key {key!r}",
            file,
            lines.get(key, first_line),
            key=key,
            hint=f"a SKILL.md may have: {', '.join(_KNOWN)} (put anything else under metadata:)",
        )
    name = _check_name(_text(data, "name", file, lines, most=64), file, lines)
    description = _text(data, "description", file, lines, most=1024)
    if description is None:
        raise _error("SKILL.md frontmatter has no description:", file, first_line, hint="what it does, when")
    metadata, allowed = _extras(data, file, lines)
    return Skill(
        name=name,
        description=description.strip(),
        folder=folder,
        license=_text(data, "license", file, lines, most=1024),
        compatibility=_text(data, "compatibility", file, lines, most=500),
        metadata=metadata,
        allowed_tools=allowed,
        files=_files(folder),
        name_line=lines.get("name", 2),
    )


def read_body(skill: Skill) -> str:
    """The instructions of ``skill`` (its ``SKILL.md`` after the frontmatter), read now."""
    _, _, body = _split(_read(skill.file), skill.file)
    return body.strip()


def _candidates(folder: Path) -> list[Path]:
    if (folder / SKILL_FILE).is_file():
        return [folder]
    return sorted(p for p in folder.iterdir() if p.is_dir() and (p / SKILL_FILE).is_file())


def discover_skills(
    folders: Iterable[tuple[Path, bool]], *, where: ConfigError | None = None
) -> tuple[list[Skill], list[ConfigError]]:
    """The skills in ``folders`` (each with whether it must exist), and every problem found.

    ``where`` locates the problems of a folder itself (the ``skills:`` entry of the agent file).
    Two skills with one name: the second is refused, naming the first.
    """
    skills: dict[str, Skill] = {}
    errors: list[ConfigError] = []
    for folder, required in folders:
        if not folder.is_dir():
            if required:
                errors.append(_located(f"skills folder {str(folder)!r} does not exist", where))
            continue
        for candidate in _candidates(folder):
            try:
                skill = parse_skill(candidate)
            except ConfigError as exc:
                errors.append(exc)
                continue
            first = skills.get(skill.name)
            if first is not None:
                if first.folder.resolve() != skill.folder.resolve():
                    errors.append(
                        _error(
                            f"a second skill named {skill.name!r} (the first is {first.file})",
                            skill.file,
                            skill.name_line,
                            key="name",
                            hint="skill names are unique per agent: rename one or list fewer folders",
                        )
                    )
                continue
            skills[skill.name] = skill
    return list(skills.values()), errors


def _located(message: str, where: ConfigError | None) -> ConfigError:
    if where is None:
        return ConfigError(message)
    return ConfigError(message, file=where.file, line=where.line, column=where.column, path=where.path)
