"""``runner eval``: an agent's cases run live, repeated, judged, with pass rates and their confidence
intervals, and compared with another revision (SPEC section 18).

Module map:

- ``run``: the runs of the cases as one ``Batch``, each checked (``runner test``'s expectations,
  then the judge); ``CaseReport`` and ``EvalReport``.
- ``judge``: the judge model, its prompt, and reading its verdict.
- ``stats``: the Wilson score interval and Fisher's exact test.
- ``compare``: two reports of one agent at two revisions, case by case.
- (``--against`` reads the other revision with ``runner.agentfile.revisions.at_revision``, as ``--rev`` does.)
"""

from __future__ import annotations

from runner.evals.compare import CaseChange, Comparison, compare
from runner.evals.judge import Judge, JudgeError, Verdict, judge_config, parse_verdict, require_judge
from runner.evals.run import CaseReport, EvalReport, RunOutcome, eval_cases, run_eval
from runner.evals.stats import fisher_exact, wilson

__all__ = [
    "CaseChange",
    "CaseReport",
    "Comparison",
    "EvalReport",
    "Judge",
    "JudgeError",
    "RunOutcome",
    "Verdict",
    "compare",
    "eval_cases",
    "fisher_exact",
    "judge_config",
    "parse_verdict",
    "require_judge",
    "run_eval",
    "wilson",
]
