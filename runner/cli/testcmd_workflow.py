"""``runner test team.yaml``: the team file's ``tests:`` cases, each a whole run of its ``workflow:``.

A case runs the workflow on its ``input`` (and ``vars``) with every model call answered from the
case's cassette, one for the whole workflow (``runner.workflow.cassette``: steps one at a time, in
the file's order); ``--update`` records it again against the live models, into a file beside it that
replaces the cassette only when the case passes. Then ``expect`` is checked on the workflow's
output: text as it is, an object or a list as JSON (``output_contains``, ``output_matches``), the
value itself for ``output_schema`` / ``output_json``, and ``max_steps`` against the agent steps it
ran. ``tools_called`` cannot be checked (each step is its own session) and fails the case.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner.agentfile.config import TestCaseConfig
from runner.agentfile.workflow import WorkflowConfig
from runner.errors import RunnerError
from runner.runtime.settings import RuntimeSettings
from runner.testing.expect import Structured, check_expectations

if TYPE_CHECKING:
    from runner.cli.testcmd import CaseOutcome

__all__ = ["run_workflow_case"]


def _answer(value: Any) -> tuple[str, Structured]:
    if isinstance(value, str):
        return value, Structured.from_text(value)
    if value is None:
        return "", Structured(missing="the workflow gave no output")
    return json.dumps(value, ensure_ascii=False), Structured(value)


async def run_workflow_case(
    path: Path, workflow: WorkflowConfig, case: TestCaseConfig, settings: RuntimeSettings, *, update: bool
) -> CaseOutcome:
    """Run one case of the workflow and check it."""
    from runner.cli.testcmd import CaseOutcome, _in_test_terms, _keep_recording
    from runner.workflow import WorkflowEngine, open_record
    from runner.workflow.cassette import open_cassette
    from runner.workflow.engine import load_configs

    outcome = CaseOutcome(workflow.name, case.name)
    if case.cassette is None:
        outcome.failures.append(
            "no cassette: add `cassette:` to the case and record it with runner test --update"
        )
        return outcome
    recording = case.cassette.with_name(case.cassette.name + ".recording")
    if update:
        settings = replace(settings, record=recording, replay=None)
    else:
        settings = replace(settings, record=None, replay=case.cassette)
    failures = outcome.failures
    if case.expect.tools_called:
        failures.append("expect.tools_called cannot be checked for a workflow (each step is its own session)")
    start = time.perf_counter()
    try:
        configs = load_configs(path, workflow)
        cassette = open_cassette(workflow, path, configs, settings)
        secrets = frozenset().union(*(config.secrets for config in configs.values()))
        record = open_record(
            settings.home,
            workflow=workflow.name,
            path=path,
            input=case.input,
            variables=dict(case.vars),
            secrets=secrets,
            write=False,
        )
        engine = WorkflowEngine(
            path,
            workflow,
            settings,
            input=case.input,
            variables=dict(case.vars),
            record=record,
            configs=configs,
            assume_yes=True,
            cassette=cassette,
        )
        result = await engine.run()
    except RunnerError as exc:
        failures.append(_in_test_terms(exc, update=update))
        result = None
    outcome.seconds = time.perf_counter() - start
    if result is not None:
        if result.exit_code != 0:
            failures.append(f"the workflow exited {result.exit_code}: " + "; ".join(result.notes))
        else:
            failures.extend(f"the workflow: {note}" for note in result.notes if "were not used" in note)
            text, structured = _answer(result.output)
            failures.extend(
                check_expectations(case, text, [], engine.budget.agent_steps, structured=structured)
            )
    if update:
        _keep_recording(recording, case.cassette, outcome)
    return outcome
