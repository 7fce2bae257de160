"""Run every benchmark: ``python -m bench`` (each one also runs alone: ``python -m bench.NAME``)."""

from __future__ import annotations

import argparse
import shutil
import sys


def main(argv: list[str] | None = None) -> int:
    """Parse the command line (``--help`` says what runs), then run the benches one after another."""
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description=(
            "Run the benchmarks one after another: startup, loop, reload, openapi_convert, output, "
            "answer_check, skills, report, and mcp_overhead where node is installed (docs: bench/README.md). "
            "Each one also runs alone, with its own options: python -m bench.NAME --help."
        ),
    )
    parser.parse_args(argv)
    from bench import answer_check, loop, openapi_convert, output, reload, report, skills, startup

    results = [startup.main([]), loop.main([]), reload.main([]), openapi_convert.main([]), output.main([])]
    results.append(answer_check.main([]))
    results.append(skills.main([]))
    results.append(report.main([]))
    if shutil.which("node"):
        from bench import mcp_overhead

        results.append(mcp_overhead.main([]))
    return max(results)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
