"""What one agent file will run or reach: the data of ``runner audit`` (``docs/audit.md``).

Every entry names where in the agent file it comes from (``use``: ``tools[2]``, ``hooks.tool_pre[0]``,
``output``, ``model``). Nothing holds a variable's value: environment variables are names with
whether they are set, and values the loader marked as secrets are replaced by ``***`` wherever they
would appear (an MCP argument, a URL).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "JSON_VERSION",
    "AgentAudit",
    "CommandUse",
    "ConfirmUse",
    "FetchUse",
    "FilesUse",
    "McpCommand",
    "ModuleUse",
    "ShellUse",
    "SkillUse",
    "SubAgent",
    "TemplateFile",
    "UrlUse",
    "VariableRead",
]

#: The version of the ``--json`` shape; it changes only when a field changes meaning or goes away.
JSON_VERSION = 1


@dataclass(frozen=True)
class ModuleUse:
    """A Python module the runner will import: for a tool source, a hook or ``output: {python:}``."""

    use: str
    target: str
    module: str
    file: str | None
    #: ``folder`` / ``repository`` / ``outside`` / ``built-in`` / ``missing``.
    where: str
    problem: str | None = None


@dataclass(frozen=True)
class CommandUse:
    """A command hook: the line ``/bin/sh -c`` will run, in the folder of the file that wrote it."""

    use: str
    command: str
    cwd: str


@dataclass(frozen=True)
class McpCommand:
    """An MCP server started as a subprocess (stdio)."""

    use: str
    command: str
    args: list[str]
    env: list[str]
    cwd: str | None


@dataclass(frozen=True)
class UrlUse:
    """An address the runner connects to: an MCP server, an OpenAPI document or API, a remote A2A
    agent, the model."""

    use: str
    kind: Literal["mcp", "openapi", "openapi-base-url", "a2a", "model"]
    url: str
    headers: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class TemplateFile:
    """A file a template reads: a prompt's ``file:``, or a template an ``include`` / ``import`` /
    ``extends`` names (its own includes too), with what makes it worth a look."""

    use: str
    #: ``file`` (a prompt's ``file:``) or ``include`` (any tag that loads a template).
    via: Literal["file", "include"]
    #: The path or template name as written (None: computed at render time).
    written: str | None
    #: The file it resolves to, symbolic links followed (None when not known before a render).
    file: str | None
    #: ``folder`` / ``repository`` / ``outside``, as for modules; ``unknown`` when ``file`` is None.
    where: str
    absolute: bool = False
    #: A symbolic link is on the way from the folder to the file.
    symlink: bool = False
    problem: str | None = None


@dataclass(frozen=True)
class FetchUse:
    """The ``fetch`` toolset: which addresses the model may make the runner GET."""

    use: str
    reach: str
    allow_private: bool
    allow_hosts: list[str]
    headers: list[str]
    #: Whether each request carries the run's W3C trace context (``propagate_trace``, with ``--otel``).
    propagate_trace: bool = False


@dataclass(frozen=True)
class FilesUse:
    """The ``files`` toolset: the folder the model may read (and write)."""

    use: str
    root: str
    mode: Literal["read-write", "read-only"]


@dataclass(frozen=True)
class ShellUse:
    """The ``shell`` toolset: where the model's commands run, and with what environment."""

    use: str
    cwd: str
    env: list[str]
    inherit_env: bool
    inherit_secrets: bool
    confirm: bool


@dataclass(frozen=True)
class SkillUse:
    """One skill of ``skills:``: its folder (sent to the model on demand) and the scripts it ships."""

    use: str
    name: str
    folder: str
    scripts: list[str]
    #: ``allowed-tools`` as the ``SKILL.md`` wrote it (shown only: it grants nothing).
    allowed_tools: list[str]
    #: The frontmatter's ``description``: what the system prompt tells the model about the skill.
    description: str = ""


@dataclass(frozen=True)
class ConfirmUse:
    """A source's ``confirm:`` as written (None: the tool's own default) and what it comes to."""

    use: str
    source: str
    written: bool | None
    asks: bool


@dataclass(frozen=True)
class VariableRead:
    """An environment variable the file reads (``${NAME}``); never its value."""

    name: str
    set: bool
    defaulted: bool
    secret: bool
    files: list[str]


@dataclass
class SubAgent:
    """An ``agent:`` source: the other agent's own audit, or why it is not listed again."""

    use: str
    target: str
    #: ``listed``: ``audit`` holds it; ``cycle``: it is an agent already being listed above it;
    #: ``error``: it cannot be loaded (``error`` says why).
    status: Literal["listed", "cycle", "error"]
    file: str | None = None
    error: str | None = None
    audit: AgentAudit | None = None


@dataclass
class AgentAudit:
    """Everything one agent will run or reach, grouped by kind."""

    agent: str
    file: str
    folder: str
    repository: str | None
    model: dict[str, Any] | None = None
    python_modules: list[ModuleUse] = field(default_factory=list)
    commands: list[CommandUse] = field(default_factory=list)
    mcp_commands: list[McpCommand] = field(default_factory=list)
    urls: list[UrlUse] = field(default_factory=list)
    openapi_files: list[dict[str, str]] = field(default_factory=list)
    template_files: list[TemplateFile] = field(default_factory=list)
    fetch: list[FetchUse] = field(default_factory=list)
    files: list[FilesUse] = field(default_factory=list)
    shell: list[ShellUse] = field(default_factory=list)
    skills: list[SkillUse] = field(default_factory=list)
    permissions: dict[str, list[str]] = field(default_factory=dict)
    confirm: list[ConfirmUse] = field(default_factory=list)
    variables: list[VariableRead] = field(default_factory=list)
    subagents: list[SubAgent] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` shape (``docs/audit.md``), with its version."""
        return {"version": JSON_VERSION, **asdict(self)}

    def walk(self) -> list[AgentAudit]:
        """This audit and those of its sub-agents, depth first."""
        found = [self]
        for sub in self.subagents:
            if sub.audit is not None:
                found += sub.audit.walk()
        return found


def shown(path: Path | None) -> str | None:
    return None if path is None else str(path)
