"""``runner eval``: an agent's cases run live, repeated and judged; pass rates with 95% Wilson
intervals; ``--against REV`` compares with another revision (docs/eval.md).

Registered on ``app`` (``runner/cli/app.py``) when ``runner/cli/main.py`` imports it; everything heavier
than typer is imported inside the command, so ``runner --help`` stays light.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from runner.cli.app import TEXT_ARG, VarOption, app
from runner.cli.common import display_path, handles_errors, parse_vars
from runner.text import counted

if TYPE_CHECKING:
    from runner.evals import Comparison, EvalReport
    from runner.evals.run import RunOutcome
    from runner.runtime.settings import RuntimeSettings

__all__ = ["EvalCommand", "eval_command", "exit_code", "run_eval_command"]


@dataclass(frozen=True)
class EvalCommand:
    """What the command line asked for."""

    agent: str
    repeat: int | None = None
    concurrency: int = 4
    judge: str | None = None
    against: str | None = None
    min_pass_rate: float | None = None
    variables: dict[str, Any] | None = None
    yes: bool = False
    json_output: bool = False
    agent_name: str | None = None
    html: Path | None = None


@app.command("eval")
@handles_errors
def eval_command(
    agent: Annotated[str, typer.Argument(click_type=TEXT_ARG, metavar="AGENT", help="Agent file or name.")],
    repeat: Annotated[
        int | None,
        typer.Option("--repeat", "-n", metavar="N", help="Runs per case (over each case's repeat:)."),
    ] = None,
    concurrency: Annotated[int, typer.Option("--concurrency", "-c", metavar="N", help="Runs at once.")] = 4,
    judge: Annotated[
        str | None, typer.Option("--judge", metavar="MODEL", help="The judge model (over the file's judge:).")
    ] = None,
    against: Annotated[
        str | None,
        typer.Option("--against", metavar="REV", help="Also run the cases at REV and compare, case by case."),
    ] = None,
    min_pass_rate: Annotated[
        float | None,
        typer.Option(
            "--min-pass-rate",
            metavar="X",
            help="Exit 1 when a case passes less often (default 1.0; with --against, only if given).",
        ),
    ] = None,
    var: VarOption = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Allow tools that ask for confirmation.")] = False,
    json_output: Annotated[bool, typer.Option("--json", help="Print the report as JSON on stdout.")] = False,
    agent_name: Annotated[
        str | None, typer.Option("--agent", metavar="NAME", help="The agent of a team file to evaluate.")
    ] = None,
    html: Annotated[
        Path | None,
        typer.Option(
            "--html", metavar="FILE", help="Also write the report as an HTML page (docs/reports.md)."
        ),
    ] = None,
) -> None:
    """Run an agent's evals: (or tests:) live, repeated; pass rates with 95% intervals.

    Exit 0 all good, 1 a case failed (or, with --against, a significant regression), 2 bad input.

    Example: runner eval agent.yaml --repeat 20 --concurrency 8 --against main
    """
    from runner.cli.commands import runtime_settings

    command = EvalCommand(
        agent=agent,
        repeat=repeat,
        concurrency=concurrency,
        judge=judge,
        against=against,
        min_pass_rate=min_pass_rate,
        variables=parse_vars(var),
        yes=yes,
        json_output=json_output,
        agent_name=agent_name,
        html=html,
    )
    raise typer.Exit(run_eval_command(command, runtime_settings(None)))


def run_eval_command(command: EvalCommand, settings: RuntimeSettings) -> int:
    """Load, check, run (both revisions with ``--against``), print; the exit code."""
    from runner.tools.bounded import run_to_end

    _check_options(command)
    runs: list[list[RunOutcome]] = []
    now, before = run_to_end(_evaluate(command, replace(settings, write_transcript=False), runs))
    from runner.evals import compare

    comparison = compare(now, before) if before is not None else None
    code = exit_code(now, comparison, command.min_pass_rate)
    if command.html is not None:
        _write_html(command.html, now, before, comparison, runs)
    if command.json_output:
        payload: dict[str, Any] = now.as_dict()
        if before is not None and comparison is not None:
            payload["against"] = {**before.as_dict(), "comparison": comparison.as_dict()}
        payload["exit_code"] = code
        typer.echo(json.dumps(payload, indent=2, ensure_ascii=False))
    else:
        _print_report(now, before, comparison)
    return code


def _check_options(command: EvalCommand) -> None:
    from runner.errors import ConfigError

    if command.concurrency < 1:
        raise ConfigError("--concurrency must be at least 1")
    if command.repeat is not None and command.repeat < 1:
        raise ConfigError("--repeat must be at least 1")
    if command.min_pass_rate is not None and not 0.0 <= command.min_pass_rate <= 1.0:
        raise ConfigError("--min-pass-rate must be between 0 and 1")


async def _evaluate(
    command: EvalCommand, settings: RuntimeSettings, graded: list[list[RunOutcome]]
) -> tuple[EvalReport, EvalReport | None]:
    """Both sides are an ``AgentConfig`` run the same way, judged by the same judge (this side's);
    each side's runs are appended to ``graded`` (this side first) as they are graded."""
    from runner.agentfile import load_agent
    from runner.agentfile.revisions import at_revision, revision_of
    from runner.cli.guard import note_secrets
    from runner.errors import ConfigError
    from runner.evals import Judge, eval_cases, judge_config, require_judge, run_eval

    variables = dict(command.variables or {})
    from runner.runnable import resolve

    target = resolve(
        command.agent, agent=command.agent_name, extra_vars=variables, workflows=False, door="runner eval"
    )
    config = target.agent_config
    note_secrets(config)
    cases = eval_cases(config, command.repeat)
    spec = judge_config(config, command.judge)
    require_judge(spec, [c.name for c in cases if c.expect.judge], config)
    judge = Judge(spec, settings) if spec is not None else None

    async def run(agent: Any, agent_cases: Any, revision: str | None) -> EvalReport:
        runs = sum(case.repeat for case in agent_cases)
        where = f" at {revision}" if revision else ""
        typer.echo(
            f"eval {agent.name}{where}: {counted(runs, 'run')} of {counted(len(agent_cases), 'case')}, "
            f"{command.concurrency} at a time",
            err=True,
        )
        return await run_eval(
            agent,
            agent_cases,
            judge=judge,
            settings=settings,
            concurrency=command.concurrency,
            variables=variables,
            assume_yes=command.yes,
            revision=revision,
            on_outcome=_collecting(graded),
        )

    try:
        if command.against is None:
            return await run(config, cases, None), None
        try:  # the same loader as --rev: git's objects, a tree cached by commit, escapes refused
            path = at_revision(config.path, command.against, home=settings.home)
        except ConfigError as exc:
            raise ConfigError(f"--against {command.against}: {exc.message}", hint=exc.hint) from None
        revision = revision_of(path)
        commit = revision.commit if revision is not None else ""
        old = load_agent(path, agent=command.agent_name, extra_vars=list(variables))
        note_secrets(old)
        old_cases = eval_cases(old, command.repeat)
        require_judge(spec, [c.name for c in old_cases if c.expect.judge], old)
        now = await run(config, cases, None)
        before = await run(old, old_cases, f"{command.against} ({commit[:12]})")
        before.path = str(config.path)  # the file it was, not the copy in the revision's tree
        return now, before
    finally:
        if judge is not None:
            await judge.aclose()


def _collecting(runs: list[list[RunOutcome]]) -> Callable[[RunOutcome, int, int], None]:
    """``_progress`` that also keeps each run (one list per side) for the HTML page's drill-down."""
    side: list[RunOutcome] = []
    runs.append(side)

    def on_outcome(outcome: RunOutcome, done: int, total: int) -> None:
        side.append(outcome)
        _progress(outcome, done, total)

    return on_outcome


def _write_html(
    path: Path,
    now: EvalReport,
    before: EvalReport | None,
    comparison: Comparison | None,
    runs: list[list[RunOutcome]],
) -> None:
    from runner.cli.report_cli import page_redactor
    from runner.report import eval_data, eval_page, write_page

    other = None
    if before is not None and comparison is not None:
        other = {**before.as_dict(), "comparison": comparison.as_dict()}
    data = eval_data(
        now.as_dict(),
        before=other,
        runs=runs[0] if runs else None,
        before_runs=runs[1] if len(runs) > 1 else None,
    )
    page = eval_page(data, redactor=page_redactor())
    write_page(path, page)
    typer.echo(f"wrote {display_path(str(path))} ({len(page.encode('utf-8')):,} bytes)", err=True)


def _progress(outcome: RunOutcome, done: int, total: int) -> None:
    """One line on stderr as each run is graded: the eval is not silent until its table."""
    typer.echo(
        f"  {done}/{total} {outcome.case}#{outcome.index} {outcome.status} ({outcome.seconds:.1f} s)",
        err=True,
    )


def exit_code(now: EvalReport, comparison: Comparison | None, min_pass_rate: float | None) -> int:
    """0 all good; 1 a case below ``min_pass_rate`` (default 1.0 without ``--against``) or with
    errors, or with ``--against`` a significant regression or a case that could not be compared."""
    if comparison is not None:
        if comparison.regressions or any(not change.comparable for change in comparison.changes):
            return 1
        if min_pass_rate is None:
            return 0
    floor = 1.0 if min_pass_rate is None else min_pass_rate
    for case in now.cases:
        if case.pass_rate is None or case.pass_rate < floor or (comparison is None and case.errors):
            return 1
    return 0


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _money(value: float | None) -> str:
    return "?" if value is None else f"${value:.4f}"


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in rows
    ]
    return "\n".join(line.rstrip() for line in lines)


