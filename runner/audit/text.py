"""The human listing of ``runner audit`` and the one-line summary ``runner serve`` prints."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from runner.audit.report import (
    AgentAudit,
    ConfirmUse,
    FetchUse,
    McpCommand,
    ModuleUse,
    ShellUse,
    SkillUse,
    SubAgent,
    TemplateFile,
    VariableRead,
)
from runner.text import counted

__all__ = ["listing", "summary"]

_WHERE = {
    "folder": "in the agent's folder",
    "repository": "in the repository, outside the agent's folder",
    "outside": "OUTSIDE the repository",
    "built-in": "built into Python",
}


def _module(row: ModuleUse, show: Callable[[str], str], *, repository: bool) -> str:
    if row.where == "missing":
        return f"{row.use}  {row.target}  NOT FOUND: {row.problem}"
    where = _WHERE[row.where] if repository or row.where != "outside" else "outside the agent's folder"
    file = f" -> {show(row.file)}" if row.file else ""
    return f"{row.use}  {row.target}{file}  ({where})"


def _template_file(row: TemplateFile, show: Callable[[str], str], *, repository: bool) -> str:
    written = row.written if row.written is not None else "(a name computed when it renders)"
    head = f"{row.use}  {row.via} {written}"
    if row.file is None:
        return f"{head}  {row.problem}"
    notes = [_WHERE[row.where] if repository or row.where != "outside" else "outside the agent's folder"]
    if row.absolute:
        notes.append("ABSOLUTE path")
    if row.symlink:
        notes.append("through a SYMBOLIC LINK")
    if row.problem:
        notes.append(row.problem.upper())
    return f"{head} -> {show(row.file)}  ({'; '.join(notes)})"


def _variable(row: VariableRead) -> str:
    if row.set:
        state = "set"
    elif row.defaulted:
        state = "unset (its default is used)"
    else:
        state = "UNSET, no default: a run fails"
    return f"{row.name}  {state}" + ("  secret" if row.secret else "")


def _model(model: dict[str, Any] | None) -> list[str]:
    if model is None:
        return ["none in the file (given with --model or RUNNER_MODEL)"]
    parts = [model["id"]]
    if model["api_base"]:
        parts.append(f"api_base {model['api_base']}")
    if model["api_key"]:
        parts.append("api_key set (not shown)")
    if model["fallbacks"]:
        parts.append("fallbacks " + ", ".join(model["fallbacks"]))
    if model["selector"]:
        parts.append(f"selector {model['selector']}")
    return ["  ".join(parts)]


def _names(label: str, names: list[str]) -> str:
    return f"  {label}: {', '.join(names)}" if names else ""


def _mcp(m: McpCommand, show: Callable[[str], str]) -> str:
    cwd = f"  cwd: {show(m.cwd)}" if m.cwd else ""
    return f"{m.use}  {' '.join([m.command, *m.args])}{_names('env', m.env)}{cwd}"


def _shell(s: ShellUse, show: Callable[[str], str]) -> str:
    return (
        f"{s.use}  cwd {show(s.cwd)}{_names('env', s.env)}"
        + ("" if s.inherit_env else "  only PATH, HOME, LANG inherited")
        + ("  INHERITS SECRETS" if s.inherit_secrets else "")
        + ("  asks before each command" if s.confirm else "  runs without asking")
    )


def _skill(s: SkillUse, show: Callable[[str], str]) -> str:
    scripts = f"  scripts (run only through shell): {', '.join(s.scripts)}" if s.scripts else "  no scripts"
    tools = f"  allowed-tools (grants nothing): {' '.join(s.allowed_tools)}" if s.allowed_tools else ""
    return f"{s.use}  {s.name}  {show(s.folder)}{scripts}{tools}"


def _confirm(c: ConfirmUse) -> str:
    default = "" if c.written is not None else " (default)"
    return f"{c.use}  {c.source}  {'asks' if c.asks else 'does not ask'}{default}"


def _subagent(s: SubAgent) -> str:
    status = {"listed": "listed below", "cycle": "a cycle: already listed above"}.get(s.status)
    return f"{s.use}  {s.target}  {status or f'cannot load: {s.error}'}"


def _sections(audit: AgentAudit, show: Callable[[str], str]) -> list[tuple[str, list[str]]]:
    in_repo = audit.repository is not None
    rules = [
        f"{kind:<5}  {rule}" for kind in ("allow", "ask", "deny") for rule in audit.permissions.get(kind, [])
    ]
    return [
        ("model", _model(audit.model)),
        ("python modules", [_module(m, show, repository=in_repo) for m in audit.python_modules]),
        ("command hooks", [f"{c.use}  {c.command}  (in {show(c.cwd)})" for c in audit.commands]),
        ("MCP stdio commands", [_mcp(m, show) for m in audit.mcp_commands]),
        ("URLs", [f"{u.use}  {u.kind}  {u.url}{_names('headers', u.headers)}" for u in audit.urls]),
        ("OpenAPI files", [f"{o['use']}  {show(o['file'])}" for o in audit.openapi_files]),
        ("template files", [_template_file(t, show, repository=in_repo) for t in audit.template_files]),
        ("fetch", [f"{f.use}  {f.reach}{_names('headers', f.headers)}{_traced(f)}" for f in audit.fetch]),
        ("files", [f"{f.use}  {show(f.root)}  {f.mode}" for f in audit.files]),
        ("shell", [_shell(s, show) for s in audit.shell]),
        ("skills", [_skill(s, show) for s in audit.skills]),
        ("permissions", rules),
        ("confirm", [_confirm(c) for c in audit.confirm]),
        ("environment variables", [_variable(v) for v in audit.variables]),
        ("sub-agents", [_subagent(s) for s in audit.subagents]),
    ]


def listing(audit: AgentAudit, show: Callable[[str], str] = str, *, depth: int = 0) -> list[str]:
    """The listing of ``audit`` grouped by kind, then its sub-agents' (indented), as lines."""
    pad = "  " * depth
    where = f"repository {show(audit.repository)}" if audit.repository else "not in a git repository"
    title = "sub-agent" if depth else "agent"
    lines = [f"{pad}{title} {audit.agent} ({show(audit.file)}; {where})"]
    for heading, rows in _sections(audit, show):
        if rows:
            lines.append(f"{pad}  {heading}")
            lines += [f"{pad}    {row}" for row in rows]
    for sub in audit.subagents:
        if sub.audit is not None:
            lines += listing(sub.audit, show, depth=depth + 1)
    return lines


