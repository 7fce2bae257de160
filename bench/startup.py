"""Start-up of ``runner --help``, ``validate examples/*.yaml`` and ``render`` against the import floor.

SPEC section 14: ``--help`` and ``validate`` within 2x of ``python -c "import yaml, jsonschema, jinja2"``
in the same venv. ``runner render examples/weather.yaml`` without an ``api_base`` (its model
``openai/gpt-4o-mini`` goes to litellm) is shown for reference: it opens the agent's tool sources and
decides ``auto`` from litellm's data file, without importing litellm. Run:
``python -m bench.startup [--runs N]``.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
from pathlib import Path

from bench.common import interleaved, report

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=9, help="runs per command (median; at least 7)")
    args = parser.parse_args(argv)
    runner = str(Path(sys.executable).parent / "runner")
    examples = sorted(glob.glob(str(ROOT / "examples" / "*.yaml")))
    commands = {
        'python -c "import yaml, jsonschema, jinja2"': [
            sys.executable,
            "-c",
            "import yaml, jsonschema, jinja2",
        ],
        "runner --help": [runner, "--help"],
        "runner validate examples/*.yaml": [runner, "validate", *examples],
        # no OPENAI_BASE_URL: the example's model has no api_base, so it is not on the fast path
        "runner render weather.yaml (no api_base)": [
            *("env", "-u", "OPENAI_BASE_URL", "-u", "RUNNER_MODEL"),
            *(runner, "render", str(ROOT / "examples" / "weather.yaml")),
        ],
    }
    # an installed runner starts from cached bytecode: let the warm-up run write it, as installing does
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    medians = interleaved(commands, runs=max(args.runs, 7), cwd=str(ROOT))
    ok = report(
        f"start-up (median of {max(args.runs, 7)})",
        medians,
        floor='python -c "import yaml, jsonschema, jinja2"',
        target=2.0,
        judged=("runner --help", "runner validate examples/*.yaml"),
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