def _report_text(report: EvalReport) -> str:
    rows = [["case", "runs", "pass", "fail", "error", "rate", "95% CI", "tokens", "cost", "time"]]
    for case in report.cases:
        low, high = case.interval
        ci = f"{low:.0%}-{high:.0%}" if case.judged else "-"
        cost = _money(
            case.cost_usd if case.judge_cost_usd is None else (case.cost_usd or 0) + case.judge_cost_usd
        )
        rows.append(
            [
                case.name,
                str(case.runs),
                str(case.passes),
                str(case.failures),
                str(case.errors),
                _rate(case.pass_rate),
                ci,
                str(case.tokens + case.judge_tokens),
                cost,
                f"{case.seconds:.1f} s",
            ]
        )
    where = display_path(report.path) + (f" at {report.revision}" if report.revision else "")
    lines = [
        f"{report.agent} ({where}), judge: {report.judge or 'none'}, {report.seconds:.1f} s",
        _table(rows),
    ]
    for case in report.cases:
        for problem, runs in case.problems.most_common():
            tag = f"{runs} run{'s' if runs != 1 else ''}"
            lines.append(f"  {case.name} ({tag}): " + problem.replace("\n", "\n    "))
    return "\n".join(lines)


def _comparison_text(comparison: Comparison, before: EvalReport) -> str:
    rows = [["case", "before", "now", "change", "p", "verdict"]]
    for change in comparison.changes:
        delta = "-" if change.delta is None else f"{change.delta:+.0%}"
        p_value = "-" if change.p_value is None else f"{change.p_value:.3g}"
        rows.append(
            [
                change.name,
                _rate(change.before.pass_rate),
                _rate(change.after.pass_rate),
                delta,
                p_value,
                change.verdict,
            ]
        )
    lines = [f"against {before.revision} (Fisher's exact test, two-sided, alpha 0.05):", _table(rows)]
    if comparison.only_now:
        lines.append("only now (not compared): " + ", ".join(comparison.only_now))
    if comparison.only_before:
        lines.append(f"only at {before.revision} (not compared): " + ", ".join(comparison.only_before))
    regressions = comparison.regressions
    if regressions:
        lines.append("significant regression: " + ", ".join(change.name for change in regressions))
    return "\n".join(lines)


def _print_report(now: EvalReport, before: EvalReport | None, comparison: Comparison | None) -> None:
    typer.echo(_report_text(now))
    if before is not None and comparison is not None:
        typer.echo("")
        typer.echo(_report_text(before))
        typer.echo("")
        typer.echo(_comparison_text(comparison, before))
