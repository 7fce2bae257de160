"""Running an eval: each case of an agent, repeated, live, on the batch machinery, each run checked.

A case's ``repeat`` runs are items of one ``Batch`` (one runtime, ``concurrency`` workers). Each run
is checked as ``runner test`` checks a case (``check_expectations``); when those checks pass and the
case has ``expect.judge``, the judge grades the answer. A run is then ``pass``, ``fail`` or
``error``: the agent's run failed (a model error, say), or the judge could not be reached or gave no
verdict. Errors do not count in a case's pass rate: it is passes over passes and failures.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from runner.agentfile.config import AgentConfig, TestCaseConfig
from runner.batch import Batch, BatchItem, BatchLimits, ItemResult
from runner.errors import ConfigError, RunnerError
from runner.evals.judge import Judge, JudgeError
from runner.evals.stats import wilson
from runner.models.base import Usage
from runner.runtime.settings import RuntimeSettings
from runner.testing.expect import Structured, check_expectations

__all__ = ["CaseReport", "EvalReport", "RunOutcome", "eval_cases", "grade", "run_eval"]

RunStatus = Literal["pass", "fail", "error"]
#: How many distinct problems a case report keeps.
MAX_PROBLEMS = 5


@dataclass
class RunOutcome:
    """One run of one case, checked."""

    case: str
    index: int
    status: RunStatus = "pass"
    problems: list[str] = field(default_factory=list)
    judge_reason: str = ""
    usage: Usage = field(default_factory=Usage)
    judge_usage: Usage = field(default_factory=Usage)
    seconds: float = 0.0
    session_id: str | None = None


def _cost(a: float | None, b: float | None) -> float | None:
    return None if a is None and b is None else (a or 0.0) + (b or 0.0)


@dataclass
class CaseReport:
    """A case's runs, counted: the pass rate with its Wilson interval, tokens, cost and time."""

    name: str
    runs: int = 0
    passes: int = 0
    failures: int = 0
    errors: int = 0
    tokens: int = 0
    cost_usd: float | None = None
    judge_tokens: int = 0
    judge_cost_usd: float | None = None
    seconds: float = 0.0
    problems: Counter[str] = field(default_factory=Counter)

    def add(self, outcome: RunOutcome) -> None:
        self.runs += 1
        if outcome.status == "pass":
            self.passes += 1
        elif outcome.status == "fail":
            self.failures += 1
        else:
            self.errors += 1
        for problem in outcome.problems:
            if problem in self.problems or len(self.problems) < MAX_PROBLEMS:
                self.problems[problem] += 1
        self.tokens += outcome.usage.total_tokens
        self.cost_usd = _cost(self.cost_usd, outcome.usage.cost_usd)
        self.judge_tokens += outcome.judge_usage.total_tokens
        self.judge_cost_usd = _cost(self.judge_cost_usd, outcome.judge_usage.cost_usd)
        self.seconds += outcome.seconds

    @property
    def judged(self) -> int:
        """Runs with a pass or a fail (errors excluded)."""
        return self.passes + self.failures

    @property
    def pass_rate(self) -> float | None:
        return self.passes / self.judged if self.judged else None

    @property
    def interval(self) -> tuple[float, float]:
        """The 95% Wilson score interval of the pass rate."""
        return wilson(self.passes, self.judged)

    def as_dict(self) -> dict[str, Any]:
        low, high = self.interval
        return {
            "name": self.name,
            "runs": self.runs,
            "passes": self.passes,
            "failures": self.failures,
            "errors": self.errors,
            "pass_rate": self.pass_rate,
            "ci95": [round(low, 4), round(high, 4)],
            "tokens": self.tokens,
            "cost_usd": self.cost_usd,
            "judge_tokens": self.judge_tokens,
            "judge_cost_usd": self.judge_cost_usd,
            "seconds": round(self.seconds, 3),
            "problems": [{"problem": text, "runs": n} for text, n in self.problems.most_common()],
        }


@dataclass
class EvalReport:
    """An eval of one agent (at one revision): a report per case, in the file's order."""

    agent: str
    path: str
    revision: str | None
    """The revision the agent was read at (None: the file as it is)."""
    cases: list[CaseReport]
    seconds: float = 0.0
    judge: str | None = None

    def case(self, name: str) -> CaseReport | None:
        return next((c for c in self.cases if c.name == name), None)

    def as_dict(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "path": self.path,
            "revision": self.revision,
            "judge": self.judge,
            "seconds": round(self.seconds, 3),
            "cases": [case.as_dict() for case in self.cases],
        }


def eval_cases(config: AgentConfig, repeat: int | None = None) -> list[TestCaseConfig]:
    """The cases ``runner eval`` runs: ``evals:``, else ``tests:``; ``repeat`` (``--repeat``) over each
    case's own. Refuses (exit 2) an agent with no cases, or two cases of one name."""
    cases = list(config.evals or config.tests)
    if not cases:
        raise ConfigError(
            f"agent '{config.name}' has no evals: and no tests: to run",
            file=str(config.path),
            hint="add cases under evals: (or tests:), each with a name, an input and an expect:",
        )
    if repeat is not None and repeat < 1:
        raise ConfigError("--repeat must be at least 1")
    seen: set[str] = set()
    for case in cases:
        if case.name in seen:
            raise ConfigError(
                f"two cases are named '{case.name}': eval reports (and --against) know cases by name",
                file=str(config.path),
            )
        seen.add(case.name)
    return [replace(case, repeat=repeat) if repeat is not None else case for case in cases]


