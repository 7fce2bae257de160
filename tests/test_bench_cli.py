"""``python -m bench`` is a command like the others: ``--help`` says what it runs and runs nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_bench_help_prints_help_and_starts_no_benchmark() -> None:
    # issue 23 item 21: `python -m bench --help` started the benchmarks (minutes of timing runs)
    result = subprocess.run(
        [sys.executable, "-m", "bench", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: python -m bench")
    assert "python -m bench.NAME" in " ".join(result.stdout.split())  # argparse wraps the text
    assert "##" not in result.stdout  # no bench reported a figure


def test_bench_refuses_an_unknown_option_before_running() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "bench", "--fast"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert "unrecognized arguments: --fast" in result.stderr
