"""Shared helpers: interleaved timing of commands, medians and ratios."""

from __future__ import annotations

import math
import re
import statistics
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

#: A Python tool module with one tool, ``add``, that the benches give their agents.
ADD_TOOL_MODULE = '''
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
'''


def time_command(argv: Sequence[str], *, cwd: str | None = None) -> float:
    """Wall-clock seconds of one run of ``argv`` (output discarded; a failure raises)."""
    start = time.perf_counter()
    subprocess.run(argv, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def interleaved(commands: dict[str, Sequence[str]], *, runs: int, cwd: str | None = None) -> dict[str, float]:
    """Median seconds of each command, the commands taking turns so drift hits all alike."""
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for argv in commands.values():  # one warm-up each (page cache, .pyc files)
        time_command(argv, cwd=cwd)
    for _ in range(runs):
        for name, argv in commands.items():
            samples[name].append(time_command(argv, cwd=cwd))
    return {name: statistics.median(values) for name, values in samples.items()}


def report(
    title: str,
    medians: dict[str, float],
    *,
    floor: str,
    target: float,
    ratios: dict[str, float] | None = None,
    judged: Sequence[str] | None = None,
) -> bool:
    """Print medians and ratios to the floor; True when every judged ratio is within ``target``.

    ``ratios``, when given, are the medians of per-round ratios (each contender over the floor's run
    of the same round); they replace the ratio of the medians, which drift between rounds disturbs more.
    ``judged`` names the contenders the target applies to (default: all but the floor); the others
    are shown for reference.
    """
    print(f"## {title}")
    base = medians[floor]
    ok = True
    for name, value in medians.items():
        ratio = ratios[name] if ratios is not None else value / base
        counts = name != floor and (judged is None or name in judged)
        mark = ("  ok" if ratio <= target else f"  OVER {target}x") if counts else ""
        ok = ok and (not counts or ratio <= target)
        print(f"{name:<46} {value * 1000:8.1f} ms  {ratio:5.2f}x{mark}")
    return ok


def paired_ratios(samples: dict[str, list[float]], floor: str) -> dict[str, float]:
    """Median over rounds of each contender's time divided by the floor's time in the same round."""
    return {
        name: statistics.median(v / f for v, f in zip(values, samples[floor], strict=True))
        for name, values in samples.items()
    }


def median_interval(values: Sequence[float], z: float = 1.96) -> tuple[float, float]:
    """A distribution-free ~95 % interval of the median of ``values`` (``z`` 1.96): the order
    statistics whose ranks lie ``z`` standard deviations of a binomial(n, 1/2) either side of n/2."""
    ordered = sorted(values)
    n = len(ordered)
    spread = z * math.sqrt(n) / 2
    low, high = max(0, math.floor(n / 2 - spread)), min(n - 1, math.ceil(n / 2 + spread) - 1)
    return ordered[low], ordered[high]


def launch_serve(
    command: Sequence[str], env: Mapping[str, str], *, cwd: Path | None = None, timeout_s: float = 60
) -> tuple[subprocess.Popen[str], str]:
    """Start a ``runner serve ... --port 0`` command; the process and the ``http://HOST:PORT/v1`` URL
    its start-up line names (stderr stays a pipe for the caller)."""
    process = subprocess.Popen(
        list(command), cwd=cwd, env=dict(env), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    assert process.stderr is not None
    deadline = time.monotonic() + timeout_s
    while True:
        line = process.stderr.readline()
        match = re.search(r"at (http://\S+/v1)", line)
        if match:
            return process, match.group(1)
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError(f"runner serve did not start: {line}{process.stderr.read()}")
