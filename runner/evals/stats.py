"""The statistics of ``runner eval``: a Wilson score interval for a pass rate, Fisher's exact test
for a change between two revisions.

Both are a few lines of ``math`` (no scipy). Fisher's test is exact, so it holds at the small
counts an eval has (10 or 20 runs a case), where a z-test's normal approximation does not.
"""

from __future__ import annotations

import math

__all__ = ["ALPHA", "Z95", "fisher_exact", "wilson"]

#: The 97.5th percentile of the standard normal distribution: a 95% interval.
Z95 = 1.959963984540054
#: The significance level of ``--against``.
ALPHA = 0.05


def wilson(passes: int, runs: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of ``passes`` out of ``runs`` (95% by default); (0, 1) for no runs."""
    if runs <= 0:
        return 0.0, 1.0
    rate = passes / runs
    z2 = z * z
    denominator = 1 + z2 / runs
    centre = (rate + z2 / (2 * runs)) / denominator
    half = z * math.sqrt(rate * (1 - rate) / runs + z2 / (4 * runs * runs)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def fisher_exact(passes_a: int, fails_a: int, passes_b: int, fails_b: int) -> float:
    """The two-sided p-value of Fisher's exact test on the table [[passes_a, fails_a], [passes_b, fails_b]].

    With the margins fixed, the count of passes in row a is hypergeometric; the p-value sums the
    probabilities of every table no more likely than the observed one (as R's ``fisher.test`` and
    scipy's ``fisher_exact`` do). Integers throughout, so ties compare exactly.
    """
    row_a = passes_a + fails_a
    passes = passes_a + passes_b
    total = row_a + passes_b + fails_b
    if row_a == 0 or row_a == total or passes == 0 or passes == total:
        return 1.0

    def weight(x: int) -> int:  # the probability of x passes in row a, times comb(total, row_a)
        return math.comb(passes, x) * math.comb(total - passes, row_a - x)

    observed = weight(passes_a)
    low, high = max(0, row_a - (total - passes)), min(row_a, passes)
    tail = sum(w for x in range(low, high + 1) if (w := weight(x)) <= observed)
    return min(1.0, tail / math.comb(total, row_a))
