"""``runner test``: each agent's ``tests:`` cases, replayed from their cassettes (SPEC section 12).

A case runs its input with ``Session.run``, as ``runner run -p`` would (turns that hooks queue run
too), with the model answered by its cassette (strict: a changed request fails with a diff); tools
run for real. Then ``expect`` is checked: ``output_contains``,
``output_matches``, ``tools_called`` (in order with ``ordered``), ``max_steps``, and on the
structured answer (``output:``; without it, the answer text parsed as JSON) ``output_schema`` and
``output_json`` (``runner.testing.expect``). ``--update`` records the cassettes again against the
live model. A team file's own ``tests:`` are cases of its workflow (``testcmd_workflow``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from runner.agentfile import find_agent, load_agent, load_file
from runner.agentfile.config import AgentConfig, TestCaseConfig
from runner.agentfile.workflow import WorkflowConfig
from runner.cli.common import display_path
from runner.cli.guard import note_secrets
from runner.errors import RunnerError
from runner.runtime.settings import RuntimeSettings
from runner.session import RunOptions, Session, open_runtime
from runner.session.events import AssistantMessage, LoopEvent
from runner.testing.expect import Structured, check_expectations
from runner.text import counted
from runner.tools.bounded import run_to_end

if TYPE_CHECKING:
    from runner.session import RunResult

__all__ = ["CaseOutcome", "check_expectations", "run_case", "run_tests", "structured_answer"]


@dataclass
class CaseOutcome:
    """What one case did and whether it met its expectations."""

    agent: str
    case: str
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return not self.failures


def structured_answer(config: AgentConfig, result: RunResult) -> Structured:
    """The answer a case's structured checks read: the last turn's value under ``output:``, else
    the answer text parsed as JSON."""
    if config.output is None:
        return Structured.from_text(result.output)
    turn = result.turns[-1] if result.turns else None
    if turn is not None and turn.structured:
        return Structured(turn.value)
    ended = f"the turn ended ({turn.reason})" if turn is not None else "no turn ran"
    return Structured(
        missing=f"no structured output: {ended} without an answer that matches {config.output.where}"
    )


async def run_case(
    config: AgentConfig, case: TestCaseConfig, settings: RuntimeSettings, *, update: bool
) -> CaseOutcome:
    """Run one case and check it."""
    from dataclasses import replace

    from runner.store.replay import ReplayModel

    outcome = CaseOutcome(config.name, case.name)
    if case.cassette is None:
        outcome.failures.append(
            "no cassette: add `cassette:` to the case and record it with runner test --update"
        )
        return outcome
    recording = case.cassette.with_name(case.cassette.name + ".recording")
    if update:  # into a file beside it: a failed recording keeps the old cassette (or none)
        settings = replace(settings, record=recording, replay=None)
    else:
        settings = replace(settings, record=None, replay=case.cassette)
    tools: list[str] = []

    def sink(event: LoopEvent) -> None:
        if isinstance(event, AssistantMessage):
            tools.extend(c["function"]["name"] for c in event.message.get("tool_calls") or ())

    start = time.perf_counter()
    try:
        runtime = await open_runtime(config, settings)
        try:
            options = RunOptions(variables=dict(case.vars), assume_yes=True)
            async with Session(runtime, sink=sink, options=options) as session:
                result = await session.run([case.input])
            model = runtime.model
            if isinstance(model, ReplayModel) and model.remaining():
                outcome.failures.append(
                    "the run made fewer model calls than recorded "
                    f"({counted(model.remaining(), 'response')} unused)"
                )
        finally:
            await runtime.aclose()
    except RunnerError as exc:
        outcome.failures.append(_in_test_terms(exc, update=update))
        result = None
    outcome.seconds = time.perf_counter() - start
    if result is not None:
        outcome.failures.extend(
            check_expectations(
                case, result.output, tools, result.steps, structured=structured_answer(config, result)
            )
        )
    if update:
        _keep_recording(recording, case.cassette, outcome)
    return outcome


def _in_test_terms(error: RunnerError, *, update: bool) -> str:
    """The error, its hint in terms of ``runner test`` (whose options are not ``runner run``'s)."""
    from runner.store.cassette import CassetteError

    if isinstance(error, CassetteError) and not update:
        return f"{error.message} (hint: record the case again with runner test --update)"
    return str(error)


def _keep_recording(recording: Path, cassette: Path, outcome: CaseOutcome) -> None:
    """A recording replaces the cassette only when its case passed; otherwise it is dropped."""
    if outcome.passed and recording.is_file():
        recording.replace(cassette)
        return
    recording.unlink(missing_ok=True)
    kept = "the old cassette is kept" if cassette.is_file() else "no cassette was written"
    outcome.failures.append(f"the recording failed, so {kept}")


def _agents(refs: list[str]) -> tuple[list[AgentConfig], list[tuple[Path, WorkflowConfig]]]:
    """The agents of the files, and the workflows of team files that have ``tests:`` for them."""
    from runner.cli.workflow_cmd import team_workflow

    specs: list[AgentConfig] = []
    workflows: list[tuple[Path, WorkflowConfig]] = []
    for ref in refs:
        path = find_agent(ref)
        agent_file = load_file(path)
        specs.extend(
            load_agent(path, agent=name if agent_file.is_team else None) for name in agent_file.names
        )
        workflow = team_workflow(path) if agent_file.is_team else None
        if workflow is not None and workflow.tests:
            workflows.append((path, workflow))
    for config in specs:
        note_secrets(config)
    return specs, workflows


def _cassette_as_shown(outcome: CaseOutcome, cassette: Path | None) -> CaseOutcome:
    """The failures naming the cassette as the user knows it: relative to here, or ``path@REV``
    for a file of ``--rev`` (not its place in the revision cache)."""
    if cassette is not None:
        shown = display_path(str(cassette))
        outcome.failures = [failure.replace(str(cassette), shown) for failure in outcome.failures]
    return outcome


def _show(outcome: CaseOutcome) -> bool:
    label = f"{outcome.agent}/{outcome.case}"
    if outcome.passed:
        typer.echo(f"PASS {label} ({outcome.seconds:.2f} s)")
        return True
    typer.echo(f"FAIL {label} ({outcome.seconds:.2f} s)")
    for problem in outcome.failures:
        typer.echo("  " + problem.replace("\n", "\n  "))
    return False


def run_tests(refs: list[str], *, update: bool, settings: RuntimeSettings) -> int:
    """Run every case of every agent; print one line per case and the summary; the exit code."""
    from runner.cli.testcmd_workflow import run_workflow_case

    results: list[bool] = []
    settings = replace(settings, write_transcript=False)
    agents, workflows = _agents(refs)
    for config in agents:
        if not config.tests and not any(path == config.path for path, _ in workflows):
            typer.echo(f"{config.name}: no tests ({display_path(str(config.path))})", err=True)
        for case in config.tests:
            outcome = run_to_end(run_case(config, case, settings, update=update))
            results.append(_show(_cassette_as_shown(outcome, case.cassette)))
    for path, workflow in workflows:  # a team file's tests: run its workflow
        for case in workflow.tests:
            outcome = run_to_end(run_workflow_case(path, workflow, case, settings, update=update))
            results.append(_show(_cassette_as_shown(outcome, case.cassette)))
    passed, failed = results.count(True), results.count(False)
    typer.echo(f"{passed} passed, {failed} failed")
    return 1 if failed else 0
