"""Suite-wide guards: no test may reach a real provider (or anything off this machine), transcripts valid."""

from __future__ import annotations

import os
from typing import Any

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
for _name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "OPENAI_BASE_URL", "RUNNER_MODEL"):
    os.environ.pop(_name, None)

# The no-network guard is runner's pytest plugin (runner.testing.pytest_plugin), switched on for every
# test by ``runner_no_network = true`` in pyproject.toml: users' agent tests get the same one.


def _invalid_transcripts(root: Any) -> list[str]:
    """Every record of every transcript under ``root`` checked against schemas/transcript.schema.json."""
    import json
    from pathlib import Path

    from jsonschema import Draft202012Validator

    from runner.resources import load_schema

    validator = Draft202012Validator(load_schema("transcript"))
    problems = []
    for path in Path(root).rglob("sessions/*.jsonl"):
        lines = path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                if number == len(lines):
                    continue  # a torn last line: what a kill -9 mid-write leaves, by design
                problems.append(f"{path}:{number}: not JSON")
                continue
            if number == 1 and record.get("type") != "header":
                problems.append(f"{path}:1: the first record is not a header")
            for error in validator.iter_errors(record):
                problems.append(f"{path}:{number}: {error.message}")
    return problems


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Validate every transcript the suite wrote (SPEC section 12); a bad one fails the run."""
    factory = getattr(session.config, "_tmp_path_factory", None)
    if factory is None:
        return
    try:
        root = factory.getbasetemp()
    except (OSError, ValueError):
        return
    problems = _invalid_transcripts(root)
    if problems:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(
                f"{len(problems)} transcript record(s) violate transcript.schema.json:", red=True
            )
            for problem in problems[:20]:
                reporter.write_line("  " + problem, red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
