"""``runner validate AGENT...``: every mistake of every file in one run, each located.

Errors go to stderr as ``FILE:LINE:COL: PATH: message`` in file order, a valid file gets one
``ok`` line on stdout, exit 2 when any file is invalid. A folder is searched for agent files; YAML
in it that is not an agent (a scripted model's script, a fragment other files extend) is skipped
with one note on stderr (a ``skipped`` entry with ``--json``). A file named on the command line
that is not an agent is an error.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer

from runner.agentfile.discover import discover, search_folder, skipped_note, top_level
from runner.agentfile.files import AgentFile, every_error, find_agent
from runner.agentfile.loader import explain as explain_values
from runner.agentfile.survey import Survey, errors_of, survey_file
from runner.agentfile.validate import sort_errors
from runner.cli.common import display_path, echo_error
from runner.errors import ConfigError

__all__ = ["run_validate"]


@dataclass(frozen=True)
class _Target:
    """One file to report on: an agent file, a skipped non-agent, or an argument that failed."""

    shown: str
    path: Path | None = None
    error: ConfigError | None = None
    skipped: str | None = None
    explicit: bool = False


def _targets(refs: list[str], env: Mapping[str, str]) -> list[_Target]:
    """Each AGENT argument as files (folders searched recursively, non-agents marked)."""
    out: list[_Target] = []
    for ref in refs:
        try:
            path = find_agent(ref)
        except ConfigError as exc:
            out.append(_Target(ref, error=exc))
            continue
        if not path.is_dir():
            out.append(_Target(display_path(str(path)), path, explicit=True))
            continue
        found = search_folder(path)
        if not found:
            out.append(
                _Target(ref, error=ConfigError("no .yaml or .yml files in this directory", file=str(path)))
            )
            continue
        split = discover(found, env=env)
        if not split.agents:
            what = "1 YAML file that is not" if len(found) == 1 else f"{len(found)} YAML files that are not"
            reason = ConfigError(
                f"no agent files in this directory ({what} an agent)",
                file=str(path),
                hint="an agent file has `version: 1` at its top level",
            )
            out.append(_Target(ref, error=reason))
        for p in found:
            out.append(_Target(display_path(str(p)), p, skipped=split.skipped.get(p)))
    return out


def _not_an_agent(path: Path, env: Mapping[str, str]) -> ConfigError | None:
    """The error of a file named on the command line that is not an agent file."""
    top = top_level(path, env=env)
    if top is None or not top.keys or not top.unversioned:
        return None  # unreadable, empty or not a mapping: the loader says so; or an agent
    return ConfigError(
        "not an agent file: it has no version: key",
        file=str(path),
        hint="an agent file starts with `version: 1` and a `name:`",
    )


def _tool_entries(survey: Survey) -> Iterator[tuple[tuple[str | int, ...], int, dict[str, Any]]]:
    """Each ``tools:`` entry of each agent of the file that passed the schema: path, index, entry."""
    for name in survey.names:
        prefix = survey.prefix(name)
        tools = survey.document.data
        for part in (*prefix, "tools"):
            tools = tools.get(part) if isinstance(tools, dict) else None
        if not isinstance(tools, list):
            continue
        for i, entry in enumerate(tools):
            path = (*prefix, "tools", i)
            if isinstance(entry, dict) and survey.sound(path):
                yield path, i, entry


def _source_errors(survey: Survey) -> list[ConfigError]:
    """Checks of built-in tool sources that need no connection (their ``with:`` options)."""
    from runner.agentfile.build import build_source

    errors: list[ConfigError] = []
    for path, i, entry in _tool_entries(survey):
        if "builtin" in entry:
            from runner.tools.builtin import check_source  # only agents with built-in toolsets pay

            errors += check_source(build_source(survey.document, path, entry, i), survey.path)
    return errors


def _command_warnings(survey: Survey, env: Mapping[str, str]) -> list[ConfigError]:
    """An MCP server's ``command:`` that is not on PATH (nor beside this Python): it will not start.

    A warning, not an error: the file may be meant for another machine. A command given as a path
    is left to ``runner tools --check``.
    """
    import shutil
    import sys

    from runner.agentfile.yamlsrc import error_at

    warnings = []
    for path, _, entry in _tool_entries(survey):
        server = entry.get("mcp")
        if not isinstance(server, dict):
            continue  # a URL
        command = server.get("command")
        if not isinstance(command, str) or os.sep in command:
            continue
        search = (server.get("env") or {}).get("PATH") or env.get("PATH")
        if shutil.which(command, path=search) or shutil.which(command, path=str(Path(sys.executable).parent)):
            continue
        where = (*path, "mcp", "command")
        warnings.append(
            error_at(
                f"'{command}' is not found on PATH: this MCP server will not start here",
                survey.document.sources.value(where),
                where,
                hint="install it, or give its full path; runner tools --check tries to start it",
            )
        )
    return warnings


def _check(
    path: Path, *, explicit: bool, env: Mapping[str, str], variables: Mapping[str, Any]
) -> tuple[AgentFile | None, list[ConfigError], list[ConfigError]]:
    """Every error of one file, and the file when it is valid; its warnings."""
    if explicit:
        refused = _not_an_agent(path, env)
        if refused is not None:
            return None, [refused], []
    try:
        survey = survey_file(path, env=env)
    except ConfigError as exc:
        return None, sort_errors(errors_of(exc)), []
    errors = sort_errors([*every_error(survey, extra_vars=variables.keys()), *_source_errors(survey)])
    warnings = _command_warnings(survey, env)
    if errors:
        return None, errors, warnings
    return AgentFile(survey.path, survey.document, survey.names, survey.is_team), [], warnings


def _entry(
    target: _Target, *, explain: bool, env: Mapping[str, str], variables: Mapping[str, Any]
) -> dict[str, Any]:
    """The report of one target (the ``--json`` entry); ``errors`` holds ``ConfigError``s here."""
    if target.error is not None:
        return {"file": target.shown, "valid": False, "errors": [target.error]}
    assert target.path is not None
    if target.skipped is not None:
        return {"file": target.shown, "valid": True, "errors": [], "agents": [], "skipped": target.skipped}
    agent_file, errors, warnings = _check(target.path, explicit=target.explicit, env=env, variables=variables)
    entry: dict[str, Any] = {"file": target.shown, "valid": not errors, "errors": errors}
    if warnings:
        entry["warnings"] = warnings
    if agent_file is not None:
        entry["agents"] = list(agent_file.names)
        if explain:
            entry["explain"] = {
                name: [
                    {"key": row.key, "file": display_path(row.file), "line": row.line}
                    for row in explain_values(agent_file.document, agent_file.prefix(name))
                ]
                for name in agent_file.names
            }
    return entry


def _print(entry: dict[str, Any]) -> None:
    for error in entry["errors"]:
        echo_error(error)
    for warning in entry.get("warnings", ()):
        text = (
            str(warning).replace(warning.file, display_path(warning.file), 1)
            if warning.file
            else str(warning)
        )
        typer.echo(f"warning: {text}", err=True)
    if entry["errors"] or "skipped" in entry:
        return
    typer.echo(f"{entry['file']}: ok ({', '.join(entry['agents'])})")
    for name, rows in entry.get("explain", {}).items():
        typer.echo(f"  {name}:")
        for row in rows:
            typer.echo(f"    {row['key']:<18} {row['file']}:{row['line']}")


def _as_json(entry: dict[str, Any]) -> dict[str, Any]:
    shown: dict[str, list[dict[str, Any]]] = {}
    for key in ("errors", "warnings"):
        for error in entry.get(key, ()):
            data = error.as_dict()
            if data["file"]:
                data["file"] = display_path(str(data["file"]))
            shown.setdefault(key, []).append(data)
    return {
        **entry,
        "errors": shown.get("errors", []),
        **({"warnings": shown["warnings"]} if "warnings" in shown else {}),
    }


def run_validate(refs: list[str], *, json_output: bool, explain: bool, variables: Mapping[str, Any]) -> int:
    """Validate every file; print the results; return the exit code (0 valid, 2 invalid)."""
    env = os.environ
    report = [_entry(t, explain=explain, env=env, variables=variables) for t in _targets(refs, env)]
    if json_output:
        typer.echo(json.dumps([_as_json(entry) for entry in report], indent=2, ensure_ascii=False))
    else:
        for entry in report:
            _print(entry)
        skipped = {Path(e["file"]): e["skipped"] for e in report if "skipped" in e}
        note = skipped_note(skipped)
        if note:
            typer.echo(note, err=True)
    return 2 if any(not entry["valid"] for entry in report) else 0
