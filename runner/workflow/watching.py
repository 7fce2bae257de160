"""``--watch`` for a running workflow: its files reloaded between steps (SPEC section 13, issue 17).

Watched: the team file and every file its step agents read (their ``extends`` chains, templates,
``python:`` tool modules; ``runner.watch.watched_files``). A change is checked as ``runner validate``
checks it (the workflow's references included) and, when valid, handed to the engine
(``WorkflowEngine.reload``): the changed agents' runtimes are built at once and their next step gets
them; new steps apply from the workflow's next top-level step, the finished ones keeping their
outputs. Steps already running finish as they began. An invalid change, or an agent that cannot
open, keeps the last good configuration and says why, with the error's location; the run goes on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from runner.agentfile.config import AgentConfig
from runner.agentfile.workflow import WorkflowConfig
from runner.errors import ConfigError, ConfigErrors, RunnerError
from runner.watch import watch_files, watched_files

if TYPE_CHECKING:
    from runner.workflow.engine import WorkflowEngine

__all__ = ["load_workflow", "watch_workflow"]

#: ``report(level, text)``: level ``info`` (reloaded) or ``error`` (kept the last good config).
Report = Callable[[str, str], None]


def load_workflow(
    path: Path, *, extra_vars: Iterable[str] = ()
) -> tuple[WorkflowConfig, dict[str, AgentConfig]]:
    """The team file's workflow and its agents' configurations, with every check ``validate`` makes
    (``ConfigErrors`` when it has errors; ``ConfigError`` when it has no workflow any more)."""
    from runner.workflow.loading import team_workflow

    team = team_workflow(path, extra_vars=extra_vars)
    if team is None:
        raise ConfigError("the file has no workflow: any more", file=str(path))
    return team.workflow, team.configs


def _watched(engine: WorkflowEngine) -> set[Path]:
    files = {engine.path.resolve()}
    for config in engine.configs.values():
        files |= watched_files(config)
    return files


def _message(exc: RunnerError) -> str:
    errors = list(exc) if isinstance(exc, ConfigErrors) else [exc]
    return "; ".join(str(error) for error in errors[:5])


async def watch_workflow(
    engine: WorkflowEngine, *, stop: asyncio.Event, report: Report, extra_vars: Iterable[str] = ()
) -> None:
    """Reload ``engine``'s workflow whenever its files change, until ``stop`` is set."""
    names_of_vars = list(extra_vars)
    while not stop.is_set():
        async for changed in watch_files(_watched(engine), stop=stop):
            names = ", ".join(sorted(p.name for p in changed))
            files = sorted(str(p) for p in changed)
            try:
                workflow, configs = load_workflow(engine.path, extra_vars=names_of_vars)
                # an edited tool module or template leaves the configuration as it was: its agent is
                # built again (an edit of the team file itself shows in the configurations)
                others = changed - {engine.path.resolve()}
                rebuild = [name for name, config in engine.configs.items() if watched_files(config) & others]
                said = await engine.reload(workflow, configs, rebuild=rebuild)
            except RunnerError as exc:
                text = _message(exc)
                report("error", f"reload failed ({names}), keeping the last good config: {text}")
                engine.record.event("reload_failed", files=files, error=text)
                continue
            what = ", ".join(said) if said else "nothing the run uses changed"
            report("info", f"reloaded ({names}): {what}")
            engine.record.event("reload", files=files, changed=said)
            break  # the set of watched files may have changed