def structured_of(config: AgentConfig, result: ItemResult) -> Structured:
    """The answer a run's ``output_schema`` / ``output_json`` checks read (as ``runner test``)."""
    if config.output is None:
        return Structured.from_text(result.answer)
    if result.output is not None:
        return Structured(result.output)
    return Structured(
        missing=f"no structured output: the turn ended ({result.reason}) without an answer that "
        f"matches {config.output.where}"
    )


async def grade(
    config: AgentConfig, case: TestCaseConfig, index: int, result: ItemResult, judge: Judge | None
) -> RunOutcome:
    """Check one run of ``case``: its expectations, then (when they hold) the judge's verdict."""
    usage = result.usage
    outcome = RunOutcome(
        case.name,
        index,
        usage=Usage(
            usage.get("prompt_tokens", 0),
            usage.get("completion_tokens", 0),
            usage.get("total_tokens", 0),
            result.cost_usd,
        ),
        seconds=result.duration_s,
        session_id=result.session_id,
    )
    if result.status == "error" and case.expect.status != "error":
        outcome.status, outcome.problems = "error", [f"the run failed: {result.error}"]
        return outcome
    problems = check_expectations(
        case,
        result.answer,
        result.tools,
        result.steps,
        structured=structured_of(config, result),
        outcome=result.outcome(),
    )
    if problems:
        outcome.status, outcome.problems = "fail", problems
        return outcome
    if case.expect.judge is None:
        return outcome
    if judge is None:  # refused before the eval starts (require_judge); never reached
        raise ConfigError(f"case '{case.name}' has expect.judge, but no judge model is named")
    started = time.monotonic()
    try:
        verdict = await judge.grade(case.expect.judge, case.input, result.answer)
    except JudgeError as exc:
        outcome.status, outcome.problems, outcome.judge_usage = "error", [str(exc)], exc.usage
        return outcome
    except RunnerError as exc:
        outcome.status, outcome.problems = "error", [f"the judge failed: {exc}"]
        return outcome
    finally:
        outcome.seconds += time.monotonic() - started
    outcome.judge_usage, outcome.judge_reason = verdict.usage, verdict.reason
    if not verdict.passed:
        outcome.status, outcome.problems = "fail", [f"the judge: {verdict.reason or 'fail (no reason)'}"]
    return outcome


class EvalBatch(Batch):
    """The runs of an eval as one batch: each item is one run of a case, graded as it finishes."""

    def __init__(
        self,
        config: AgentConfig,
        cases: list[TestCaseConfig],
        *,
        judge: Judge | None,
        settings: RuntimeSettings,
        concurrency: int,
        variables: dict[str, Any] | None = None,
        assume_yes: bool = False,
        on_outcome: Callable[[RunOutcome, int, int], None] | None = None,
    ) -> None:
        self.case_of: dict[str, tuple[TestCaseConfig, int]] = {}
        self.on_outcome = on_outcome
        items: list[BatchItem] = []
        for case in cases:
            for index in range(1, case.repeat + 1):
                item_id = f"{case.name}#{index}"
                self.case_of[item_id] = (case, index)
                items.append(BatchItem(len(items) + 1, item_id, case.input, dict(case.vars), yes=case.yes))
        super().__init__(
            config,
            items,
            settings=settings,
            variables=variables,
            limits=BatchLimits(concurrency=concurrency),
            ordered=False,
            assume_yes=assume_yes,
        )
        self.judge = judge
        self.outcomes: list[RunOutcome] = []

    async def run_item(self, item: BatchItem) -> ItemResult:
        result = await super().run_item(item)
        case, index = self.case_of[str(item.id)]
        try:
            outcome = await grade(self.config, case, index, result, self.judge)
        except Exception as exc:  # a bug must not lose the run: it is an error of its own
            outcome = RunOutcome(case.name, index, "error", [f"internal error: {type(exc).__name__}: {exc}"])
        self.outcomes.append(outcome)
        if self.on_outcome is not None:
            self.on_outcome(outcome, len(self.outcomes), len(self.case_of))
        return result


async def run_eval(
    config: AgentConfig,
    cases: list[TestCaseConfig],
    *,
    judge: Judge | None,
    settings: RuntimeSettings,
    concurrency: int = 4,
    variables: dict[str, Any] | None = None,
    assume_yes: bool = False,
    revision: str | None = None,
    on_outcome: Callable[[RunOutcome, int, int], None] | None = None,
) -> EvalReport:
    """Run every case ``repeat`` times; the report per case (in the order of ``cases``).

    ``on_outcome(outcome, done, total)`` is told of each run as it is graded (the CLI's progress).
    """
    if concurrency < 1:
        raise ConfigError("--concurrency must be at least 1")
    batch = EvalBatch(
        config,
        cases,
        judge=judge,
        settings=settings,
        concurrency=concurrency,
        variables=variables,
        assume_yes=assume_yes,
        on_outcome=on_outcome,
    )
    started = time.monotonic()
    async for _ in batch.results():  # the batch keeps each outcome with its judgement
        pass
    reports = {case.name: CaseReport(case.name) for case in cases}
    for outcome in sorted(batch.outcomes, key=lambda o: (o.case, o.index)):
        reports[outcome.case].add(outcome)
    return EvalReport(
        agent=config.name,
        path=str(config.path),
        revision=revision,
        cases=list(reports.values()),
        seconds=time.monotonic() - started,
        judge=judge.name if judge is not None else None,
    )
