"""Bodies of the ``validate`` and ``render`` commands (kept out of main.py so --help stays fast)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import typer

from runner.agentfile.discover import SKIPPED_DIRS
from runner.cli.common import display_path
from runner.cli.guard import note_secrets
from runner.errors import ConfigError
from runner.text import counted

__all__ = [
    "SKIPPED_DIRS",
    "run_agent",
    "run_render",
    "run_tools",
    "run_validate",
    "runtime_settings",
]


def run_validate(refs: list[str], *, json_output: bool, explain: bool, variables: Mapping[str, Any]) -> int:
    """Validate every file; print the results; return the exit code (0 valid, 2 invalid)."""
    from runner.cli.validate_cmd import run_validate as validate

    return validate(refs, json_output=json_output, explain=explain, variables=variables)


def run_render(
    ref: str, *, input: str, variables: Mapping[str, Any], agent_name: str | None, json_output: bool
) -> None:
    """Print the first request an agent would send, without calling a model; or a team's workflow."""
    import asyncio

    from runner.runnable import resolve
    from runner.session.opening import first_request

    target = resolve(ref, agent=agent_name, extra_vars=variables.keys())
    if target.workflow is not None:
        _render_workflow(target, json_output=json_output)
        return
    config = target.agent_config
    note_secrets(config)
    _warn_unknown_vars(config, variables)
    settings = runtime_settings(None)
    request = asyncio.run(first_request(config, input=input, variables=dict(variables), settings=settings))
    if json_output:
        typer.echo(json.dumps(request, indent=2, ensure_ascii=False))
        return
    typer.echo(f"# agent: {config.name} ({display_path(str(config.path))})")
    typer.echo(f"# model: {request['model']}")
    typer.echo(f"# function calling: {request['mode']} ({request['mode_why']})")
    output = request.get("output")
    if output is not None:
        typer.echo(f"# output: {output['how']}")
    for message in request["messages"]:
        typer.echo(f"--- {message['role']} ---")
        typer.echo(message["content"])
    tools = request["tools"] or []
    typer.echo(f"--- tools ({len(tools)}) ---")
    for tool in tools:
        typer.echo(json.dumps(tool, ensure_ascii=False))
    if output is not None:
        typer.echo("--- output schema ---")
        typer.echo(json.dumps(output["schema"], indent=2, ensure_ascii=False))
    for key, value in (request.get("params") or {}).items():  # temperature, params:, response_format
        typer.echo(f"--- {key} ---")
        typer.echo(json.dumps(value, ensure_ascii=False))


def _render_workflow(target: Any, *, json_output: bool) -> None:
    """Print the workflow of a team file (read and checked once, when it was resolved)."""
    from runner.cli.render_workflow import render_workflow

    render_workflow(target.file, json_output=json_output)


def runtime_settings(model: str | None, **changes: Any) -> Any:
    """The ``RuntimeSettings`` of ``RUNNER_*`` and the command line's ``--model``."""
    from dataclasses import replace

    from runner.runtime.settings import RuntimeSettings

    settings = RuntimeSettings.from_environment(model_override=model)
    return replace(settings, **changes) if changes else settings


