"""``runner eval --against REV``: the change of each case's pass rate between two revisions.

Only cases present in both are compared (by name); the others are listed. A change is significant
when Fisher's exact test (two-sided) on the two revisions' passes and failures gives p < 0.05; a
significant drop is a regression. A case with no judged run on a side (every run an error) cannot
be compared: it is ``comparable: false``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from runner.evals.run import CaseReport, EvalReport
from runner.evals.stats import ALPHA, fisher_exact

__all__ = ["CaseChange", "Comparison", "compare"]


@dataclass(frozen=True)
class CaseChange:
    """One case at the base revision (``before``) and as it is now (``after``)."""

    name: str
    before: CaseReport
    after: CaseReport

    @property
    def comparable(self) -> bool:
        return self.before.judged > 0 and self.after.judged > 0

    @property
    def delta(self) -> float | None:
        """The pass rate now minus the pass rate at the base revision."""
        if self.before.pass_rate is None or self.after.pass_rate is None:
            return None
        return self.after.pass_rate - self.before.pass_rate

    @property
    def p_value(self) -> float | None:
        if not self.comparable:
            return None
        b, a = self.before, self.after
        return fisher_exact(a.passes, a.failures, b.passes, b.failures)

    @property
    def significant(self) -> bool:
        return self.p_value is not None and self.p_value < ALPHA

    @property
    def regression(self) -> bool:
        return self.significant and (self.delta or 0.0) < 0

    @property
    def verdict(self) -> str:
        if not self.comparable:
            return "not compared"
        if not self.significant:
            return "no significant change"
        return "regression" if self.regression else "improvement"

    def as_dict(self) -> dict[str, Any]:
        p_value = self.p_value
        return {
            "name": self.name,
            "before": self.before.pass_rate,
            "after": self.after.pass_rate,
            "delta": None if self.delta is None else round(self.delta, 4),
            "p_value": None if p_value is None else round(p_value, 6),
            "comparable": self.comparable,
            "significant": self.significant,
            "regression": self.regression,
            "verdict": self.verdict,
        }


@dataclass
class Comparison:
    """Every case in both revisions, and the cases of only one."""

    changes: list[CaseChange] = field(default_factory=list)
    only_now: list[str] = field(default_factory=list)
    only_before: list[str] = field(default_factory=list)

    @property
    def regressions(self) -> list[CaseChange]:
        return [change for change in self.changes if change.regression]

    def as_dict(self) -> dict[str, Any]:
        return {
            "alpha": ALPHA,
            "test": "fisher-exact-two-sided",
            "cases": [change.as_dict() for change in self.changes],
            "only_now": self.only_now,
            "only_before": self.only_before,
        }


def compare(now: EvalReport, before: EvalReport) -> Comparison:
    """The cases of ``now`` that ``before`` has too, compared; the rest listed (in file order)."""
    comparison = Comparison()
    for case in now.cases:
        old = before.case(case.name)
        if old is None:
            comparison.only_now.append(case.name)
        else:
            comparison.changes.append(CaseChange(case.name, old, case))
    names = {case.name for case in now.cases}
    comparison.only_before = [case.name for case in before.cases if case.name not in names]
    return comparison
