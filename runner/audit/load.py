"""Loading an agent file for an audit: checked like ``runner validate``, but nothing imported.

``load_agent`` imports every Python module the file names (to check it); an audit must not, so it
reads, resolves and schema-checks the file (``load_file``) and builds the config from that. A
``${VAR}`` that is unset and has no default would stop the load: it gets the placeholder
``<VAR unset>`` so the rest can still be listed (the audit says the variable is unset).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from runner.agentfile.config import AgentConfig, ToolSourceConfig
from runner.agentfile.files import config_from_file, load_file
from runner.audit.collect import AuditContext, ChildLoader, placeholder
from runner.audit.envscan import scan_variables

__all__ = ["audit_context", "load_for_audit", "summary_of"]


def _audit_env(path: Path, env: Mapping[str, str]) -> dict[str, str]:
    filled = dict(env)
    for use in scan_variables(path, lambda p: p.read_text(encoding="utf-8")):
        if use.name not in filled and not use.defaulted:
            filled[use.name] = placeholder(use.name)
    return filled


def load_for_audit(path: Path, *, agent: str | None, env: Mapping[str, str]) -> AgentConfig:
    """The config of agent ``agent`` of ``path`` (the first when None), without importing anything."""
    agent_file = load_file(path, env=_audit_env(path, env))
    return config_from_file(agent_file, agent)


def _child_loader(env: Mapping[str, str]) -> ChildLoader:
    def load(parent: AgentConfig, source: ToolSourceConfig) -> AgentConfig:
        if source.target.startswith("#"):
            return load_for_audit(parent.path, agent=source.target[1:], env=env)
        return load_for_audit((source.base_dir / source.target).resolve(), agent=None, env=env)

    return load


def audit_context(env: Mapping[str, str]) -> AuditContext:
    """The context of an audit of the work tree: files read from disk, sub-agents loaded from there."""
    return AuditContext(load_child=_child_loader(env), env=env)


def summary_of(config: AgentConfig, env: Mapping[str, str], *, name: str | None = None) -> str:
    """``runner serve``'s start-up line for ``config``; a problem becomes part of the line, never an error."""
    from runner.audit.collect import audit_agent
    from runner.audit.text import summary
    from runner.errors import RunnerError

    try:
        return summary(audit_agent(config, audit_context(env)), name=name)
    except (RunnerError, OSError) as exc:
        return f"audit: {name or config.name}: cannot be audited: {exc}"
