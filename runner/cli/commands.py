"""Bodies of the ``validate`` and ``render`` commands (kept out of main.py so --help stays fast)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import typer

from runner.cli.main import display_path, echo_error
from runner.errors import ConfigError
from runner.spec import find_agent, load_agent, load_file
from runner.spec.agentfile import AGENT_SUFFIXES, check_file
from runner.spec.loader import explain as explain_values


def _expand(refs: list[str]) -> list[tuple[str, Path | ConfigError]]:
    """Each AGENT argument as a path (directories searched recursively), or why it is not one."""
    out: list[tuple[str, Path | ConfigError]] = []
    for ref in refs:
        try:
            path = find_agent(ref)
        except ConfigError as exc:
            out.append((ref, exc))
            continue
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.suffix in AGENT_SUFFIXES and p.is_file())
            if not found:
                out.append((ref, ConfigError("no .yaml or .yml files in this directory", file=str(path))))
            out.extend((str(p), p) for p in found)
        else:
            out.append((ref, path))
    return out


def run_validate(
    refs: list[str], *, json_output: bool, explain: bool, variables: Mapping[str, Any]
) -> int:
    """Validate every file; print the results; return the exit code (0 valid, 2 invalid)."""
    report: list[dict[str, Any]] = []
    invalid = False
    for ref, target in _expand(refs):
        if isinstance(target, ConfigError):
            errors = [target]
            path_text = ref
        else:
            path_text = display_path(str(target))
            errors = check_file(target, extra_vars=variables.keys())
        invalid = invalid or bool(errors)
        entry: dict[str, Any] = {"file": path_text, "valid": not errors, "errors": [e.as_dict() for e in errors]}
        if not errors and isinstance(target, Path):
            agent_file = load_file(target)
            entry["agents"] = list(agent_file.names)
            if explain:
                entry["explain"] = {
                    name: [
                        {"key": row.key, "file": display_path(row.file), "line": row.line}
                        for row in explain_values(agent_file.document, agent_file.prefix(name))
                    ]
                    for name in agent_file.names
                }
        report.append(entry)
        if json_output:
            continue
        for error in errors:
            echo_error(error)
        if not errors:
            typer.echo(f"{path_text}: ok ({', '.join(entry['agents'])})")
            for name, rows in entry.get("explain", {}).items():
                typer.echo(f"  {name}:")
                for row in rows:
                    typer.echo(f"    {row['key']:<18} {row['file']}:{row['line']}")
    if json_output:
        for entry in report:
            for error in entry["errors"]:
                if error["file"]:
                    error["file"] = display_path(error["file"])
        typer.echo(json.dumps(report, indent=2, ensure_ascii=False))
    return 2 if invalid else 0


def run_render(
    ref: str, *, input: str, variables: Mapping[str, Any], agent_name: str | None, json_output: bool
) -> None:
    """Print the first request an agent would send, without calling a model."""
    from runner.loop.prompts import PromptRenderer

    spec = load_agent(find_agent(ref), agent=agent_name, extra_vars=variables.keys())
    renderer = PromptRenderer(spec, variables=variables)
    messages = [m for m in (renderer.system(input), renderer.user(input), renderer.status(input)) if m]
    model = spec.model.id if spec.model else None
    if json_output:
        typer.echo(json.dumps({"model": model, "messages": messages}, indent=2, ensure_ascii=False))
        return
    typer.echo(f"# agent: {spec.name} ({display_path(str(spec.path))})")
    typer.echo(f"# model: {model or '(none: set model: in the file or RUNNER_DEFAULT_MODEL)'}")
    sources = ", ".join(s.label for s in spec.tools) or "none"
    typer.echo(f"# tool sources: {sources}")
    for message in messages:
        typer.echo(f"--- {message['role']} ---")
        typer.echo(message["content"])