def run_agent(
    ref: str | None,
    *,
    prompts: list[str],
    interactive: bool,
    variables: Mapping[str, Any],
    model: str | None,
    agent_name: str | None,
    session_id: str | None,
    yes: bool,
    json_output: bool,
    stream: bool | None,
    thinking: bool,
    record: Path | None = None,
    replay: Path | None = None,
    replay_strict: bool = True,
    watch: bool = False,
) -> int:
    """``runner run`` and ``runner resume``: the exit code."""
    import sys

    from runner.cli.run import RunRequest, execute
    from runner.session import RunOptions
    from runner.store.transcript import find_transcript, read_transcript

    settings = runtime_settings(model, record=record, replay=replay, replay_strict=replay_strict)
    if replay is not None:
        typer.echo(
            f"(replaying {display_path(str(replay))}: answers come from the cassette, not a model)", err=True
        )
    resume, member = None, None
    if session_id is not None:
        resume = read_transcript(find_transcript(settings.home, session_id))
        if "workflow" in resume.header:
            from runner.cli.workflow_cmd import resume_workflow

            if prompts or interactive:
                raise ConfigError(
                    f"{resume.session_id} is a workflow: it resumes on the input it began with",
                    hint=f"runner resume {resume.session_id}",
                )
            return resume_workflow(resume, settings, json_output=json_output, yes=yes, watch=watch)
        if not prompts and not interactive and not _waits_for_model(resume):
            typer.echo(
                f"session {resume.session_id} is complete: its last turn ended ({resume.status()}), "
                "and nothing waits for the model",
                err=True,
            )
            typer.echo(f"to go on: runner resume {resume.session_id} -p TEXT, or -i to chat", err=True)
            return 0
        ref = ref or str(resume.header.get("agent_path", ""))
        member = resume.header.get("agent")
    assert ref is not None
    from runner.runnable import resolve

    target = resolve(
        ref,
        agent=agent_name,
        member=member,
        extra_vars=variables.keys(),
        workflows=resume is None and not interactive,
        door="a resumed agent session" if resume is not None else "the chat (-i)",
    )
    if target.workflow is not None:
        from runner.cli.workflow_cmd import run_workflow

        return run_workflow(
            target,
            settings,
            prompts=prompts,
            variables=dict(variables),
            json_output=json_output,
            yes=yes,
            watch=watch,
        )
    config = target.agent_config
    note_secrets(config)
    _warn_unknown_vars(config, variables)
    if resume is not None:
        _check_same_agent(resume, config)
    if not prompts and not interactive and resume is None:
        if sys.stdin.isatty():
            raise ConfigError(
                "nothing to run: give a prompt with -p, or -i for a chat", hint=f"runner run {ref} -p 'Hello'"
            )
        piped = sys.stdin.read()
        if not piped.strip():
            raise ConfigError("nothing to run: standard input was empty")
        prompts = [piped]
    request = RunRequest(
        config=config,
        prompts=prompts,
        interactive=interactive,
        options=RunOptions(variables=dict(variables), stream=stream, assume_yes=yes),
        settings=settings,
        json_output=json_output,
        thinking=thinking,
        resume=resume,
        watch=watch,
    )
    return execute(request)


def _waits_for_model(resume: Any) -> bool:
    """Whether a saved session stopped mid-turn: its history, restored, ends waiting for the model."""
    from runner.session.conversation import Conversation

    conversation = Conversation()
    conversation.restore(resume.history(), turns=resume.turns())
    return conversation.needs_continuation()


def _check_same_agent(resume: Any, config: Any) -> None:
    """A session continues only with the agent that began it (its tools would be gone otherwise)."""
    recorded = resume.header.get("agent")
    if recorded and recorded != config.name:
        where = resume.header.get("agent_path") or "?"
        raise ConfigError(
            f"session {resume.session_id} belongs to agent '{recorded}' ({display_path(str(where))}), "
            f"not to '{config.name}' ({display_path(str(config.path))})",
            hint=f"runner resume {resume.session_id}, or --agent {recorded} for a team file",
        )


async def _open_tools(config: Any, settings: Any) -> tuple[Any, list[Any]]:
    """Every source of ``config`` that opens, and the failures (closed again before returning)."""
    from runner.runtime.runtime import source_context
    from runner.runtime.sources import SourceSet
    from runner.session.subagent import agent_tool_factory

    ctx = source_context(config, settings, agent_tools=agent_tool_factory(settings))
    sources, failures = await SourceSet.open_each(config.tools, ctx)
    try:
        return sources.registry(), failures
    finally:
        await sources.aclose()