def summary(audit: AgentAudit, *, name: str | None = None) -> str:
    """One line: what serving this agent (``name``: as served) can execute or reach, sub-agents included."""
    tree = audit.walk()
    parts = []
    modules = sum(len(a.python_modules) for a in tree)
    missing = sum(m.where == "missing" for a in tree for m in a.python_modules)
    if modules:
        parts.append(counted(modules, "python module") + (f" ({missing} not found)" if missing else ""))
    for count, noun in (
        (sum(len(a.commands) for a in tree), "command hook"),
        (sum(len(a.mcp_commands) for a in tree), "MCP stdio command"),
        (sum(len(a.urls) for a in tree), "URL"),
        (sum(len(a.openapi_files) for a in tree), "OpenAPI file"),
    ):
        if count:
            parts.append(counted(count, noun))
    templates = [t for a in tree for t in a.template_files]
    if templates:
        flagged = sum(t.where != "folder" or t.absolute or t.symlink for t in templates)
        parts.append(counted(len(templates), "template file") + (f" ({flagged} flagged)" if flagged else ""))
    if any(a.fetch for a in tree):
        parts.append("fetch")
    roots = [f for a in tree for f in a.files]
    if roots:
        writable = sum(f.mode == "read-write" for f in roots)
        parts.append(f"files ({counted(len(roots), 'root')}, {writable} writable)")
    rules = ", ".join(
        f"{n} {kind}"
        for kind in ("allow", "ask", "deny")
        if (n := sum(len(a.permissions.get(kind, [])) for a in tree))
    )
    if any(a.shell for a in tree):
        parts.append("shell" + (f" ({rules})" if rules else " (no permission rules)"))
    elif rules:
        parts.append(f"permissions ({rules})")
    names = {v.name for a in tree for v in a.variables}
    if names:
        parts.append(counted(len(names), "env var"))
    subs = len(tree) - 1
    if subs:
        parts.append(counted(subs, "sub-agent"))
    return f"audit: {name or audit.agent}: " + (", ".join(parts) if parts else "nothing beyond its model")


def _traced(use: FetchUse) -> str:
    """What a ``fetch`` line adds when its requests carry the run's trace context."""
    return "; sends the trace context (traceparent) with --otel" if use.propagate_trace else ""
