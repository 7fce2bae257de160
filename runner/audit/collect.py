"""Building an ``AgentAudit`` from an already loaded ``AgentConfig``, without running anything.

No tool module is imported (modules are located with ``runner.audit.modules``), no MCP server
started, no URL fetched. What comes from elsewhere is given by an ``AuditContext``: the environment,
how to read a file (the work tree, or a revision's objects), how to load a sub-agent and where the
repository is, so ``runner audit --rev`` can hand in its own.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.agentfile.config import AgentConfig, ToolSourceConfig
from runner.agentfile.interpolate import is_secret_name
from runner.audit.envscan import scan_variables
from runner.audit.modules import invalidate, locate_module
from runner.audit.report import (
    AgentAudit,
    CommandUse,
    ConfirmUse,
    FetchUse,
    FilesUse,
    McpCommand,
    ModuleUse,
    ShellUse,
    SkillUse,
    SubAgent,
    UrlUse,
    VariableRead,
    shown,
)
from runner.audit.templates import template_files
from runner.errors import ConfigError

__all__ = ["AuditContext", "audit_agent", "find_repository", "mask_url_passwords", "placeholder"]

ChildLoader = Callable[[AgentConfig, ToolSourceConfig], AgentConfig]

#: A URL's scheme and authority (``user:password@host:port``), up to its path, a space or a quote.
_AUTHORITY = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<authority>[^\s/?#'\"<>]*)")


def _masked_authority(match: re.Match[str]) -> str:
    authority = match["authority"]
    userinfo, at, host = authority.rpartition("@")
    user, colon, password = userinfo.partition(":")
    if not at or not colon or not password:
        return match.group(0)
    return f"{match['scheme']}{user}:***@{host}"


def mask_url_passwords(text: str) -> str:
    """``text`` with the password of every URL's userinfo replaced by ``***``, whatever it came from.

    ``https://user:${PROXYPASS}@host`` expands to a password that no secret-looking name announces;
    its place in the URL says what it is.
    """
    return _AUTHORITY.sub(_masked_authority, text) if "://" in text else text


def find_repository(path: Path) -> Path | None:
    """The work tree of the git repository holding ``path`` (a folder with ``.git``), or None."""
    for folder in [path, *path.parents]:
        if (folder / ".git").exists():
            return folder
    return None


def placeholder(name: str) -> str:
    """What an unset variable without a default reads as during an audit (``runner.audit.load``)."""
    return f"<{name} unset>"


def _is_placeholder(value: str) -> bool:
    return value.startswith("<") and value.endswith(" unset>")


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


@dataclass
class AuditContext:
    """What an audit needs besides the config; the defaults read the work tree."""

    load_child: ChildLoader
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    read_text: Callable[[Path], str] = _read
    repository: Callable[[Path], Path | None] = find_repository


def audit_agent(config: AgentConfig, context: AuditContext) -> AgentAudit:
    """Everything ``config`` (and its sub-agents, recursively) will run or reach."""
    invalidate()
    return _audit(config, context, ())


def _key(config: AgentConfig) -> tuple[str, str]:
    return (str(config.path.resolve()), config.name)


def _audit(config: AgentConfig, context: AuditContext, chain: tuple[tuple[str, str], ...]) -> AgentAudit:
    repository = context.repository(config.directory.resolve())
    redact = _redactor(config.secrets)
    result = AgentAudit(
        agent=config.name,
        file=str(config.path),
        folder=str(config.directory),
        repository=shown(repository),
        model=_model(config, redact),
        permissions={
            "allow": list(config.permissions.allow),
            "ask": list(config.permissions.ask),
            "deny": list(config.permissions.deny),
        },
    )
    locate = _locator(config, repository)
    for source in config.tools:
        _source(result, source, locate, redact)
    for event, chain_of in config.hooks.items():
        for index, hook in enumerate(chain_of):
            use = f"hooks.{event}[{index}]"
            if hook.kind == "python":
                result.python_modules.append(locate(use, hook.value, hook.base_dir))
            elif hook.kind == "command":
                result.commands.append(CommandUse(use, redact(hook.value), str(hook.base_dir)))
    if config.output is not None and config.output.python:
        result.python_modules.append(locate("output", config.output.python, config.output.base_dir))
    result.skills = [
        SkillUse("skills", s.name, str(s.folder), list(s.scripts), list(s.allowed_tools), s.description)
        for s in config.skills
    ]
    result.template_files = template_files(config, repository=repository, read_text=context.read_text)
    result.variables = _variables(config, context)
    here = (*chain, _key(config))
    for source in config.tools:
        if source.kind == "agent":
            result.subagents.append(_subagent(config, source, context, here))
    return result


def _redactor(secrets: frozenset[str]) -> Callable[[str], str]:
    ordered = sorted((s for s in secrets if s), key=len, reverse=True)

    def redact(text: str) -> str:
        for secret in ordered:
            text = text.replace(secret, "***")
        return mask_url_passwords(text)

    return redact


def _model(config: AgentConfig, redact: Callable[[str], str]) -> dict[str, Any] | None:
    model = config.model
    if model is None:
        return None
    return {
        "id": redact(model.id),
        "api_base": redact(model.api_base) if model.api_base else None,
        "api_key": model.api_key is not None and not _is_placeholder(model.api_key),
        "fallbacks": [redact(f) for f in model.fallbacks],
        "selector": config.selector.model if config.function_calling == "prompt" else None,
    }


def _locator(config: AgentConfig, repository: Path | None) -> Callable[[str, str, Path], ModuleUse]:
    def locate(use: str, target: str, base_dir: Path) -> ModuleUse:
        module = target.partition(":")[0]
        found = locate_module(module, base_dir, folder=config.directory, repository=repository)
        return ModuleUse(use, target, module, shown(found.file), found.where, found.problem)

    return locate


def _source(
    result: AgentAudit,
    source: ToolSourceConfig,
    locate: Callable[[str, str, Path], ModuleUse],
    redact: Callable[[str], str],
) -> None:
    use = f"tools[{source.index}]"
    asks = (
        source.confirm if source.confirm is not None else (source.kind, source.target) == ("builtin", "shell")
    )
    result.confirm.append(ConfirmUse(use, redact(source.label), source.confirm, asks))
    if source.kind == "python":
        result.python_modules.append(locate(use, source.target, source.base_dir))
    elif source.kind == "mcp" and source.mcp is not None:
        mcp = source.mcp
        if mcp.command is not None:
            result.mcp_commands.append(
                McpCommand(
                    use, redact(mcp.command), [redact(a) for a in mcp.args], sorted(mcp.env), shown(mcp.cwd)
                )
            )
        elif mcp.url is not None:
            result.urls.append(UrlUse(use, "mcp", redact(mcp.url), sorted(source.headers)))
    elif source.kind == "openapi":
        _openapi(result, use, source, redact)
    elif source.kind == "a2a":  # a remote agent: its card's URL is where the runner connects
        result.urls.append(UrlUse(use, "a2a", redact(source.target), sorted(source.headers)))
    elif source.kind == "builtin":
        _builtin(result, use, source, asks, redact)


def _openapi(result: AgentAudit, use: str, source: ToolSourceConfig, redact: Callable[[str], str]) -> None:
    target = source.target
    if target.startswith(("http://", "https://")):
        result.urls.append(UrlUse(use, "openapi", redact(target), sorted(source.headers)))
    else:
        file = (source.base_dir / target).resolve()
        result.openapi_files.append({"use": use, "file": str(file)})
    if source.base_url:
        result.urls.append(UrlUse(use, "openapi-base-url", redact(source.base_url), sorted(source.headers)))


def _builtin(
    result: AgentAudit, use: str, source: ToolSourceConfig, asks: bool, redact: Callable[[str], str]
) -> None:
    options = source.options

    def folder(value: Any) -> str:
        return str((source.base_dir / Path(str(value)).expanduser()).resolve())

    if source.target == "files" and "root" in options:
        writable = bool(options.get("allow_write", True))
        result.files.append(FilesUse(use, folder(options["root"]), "read-write" if writable else "read-only"))
    elif source.target == "shell":
        env = options.get("env", {})
        result.shell.append(
            ShellUse(
                use,
                folder(options.get("cwd", ".")),
                sorted(env) if isinstance(env, dict) else [],
                bool(options.get("inherit_env", True)),
                bool(options.get("inherit_secrets", False)),
                asks,
            )
        )
    elif source.target == "fetch":
        private = bool(options.get("allow_private", False))
        hosts = [redact(str(h)) for h in options.get("allow_hosts", [])]
        reach = "any http(s) address" if private else "public http(s) addresses"
        if hosts and not private:
            reach += ", and private ones of " + ", ".join(hosts)
        headers = options.get("headers", {})
        names = sorted(headers) if isinstance(headers, dict) else []
        trace = options.get("propagate_trace") is True
        result.fetch.append(FetchUse(use, reach, private, hosts, names, propagate_trace=trace))


def _variables(config: AgentConfig, context: AuditContext) -> list[VariableRead]:
    return [
        VariableRead(
            name=use.name,
            set=use.name in context.env,
            defaulted=use.defaulted,
            secret=use.password or is_secret_name(use.name, context.env.get(use.name)),
            files=[str(f) for f in use.files],
        )
        for use in scan_variables(config.path, context.read_text)
    ]


def _subagent(
    parent: AgentConfig, source: ToolSourceConfig, context: AuditContext, chain: tuple[tuple[str, str], ...]
) -> SubAgent:
    use, redact = f"tools[{source.index}]", _redactor(parent.secrets)
    target = redact(source.target)
    try:
        child = context.load_child(parent, source)
    except ConfigError as exc:
        return SubAgent(use, target, "error", error=redact(exc.message))
    if _key(child) in chain:
        return SubAgent(use, target, "cycle", file=str(child.path))
    return SubAgent(use, target, "listed", file=str(child.path), audit=_audit(child, context, chain))