def _check_sources(config: Any, settings: Any) -> int:
    """Open each source on its own, timed: one line per source; exit 2 if any failed."""
    import asyncio
    import time
    from dataclasses import replace

    # --check connects for real: a cached OpenAPI document says nothing about the server today.
    settings = replace(settings, refresh_sources=True)

    async def one(source: Any) -> tuple[str, str]:
        start = time.perf_counter()
        registry, failures = await _open_tools(replace(config, tools=(source,)), settings)
        problems = [str(failures[0].error)] if failures else []
        if not problems and source.kind == "openapi":
            from runner.tools.openapi import unreachable

            problems = await unreachable(registry.tools())
        ms = (time.perf_counter() - start) * 1000
        if problems:
            return "FAIL", f"{'; '.join(problems)} ({ms:.0f} ms)"
        return "ok", f"{counted(len(registry), 'tool')}: {', '.join(registry.names())} ({ms:.0f} ms)"

    failed = 0
    for source in config.tools:
        status, detail = asyncio.run(one(source))
        failed += status == "FAIL"
        typer.echo(f"{status:<4} tools[{source.index}] {source.label}  {detail}")
    typer.echo(f"{len(config.tools) - failed} ok, {failed} failed")
    return 2 if failed else 0


def run_tools(ref: str, *, json_output: bool, agent_name: str | None, check: bool = False) -> int:
    """Print the resolved tool table; exit 2 when a source failed."""
    import asyncio

    from runner.runnable import resolve

    settings = runtime_settings(None)
    config = resolve(ref, agent=agent_name, workflows=False, door="runner tools").agent_config
    note_secrets(config)
    if check:
        return _check_sources(config, settings)
    registry, failures = asyncio.run(_open_tools(config, settings))
    if json_output:
        typer.echo(json.dumps(registry.definitions(), indent=2, ensure_ascii=False))
    else:
        rows = [(t.name, f"{t.source_kind}:{t.source_id}", _summary(t.description)) for t in registry.tools()]
        if not rows:
            opened = "its sources gave none" if config.tools else "its file has no `tools:`"
            typer.echo(f"{config.name} has no tools: {opened}", err=True)
        width = max([len(r[0]) for r in rows] + [4])
        swidth = max([len(r[1]) for r in rows] + [6])
        if rows:
            typer.echo(f"{'name':<{width}}  {'source':<{swidth}}  description")
        for name, source, description in rows:
            typer.echo(f"{name:<{width}}  {source:<{swidth}}  {description}")
        for rename in registry.renames:
            typer.echo(f"renamed: {rename.original} -> {rename.final} ({rename.reason})", err=True)
        _list_skills(config)
    for failure in failures:
        typer.echo(f"failed: {failure.spec.label}: {failure.error}", err=True)
    return 2 if failures else 0


def _list_skills(config: Any) -> None:
    """The skills of ``skills:`` under the tool table: name, folder, summary, scripts."""
    if not config.skills:
        return
    typer.echo(f"\nskills ({len(config.skills)}; loaded on demand with skills_load):")
    for skill in config.skills:
        typer.echo(f"  {skill.name}  {display_path(str(skill.folder))}  {_summary(skill.description, 60)}")
        if skill.scripts:
            typer.echo(f"    scripts (run through shell): {', '.join(skill.scripts)}")


def _summary(description: str, limit: int = 80) -> str:
    """A tool's summary for the table: its first paragraph, cut at a word with an ellipsis
    (``--json`` shows the whole description)."""
    first = " ".join(description.strip().split("\n\n", 1)[0].split())
    if len(first) <= limit:
        return first
    cut = first[: limit - 1].rsplit(" ", 1)[0] if " " in first[: limit - 1] else first[: limit - 1]
    return cut.rstrip(" ,;:") + "…"


def _warn_unknown_vars(config: Any, variables: Mapping[str, Any]) -> None:
    """``--var NAME=...`` that the agent neither declares nor uses: a warning, with "did you mean"."""
    import difflib

    from runner.agentfile.templates import TemplateEngine

    used: set[str] = set(config.vars)
    engine = TemplateEngine(config.directory)
    for source in (config.prompts.system, config.prompts.user, config.prompts.status):
        if source is not None:
            try:
                used |= engine.undeclared(source)
            except ConfigError:
                return  # validate reports it; no guessing here
    for name in variables:
        if name not in used:
            close = difflib.get_close_matches(name, sorted(used), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            typer.echo(f"warning: --var {name} is not a variable of {config.name}{hint}", err=True)
