"""The statistics and the judge's verdict reading of `runner eval`, against known numbers."""

from __future__ import annotations

import itertools
import math

import pytest

from runner.evals.judge import JudgeError, parse_verdict
from runner.evals.stats import fisher_exact, wilson


@pytest.mark.parametrize(
    ("passes", "runs", "low", "high"),
    [
        (5, 10, 0.2366, 0.7634),  # the textbook 5 of 10
        (0, 10, 0.0, 0.2775),
        (10, 10, 0.7225, 1.0),
        (7, 10, 0.3968, 0.8922),
        (15, 20, 0.5313, 0.8881),
        (1, 3, 0.0615, 0.7923),
    ],
)
def test_wilson_interval_matches_known_values(passes: int, runs: int, low: float, high: float) -> None:
    got = wilson(passes, runs)
    assert got == pytest.approx((low, high), abs=5e-5)  # published to 4 decimals


def test_wilson_of_no_runs_says_nothing() -> None:
    assert wilson(0, 0) == (0.0, 1.0)


@pytest.mark.parametrize(
    ("table", "p_value"),
    [
        ((3, 1, 1, 3), 0.4857142857),  # Fisher's lady tasting tea: 34/70
        ((10, 0, 0, 10), 2 / math.comb(20, 10)),
        ((6, 2, 1, 4), 0.1025641026),  # scipy.stats.fisher_exact's documented example
        ((8, 2, 1, 5), 0.0349650350),
        ((5, 5, 5, 5), 1.0),
        ((0, 10, 0, 10), 1.0),  # no passes on either side: nothing to compare
    ],
)
def test_fisher_exact_matches_known_values(table: tuple[int, int, int, int], p_value: float) -> None:
    assert fisher_exact(*table) == pytest.approx(p_value, rel=1e-8)


def _brute_force(a: int, b: int, c: int, d: int) -> float:
    """Every 2x2 table with the same margins, its probability from factorials."""
    row, col, n = a + b, a + c, a + b + c + d

    def prob(x: int) -> float:
        cells = (x, row - x, col - x, n - row - col + x)
        if min(cells) < 0:
            return 0.0
        num = math.factorial(row) * math.factorial(n - row) * math.factorial(col) * math.factorial(n - col)
        return num / (math.factorial(n) * math.prod(math.factorial(v) for v in cells))

    observed = prob(a)
    return min(1.0, sum(p for x in range(n + 1) if (p := prob(x)) > 0 and p <= observed * (1 + 1e-9)))


def test_fisher_exact_agrees_with_a_brute_force_over_small_tables() -> None:
    for a, b, c, d in itertools.product(range(5), repeat=4):
        assert fisher_exact(a, b, c, d) == pytest.approx(_brute_force(a, b, c, d), rel=1e-9, abs=1e-12)


@pytest.mark.parametrize(
    ("text", "passed", "reason"),
    [
        ('{"verdict": "pass", "reason": "polite"}', True, "polite"),
        ('```json\n{"verdict": "FAIL", "reason": "rude"}\n```', False, "rude"),
        ('Here is my grade: {"verdict": "fail", "reason": "no"} thanks', False, "no"),
        ('{"note": 1} then {"verdict": "pass"}', True, ""),
    ],
)
def test_a_verdict_is_read_robustly(text: str, passed: bool, reason: str) -> None:
    assert parse_verdict(text) == (passed, reason)


@pytest.mark.parametrize(
    "text", ["", "I think it is fine.", '{"verdict": "maybe", "reason": "?"}', '{"verdict": true}', "{broken"]
)
def test_an_answer_without_a_verdict_is_a_judge_error(text: str) -> None:
    with pytest.raises(JudgeError, match="the judge did not answer"):
        parse_verdict(text)
