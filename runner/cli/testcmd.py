"""``runner test``: each agent's ``tests:`` cases, replayed from their cassettes (SPEC section 12).

A case runs its input on the target's runner (``runner.runnable``: an agent's session, or a team
file's whole workflow), as ``runner run -p`` would (turns that hooks queue run too), with every
model call answered by its cassette (strict: a changed request fails with a diff; a workflow's steps
one at a time, in the file's order); tools run for real, and the ones that ask for confirmation are
refused unless the case says ``yes: true`` (as for a user's ``runner run`` without ``--yes``).
Then ``expect`` is checked on the run's ``Outcome``: ``status`` (without it, ``limit``,
``interrupted`` and ``error`` fail), ``tools_refused``, ``output_contains``, ``output_matches``,
``tools_called`` (in order with ``ordered``; a workflow's: every step's calls, in the order they
were made), ``max_steps``, and on the
structured answer (``output:``; without it, the answer text parsed as JSON) ``output_schema`` and
``output_json`` (``runner.testing.expect``). ``--update`` records the cassettes again against the
live model, into a file beside it that replaces the cassette only when the case passes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import typer

from runner.agentfile.config import TestCaseConfig
from runner.cli.common import display_path
from runner.cli.guard import note_secrets
from runner.errors import RunnerError
from runner.runnable import Target, WorkflowRunner, runner_for
from runner.runtime.settings import RuntimeSettings
from runner.session import RunOptions
from runner.session.outcome import Outcome
from runner.store.transcript import new_session_id
from runner.testing.expect import Structured, check_expectations
from runner.text import counted
from runner.tools.bounded import run_to_end

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


def structured_answer(target: Target, runner: Any, outcome: Outcome) -> Structured:
    """The answer a case's structured checks read: the last turn's value under ``output:`` (a
    workflow's output when it is not text), else the answer text parsed as JSON."""
    if target.workflow is not None:
        value = runner.last.output if runner.last is not None else None
        if value is None:
            return Structured(missing="the workflow gave no output")
        return Structured.from_text(value) if isinstance(value, str) else Structured(value)
    config = target.config
    assert config is not None
    if config.output is None:
        return Structured.from_text(outcome.answer)
    result = runner.last
    turn = result.turns[-1] if result is not None and result.turns else None
    if turn is not None and turn.structured:
        return Structured(turn.value)
    ended = f"the turn ended ({turn.reason})" if turn is not None else "no turn ran"
    return Structured(
        missing=f"no structured output: {ended} without an answer that matches {config.output.where}"
    )


async def run_case(
    target: Target, case: TestCaseConfig, settings: RuntimeSettings, *, update: bool
) -> CaseOutcome:
    """Run one case of an agent or of a team file's workflow (one runner, one cassette) and check it."""
    outcome = CaseOutcome(target.name, case.name)
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
    start = time.perf_counter()
    runner = runner_for(target, settings)
    if isinstance(runner, WorkflowRunner):  # a workflow's steps allow what the case allows
        runner.assume_yes = case.yes
    try:
        ended, unused = await _run(runner, target, case, settings)
    except RunnerError as exc:
        outcome.failures.append(_in_test_terms(exc, update=update))
        ended = None
    finally:
        await runner.aclose()
    outcome.seconds = time.perf_counter() - start
    if ended is not None:
        if unused:
            outcome.failures.append(unused)
        outcome.failures.extend(
            check_expectations(
                case,
                ended.answer,
                list(ended.tools),
                ended.steps,
                structured=structured_answer(target, runner, ended),
                outcome=ended,
            )
        )
    if update:
        _keep_recording(recording, case.cassette, outcome)
    return outcome


async def _run(
    runner: Any, target: Target, case: TestCaseConfig, settings: RuntimeSettings
) -> tuple[Outcome, str | None]:
    """The case's run and, when the cassette holds more answers than it used, what to say."""
    from runner.store.replay import ReplayModel

    if target.workflow is not None:
        from runner.workflow.cassette import open_cassette
        from runner.workflow.record import WorkflowRecord

        assert target.workflow is not None
        cassette = open_cassette(target.workflow, target.path, target.configs, settings)
        engine = runner.engine(
            case.input,
            variables=dict(case.vars),
            cassette=cassette,
            record=WorkflowRecord(new_session_id(), None),
        )
        ended = await runner.run_engine(engine)
        notes = runner.last.notes if runner.last is not None else []
        unused = "; ".join(f"the workflow: {n}" for n in notes if "were not used" in n) or None
        return ended, unused if ended.ok else None
    options = RunOptions(variables=dict(case.vars), assume_yes=case.yes)
    ended = await runner.run([case.input], options=options, raise_errors=True)
    model = (await runner.open()).model
    unused = None
    if isinstance(model, ReplayModel) and model.remaining():
        unused = (
            f"the run made fewer model calls than recorded ({counted(model.remaining(), 'response')} unused)"
        )
    return ended, unused


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


def _targets(refs: list[str]) -> list[Target]:
    """Every agent of the files, and the workflow of each team file whose ``tests:`` are for it."""
    from runner.runnable.target import targets_of

    found: list[Target] = []
    for ref in refs:
        found.extend(targets_of(ref))
    for target in found:
        for config in target.configs.values():
            note_secrets(config)
    return found


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
    results: list[bool] = []
    settings = replace(settings, write_transcript=False)
    targets = _targets(refs)
    workflows = {t.path for t in targets if t.workflow is not None and t.workflow.tests}
    for target in targets:
        cases = target.workflow.tests if target.workflow is not None else target.agent_config.tests
        if target.workflow is None and not cases and target.path not in workflows:
            typer.echo(f"{target.name}: no tests ({display_path(str(target.path))})", err=True)
        for case in cases:
            outcome = run_to_end(run_case(target, case, settings, update=update))
            results.append(_show(_cassette_as_shown(outcome, case.cassette)))
    passed, failed = results.count(True), results.count(False)
    typer.echo(f"{passed} passed, {failed} failed")
    return 1 if failed else 0
