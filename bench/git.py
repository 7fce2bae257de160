"""``--rev`` start-up and ``runner diff`` against the same commands on the work tree (issue 16).

A copy of ``examples/`` is committed twice in a temporary repository (the second commit edits a
limit of the weather report). Measured, interleaved, medians:

- ``runner run weather_report.yaml --replay CASSETTE -p ...`` from the work tree (the floor), the same
  with ``--rev HEAD`` and the revision's tree cached (target: within 1.3x), and cold (the cache
  removed before every run; shown, not judged);
- ``runner diff HEAD~1 HEAD weather_report.yaml`` against ``runner validate --rev HEAD~1`` plus
  ``runner validate --rev HEAD`` of the same file, run one after the other (target: within 2x).

Run: ``python -m bench.git [--runs N]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.common import report, time_command

ROOT = Path(__file__).resolve().parent.parent
QUESTION = "Do I need an umbrella in Vancouver over the next two days?"


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True,
                   capture_output=True)  # fmt: skip


def _repository(folder: Path) -> Path:
    repo = folder / "repo"
    shutil.copytree(ROOT / "examples", repo / "examples")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "one")
    agent = repo / "examples" / "weather_report.yaml"
    text = agent.read_text(encoding="utf-8")
    agent.write_text(text.replace("max_steps:", "max_steps: 7 #", 1) + "\n# edited\n", encoding="utf-8")
    _git(repo, "commit", "-q", "-am", "two")
    return repo


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=9, help="runs per command (median; at least 7)")
    args = parser.parse_args(argv)
    runs = max(args.runs, 7)
    runner = str(Path(sys.executable).parent / "runner")
    with tempfile.TemporaryDirectory() as temp:
        folder = Path(temp)
        repo = _repository(folder)
        home = folder / "home"
        os.environ["RUNNER_HOME"] = str(home)
        os.environ.pop("OPENAI_BASE_URL", None)
        agent = str(repo / "examples" / "weather_report.yaml")
        cassette = str(repo / "examples" / "cassettes" / "weather-report-vancouver.jsonl")
        run = [runner, "run", agent, "--replay", cassette, "-p", QUESTION]
        cold = ["sh", "-c", f'rm -rf "{home}/git" && exec "$0" "$@"', *run, "--rev", "HEAD"]
        commands = {
            "runner run (work tree)": run,
            "runner run --rev HEAD (cached)": [*run, "--rev", "HEAD"],
            "runner run --rev HEAD (cold)": cold,
            "runner validate --rev HEAD~1 + --rev HEAD": [
                "sh", "-c", f'"$0" validate {agent} --rev HEAD~1 && "$0" validate {agent} --rev HEAD', runner,
            ],
            "runner diff HEAD~1 HEAD": [runner, "diff", "HEAD~1", "HEAD", agent],
        }  # fmt: skip
        samples: dict[str, list[float]] = {name: [] for name in commands}
        for argv in commands.values():
            time_command(argv, cwd=str(repo))
        for _ in range(runs):
            for name, argv in commands.items():
                samples[name].append(time_command(argv, cwd=str(repo)))
    medians = {name: statistics.median(values) for name, values in samples.items()}
    run_names = ["runner run (work tree)", "runner run --rev HEAD (cached)", "runner run --rev HEAD (cold)"]
    ok = report(
        f"runner run --rev start-up (median of {runs})",
        {name: medians[name] for name in run_names},
        floor="runner run (work tree)",
        target=1.3,
        judged=("runner run --rev HEAD (cached)",),
    )
    diff_names = ["runner validate --rev HEAD~1 + --rev HEAD", "runner diff HEAD~1 HEAD"]
    ok = (
        report(
            f"runner diff of two revisions (median of {runs})",
            {name: medians[name] for name in diff_names},
            floor="runner validate --rev HEAD~1 + --rev HEAD",
            target=2.0,
        )
        and ok
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
