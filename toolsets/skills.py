"""The ``skills`` toolset: Agent Skills loaded on demand (``skills:`` in the agent file adds it).

Progressive disclosure: the system prompt lists each skill's name and description (``instructions``,
descriptions cut to ``PROMPT_DESCRIPTION_CHARS``); ``skills_load`` returns a skill's instructions (its
``SKILL.md`` body, read when asked) with the list of files it ships; ``skills_read`` reads one of
those files, and only inside that skill's folder (``..``, absolute paths and symlinks that lead out
are refused). Nothing here runs a script: the model runs them with the ``shell`` tool, under that
tool's confirmation and the agent's ``permissions:`` rules, like any other command.

Option: ``folders``, the skill folders (each holding a ``SKILL.md``), relative to the agent file.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner.agentfile.skills import MAX_SKILL_BYTES, Skill, parse_skill, read_body
from runner.errors import ConfigError, ToolError
from runner.tools.base import RunContext, Tool
from runner.tools.toolset import builtin_tool

if TYPE_CHECKING:
    from runner.tools.toolset import ToolsetContext

__all__ = ["OPTIONS_SCHEMA", "PROMPT_DESCRIPTION_CHARS", "build", "instructions", "skills_section"]

OPTIONS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "folders": {
            "type": "array",
            "items": {"type": "string", "minLength": 1},
            "default": [],
            "description": "skill folders, each holding a SKILL.md (relative to the agent file)",
        },
    },
    "additionalProperties": False,
}

#: The most characters of a description the system prompt carries (``skills_load`` gives it whole):
#: with the name, one skill costs the prompt at most about 100 tokens.
PROMPT_DESCRIPTION_CHARS = 250

_HEADER = (
    "## Skills\n"
    "Skills hold instructions for particular tasks. When a task matches a skill below, call "
    "skills_load with its name first and follow what it says; read its files with skills_read."
)


def _skills(options: dict[str, Any], ctx: ToolsetContext) -> list[Skill]:
    skills = []
    for i, folder in enumerate(options["folders"]):
        try:
            skills.append(parse_skill(ctx.path(folder)))
        except ConfigError as exc:
            raise ConfigError(f"{exc.location}: {exc.message}", path=f"folders.{i}", hint=exc.hint) from None
    return skills


def _short(text: str) -> str:
    flat = " ".join(text.split())
    if len(flat) <= PROMPT_DESCRIPTION_CHARS:
        return flat
    return flat[: PROMPT_DESCRIPTION_CHARS - 1].rsplit(" ", 1)[0] + "…"


def skills_section(skills: list[Skill]) -> str | None:
    """The system prompt's skills section: one line per skill (name and description), or None."""
    if not skills:
        return None
    return "\n".join([_HEADER, *(f"- {s.name}: {_short(s.description)}" for s in skills)])


def instructions(options: dict[str, Any], ctx: ToolsetContext) -> str | None:
    """What this toolset adds to the system prompt (the builtin loader asks for it)."""
    return skills_section(_skills(options, ctx))


def _loaded(skill: Skill) -> str:
    """``skills_load``'s answer: where the skill is, what it ships, then its instructions."""
    lines = [f"# Skill: {skill.name}", f"Folder: {skill.folder}", f"Description: {skill.description}"]
    if skill.compatibility:
        lines.append(f"Compatibility: {skill.compatibility}")
    if skill.allowed_tools:
        lines.append(f"Tools it expects: {' '.join(skill.allowed_tools)}")
    if skill.files:
        lines.append(
            "Files (relative to the folder; read them with skills_read; run scripts with the "
            "shell tool, which asks or refuses as its rules say):"
        )
        lines += [f"- {name}" for name in skill.files]
    return "\n".join([*lines, "", read_body(skill)])


def _inside(skill: Skill, path: str) -> Path:
    """``path`` of ``skill``'s folder, resolved; a ``ToolError`` when it would leave the folder."""
    root = skill.folder.resolve()
    written = Path(path.strip())
    if written.is_absolute() or ".." in written.parts:
        raise ToolError(f"{path!r} is not a path inside the skill {skill.name!r}: write it relative to it")
    target = (root / written).resolve()
    if not target.is_relative_to(root):
        raise ToolError(f"{path!r} leads out of the skill {skill.name!r}'s folder")
    return target


def _read_file(skill: Skill, path: str) -> str:
    target = _inside(skill, path)
    if not target.is_file():
        listed = ", ".join(skill.files[:20]) or "none"
        raise ToolError(f"the skill {skill.name!r} has no file {path!r} (its files: {listed})")
    size = target.stat().st_size
    if size > MAX_SKILL_BYTES:
        raise ToolError(f"{path!r} is {size:,} bytes; skills_read reads at most {MAX_SKILL_BYTES:,}")
    data = target.read_bytes()
    if b"\0" in data[:8192]:
        raise ToolError(f"{path!r} is a binary file; use it with the shell tool instead")
    return data.decode("utf-8", errors="replace")


def build(options: dict[str, Any], ctx: ToolsetContext) -> list[Tool]:
    """``skills_load`` and ``skills_read`` over the skills of ``folders`` (none: no tools)."""
    skills = {s.name: s for s in _skills(options, ctx)}
    if not skills:
        return []
    names = sorted(skills)

    def find(arguments: dict[str, Any]) -> Skill:
        name = str(arguments.get("name", ""))
        skill = skills.get(name)
        if skill is None:
            raise ToolError(f"no skill named {name!r}; the skills are: {', '.join(names)}")
        return skill

    async def skills_load(arguments: dict[str, Any], run: RunContext) -> str:
        return _loaded(find(arguments))

    async def skills_read(arguments: dict[str, Any], run: RunContext) -> str:
        return _read_file(find(arguments), str(arguments["path"]))

    name_schema = {"type": "string", "enum": names, "description": "the skill's name"}
    return [
        builtin_tool(
            "skills",
            "skills_load",
            "Load a skill's instructions (and the list of its files) before doing a task it covers.",
            {"name": name_schema},
            ["name"],
            skills_load,
        ),
        builtin_tool(
            "skills",
            "skills_read",
            "Read a file of a skill (a reference, an asset, a script) by its path in the skill's folder.",
            {
                "name": {"type": "string", "description": "the skill's name (as skills_load takes it)"},
                "path": {"type": "string", "description": "e.g. references/guide.md"},
            },
            ["name", "path"],
            skills_read,
        ),
    ]
